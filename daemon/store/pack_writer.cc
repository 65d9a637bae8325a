#include "daemon/store/pack_writer.h"

#include "format/store_reader.h"  // kStoreDirMode, kStoreFileMode

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace kerncap::store {

std::string PackPath(const std::string& packs_dir, const std::string& name) {
  return absl::StrCat(packs_dir, "/", name.substr(0, 2), "/", name, ".pack");
}

absl::StatusOr<std::unique_ptr<PackWriter>> PackWriter::Create(const std::string& packs_dir,
                                                               TestHook hook,
                                                               WritebackFn writeback) {
  std::random_device rd;
  std::string name = absl::StrFormat("%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  std::string dir = absl::StrCat(packs_dir, "/", name.substr(0, 2));
  KC_RETURN_IF_ERROR(MakeDirs(dir, kStoreDirMode));
  std::string tmp = absl::StrCat(dir, "/tmp-", name, ".pack");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kStoreFileMode);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("create pack ", tmp));
  return std::unique_ptr<PackWriter>(new PackWriter(std::move(name), std::move(dir), std::move(tmp),
                                                    fd, std::move(hook), std::move(writeback)));
}

PackWriter::PackWriter(std::string name, std::string dir, std::string tmp_path, int fd,
                       TestHook hook, WritebackFn writeback)
    : name_(std::move(name)),
      dir_(std::move(dir)),
      tmp_path_(std::move(tmp_path)),
      fd_(fd),
      hook_(std::move(hook)),
      writeback_(std::move(writeback)) {}

PackWriter::~PackWriter() {
  if (!finished_) Abandon();
}

void PackWriter::Abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_path_.c_str());
}

absl::StatusOr<PackEntry> PackWriter::Append(const Digest& digest, uint8_t codec,
                                             absl::string_view stored, uint32_t raw_len,
                                             uint64_t xxh3) {
  if (finished_ || fd_ < 0) return absl::FailedPreconditionError("pack already finished");
  KC_RETURN_IF_ERROR(
      WriteAll(fd_, stored.data(), stored.size(), absl::StrCat("write pack ", tmp_path_)));
  PackEntry e;
  e.digest = digest;
  e.offset = offset_;
  e.stored_len = static_cast<uint32_t>(stored.size());
  e.raw_len = raw_len;
  e.codec = codec;
  e.xxh3 = xxh3;
  offset_ += stored.size();
  entries_.push_back(e);
  if (offset_ - writeback_from_ >= kWritebackBytes) {
    if (writeback_) {
      writeback_(fd_, writeback_from_, offset_ - writeback_from_);
    } else {
      // Best effort: an error here resurfaces in fdatasync.
      (void)::sync_file_range(fd_, static_cast<off64_t>(writeback_from_),
                              static_cast<off64_t>(offset_ - writeback_from_),
                              SYNC_FILE_RANGE_WRITE);
    }
    writeback_from_ = offset_;
  }
  if (hook_) hook_("pack.chunk_appended");
  return e;
}

absl::Status PackWriter::Finish() {
  if (finished_ || fd_ < 0) return absl::FailedPreconditionError("pack already finished");
  std::string trailer = EncodePackTrailer(entries_);
  if (hook_) hook_("pack.before_trailer");
  KC_RETURN_IF_ERROR(WriteAll(fd_, trailer.data(), trailer.size(),
                              absl::StrCat("write pack trailer ", tmp_path_)));
  offset_ += trailer.size();
  if (::fdatasync(fd_) != 0) return ErrnoError(errno, absl::StrCat("fdatasync ", tmp_path_));
  ::close(fd_);
  fd_ = -1;
  if (hook_) hook_("pack.before_rename");
  final_path_ = absl::StrCat(dir_, "/", name_, ".pack");
  if (::rename(tmp_path_.c_str(), final_path_.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("rename ", tmp_path_, " -> ", final_path_));
  }
  finished_ = true;
  KC_RETURN_IF_ERROR(FsyncDir(dir_));
  if (hook_) hook_("pack.published");
  return absl::OkStatus();
}

}  // namespace kerncap::store
