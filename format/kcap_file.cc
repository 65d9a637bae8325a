#include "format/kcap_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace kerncap::kcap {
namespace {

void PutU32(char* p, uint32_t v) { absl::little_endian::Store32(p, v); }
void PutU64(char* p, uint64_t v) { absl::little_endian::Store64(p, v); }
uint32_t GetU32(const char* p) { return absl::little_endian::Load32(p); }
uint64_t GetU64(const char* p) { return absl::little_endian::Load64(p); }

}  // namespace

// ---- writer ----

absl::StatusOr<std::unique_ptr<KcapWriter>> KcapWriter::Create(const std::string& path) {
  std::string dir = DirName(path);
  std::string base =
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  std::string tmp = absl::StrCat(dir, "/.", base, ".tmp-XXXXXX");
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return ErrnoError(errno, absl::StrCat("create a temp file next to ", path));
  ::fchmod(fd, 0644);
  std::unique_ptr<KcapWriter> w(new KcapWriter(path, tmp, fd));
  char header[kKcapHeaderBytes];
  std::memcpy(header, kKcapMagic, 8);
  PutU32(header + 8, kKcapVersion);
  PutU32(header + 12, 0);
  KC_RETURN_IF_ERROR(WriteAll(fd, header, sizeof(header), tmp));
  w->bytes_written_ = sizeof(header);
  return w;
}

KcapWriter::~KcapWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(tmp_path_.c_str());
}

absl::Status KcapWriter::Append(const v1::TransferFrame& frame) {
  std::string payload;
  if (!frame.SerializeToString(&payload)) {
    return absl::InternalError("cannot serialize a transfer frame");
  }
  return AppendSerialized(payload);
}

absl::Status KcapWriter::AppendSerialized(absl::string_view payload) {
  if (finished_) return absl::FailedPreconditionError("kcap writer already finished");
  if (payload.empty() || payload.size() > kMaxKcapRecordBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("transfer frame of ", payload.size(), " bytes cannot be a kcap record"));
  }
  char head[kKcapRecordHeaderBytes];
  PutU32(head, static_cast<uint32_t>(payload.size()));
  PutU64(head + 4, Xxh3(payload.data(), payload.size()));
  KC_RETURN_IF_ERROR(WriteAll(fd_, head, sizeof(head), tmp_path_));
  KC_RETURN_IF_ERROR(WriteAll(fd_, payload.data(), payload.size(), tmp_path_));
  bytes_written_ += sizeof(head) + payload.size();
  ++records_;
  return absl::OkStatus();
}

absl::Status KcapWriter::Finish() {
  if (finished_) return absl::FailedPreconditionError("kcap writer already finished");
  if (records_ == 0) return absl::FailedPreconditionError("a kcap file needs a manifest record");
  char trailer[kKcapTrailerBytes];
  PutU32(trailer, 0);
  PutU64(trailer + 4, records_);
  std::memcpy(trailer + 12, kKcapEndMagic, 8);
  KC_RETURN_IF_ERROR(WriteAll(fd_, trailer, sizeof(trailer), tmp_path_));
  bytes_written_ += sizeof(trailer);
  if (::fsync(fd_) != 0) return ErrnoError(errno, absl::StrCat("fsync ", tmp_path_));
  if (::close(fd_) != 0) {
    fd_ = -1;
    return ErrnoError(errno, absl::StrCat("close ", tmp_path_));
  }
  fd_ = -1;
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("rename ", tmp_path_, " to ", path_));
  }
  finished_ = true;
  return FsyncDir(DirName(path_));
}

// ---- reader ----

absl::StatusOr<std::unique_ptr<KcapReader>> KcapReader::Open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return ErrnoError(errno, absl::StrCat("open ", path));
  struct stat st;
  if (::fstat(::fileno(f), &st) != 0) {
    int err = errno;
    std::fclose(f);
    return ErrnoError(err, absl::StrCat("stat ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    std::fclose(f);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  std::unique_ptr<KcapReader> r(new KcapReader(path, f, static_cast<uint64_t>(st.st_size)));
  char header[kKcapHeaderBytes];
  if (r->file_size_ < kKcapHeaderBytes) {
    return r->Corrupt(absl::StrCat("only ", r->file_size_, " bytes, not a kcap file"));
  }
  KC_RETURN_IF_ERROR(r->Read(header, sizeof(header), "header"));
  if (std::memcmp(header, kKcapMagic, 8) != 0) {
    return r->Corrupt("bad magic: not a kcap file");
  }
  uint32_t version = GetU32(header + 8);
  if (version != kKcapVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": kcap format version ", version, "; this kerncapctl reads version ", kKcapVersion));
  }
  return r;
}

KcapReader::~KcapReader() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status KcapReader::Corrupt(const std::string& what) const {
  return absl::DataLossError(
      absl::StrCat(path_, ": ", what, " (at byte ", offset_, " of ", file_size_, ")"));
}

absl::Status KcapReader::Read(void* out, size_t size, const char* what) {
  if (size > file_size_ - std::min(offset_, file_size_)) {
    return Corrupt(absl::StrCat("truncated: ", what, " needs ", size, " bytes, the file ends ",
                                file_size_ - offset_, " bytes later"));
  }
  if (std::fread(out, 1, size, file_) != size) {
    if (std::ferror(file_)) return ErrnoError(errno, absl::StrCat("read ", path_));
    return Corrupt(absl::StrCat("truncated while reading ", what));
  }
  offset_ += size;
  return absl::OkStatus();
}

absl::Status KcapReader::Skip(uint64_t size, const char* what) {
  if (size > file_size_ - std::min(offset_, file_size_)) {
    return Corrupt(absl::StrCat("truncated: ", what, " needs ", size, " bytes, the file ends ",
                                file_size_ - offset_, " bytes later"));
  }
  if (::fseeko(file_, static_cast<off_t>(size), SEEK_CUR) != 0) {
    return ErrnoError(errno, absl::StrCat("seek in ", path_));
  }
  offset_ += size;
  return absl::OkStatus();
}

absl::StatusOr<bool> KcapReader::ReadRecordHeader(RecordInfo* info) {
  if (done_) return false;
  if (offset_ == file_size_) {
    return Corrupt(absl::StrCat("truncated after ", records_, " records: no trailer"));
  }
  info->offset = offset_;
  char len_buf[4];
  KC_RETURN_IF_ERROR(Read(len_buf, sizeof(len_buf), "record length"));
  info->length = GetU32(len_buf);
  if (info->length == 0) {
    char rest[kKcapTrailerBytes - 4];
    KC_RETURN_IF_ERROR(Read(rest, sizeof(rest), "trailer"));
    if (std::memcmp(rest + 8, kKcapEndMagic, 8) != 0) return Corrupt("bad trailer magic");
    uint64_t count = GetU64(rest);
    if (count != records_) {
      return Corrupt(absl::StrCat("trailer says ", count, " records, the file has ", records_));
    }
    if (records_ == 0) return Corrupt("no manifest record");
    if (offset_ != file_size_) {
      return Corrupt(absl::StrCat(file_size_ - offset_, " unexpected bytes after the trailer"));
    }
    done_ = true;
    return false;
  }
  if (info->length > kMaxKcapRecordBytes) {
    return Corrupt(absl::StrCat("record ", records_ + 1, " claims ", info->length, " bytes"));
  }
  char sum_buf[8];
  KC_RETURN_IF_ERROR(Read(sum_buf, sizeof(sum_buf), "record checksum"));
  info->checksum = GetU64(sum_buf);
  // Before anyone allocates a buffer of that size for it.
  if (info->length > file_size_ - offset_) {
    return Corrupt(absl::StrCat("truncated: record ", records_ + 1, " claims ", info->length,
                                " bytes, the file ends ", file_size_ - offset_, " bytes later"));
  }
  return true;
}

absl::StatusOr<bool> KcapReader::Next(v1::TransferFrame* frame) {
  RecordInfo info;
  KC_ASSIGN_OR_RETURN(bool more, ReadRecordHeader(&info));
  if (!more) return false;
  buffer_.resize(info.length);
  KC_RETURN_IF_ERROR(Read(buffer_.data(), info.length, "record payload"));
  if (Xxh3(buffer_.data(), buffer_.size()) != info.checksum) {
    return Corrupt(absl::StrCat("record ", records_ + 1, " checksum mismatch"));
  }
  if (!frame->ParseFromString(buffer_)) {
    return Corrupt(absl::StrCat("record ", records_ + 1, " is not a TransferFrame"));
  }
  ++records_;
  if (records_ == 1 && !frame->has_manifest()) {
    return Corrupt("the first record does not carry a manifest");
  }
  if (records_ > 1 && !frame->has_chunk()) {
    return Corrupt(absl::StrCat("record ", records_, " does not carry a chunk"));
  }
  return true;
}

absl::StatusOr<bool> KcapReader::NextRecord(RecordInfo* info, size_t max_prefix,
                                            std::string* prefix) {
  KC_ASSIGN_OR_RETURN(bool more, ReadRecordHeader(info));
  if (!more) return false;
  const size_t head = std::min<size_t>(info->length, max_prefix);
  prefix->resize(head);
  KC_RETURN_IF_ERROR(Read(prefix->data(), head, "record payload"));
  KC_RETURN_IF_ERROR(Skip(info->length - head, "record payload"));
  ++records_;
  return true;
}

}  // namespace kerncap::kcap
