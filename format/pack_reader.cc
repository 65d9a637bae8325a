#include "format/pack_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace kerncap::store {

absl::StatusOr<std::unique_ptr<PackReader>> PackReader::Open(const std::string& path,
                                                             const std::string& name) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open pack ", path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(err, absl::StrCat("stat pack ", path));
  }
  std::unique_ptr<PackReader> r(new PackReader(path, name, fd, static_cast<uint64_t>(st.st_size)));
  const std::string what = absl::StrCat("pack ", name);
  if (r->size_ < kPackTailSize) {
    return absl::DataLossError(
        absl::StrCat(what, ": too short for a trailer (", r->size_, " bytes)"));
  }
  std::string tail(kPackTailSize, '\0');
  KC_RETURN_IF_ERROR(PreadAll(fd, tail.data(), tail.size(), r->size_ - kPackTailSize, what));
  KC_ASSIGN_OR_RETURN(uint64_t entries_len, DecodePackTail(tail, r->size_, what));
  std::string entries(entries_len, '\0');
  KC_RETURN_IF_ERROR(
      PreadAll(fd, entries.data(), entries.size(), r->size_ - kPackTailSize - entries_len, what));
  KC_ASSIGN_OR_RETURN(r->entries_, DecodePackEntries(tail, entries, r->size_, what));
  return r;
}

PackReader::~PackReader() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status PackReader::ReadBlob(uint64_t offset, uint32_t len, std::string* out) const {
  out->resize(len);
  return PreadAll(fd_, out->data(), len, offset, absl::StrCat("read pack ", name_, " at ", offset));
}

absl::Status PackReader::ReadInto(uint64_t offset, size_t len, char* out) const {
  return PreadAll(fd_, out, len, offset, absl::StrCat("read pack ", name_, " at ", offset));
}

}  // namespace kerncap::store
