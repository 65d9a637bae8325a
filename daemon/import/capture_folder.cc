#include "daemon/import/capture_folder.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace kerncap::import {
namespace {

absl::Status Refused(absl::string_view name, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("reference capture: ", name, ": ", why));
}

}  // namespace

CaptureFolder::File::~File() { ::close(fd_); }

CaptureFolder::~CaptureFolder() { ::close(fd_); }

absl::StatusOr<std::unique_ptr<CaptureFolder>> CaptureFolder::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("reference capture: ", path, " is not a directory (", strerror(errno), ")"));
  }
  return std::unique_ptr<CaptureFolder>(new CaptureFolder(path, fd));
}

absl::StatusOr<std::unique_ptr<CaptureFolder::File>> CaptureFolder::OpenFile(
    absl::string_view relative) const {
  std::vector<absl::string_view> parts = absl::StrSplit(relative, '/');
  for (absl::string_view p : parts) {
    if (!IsSafePathComponent(p)) {
      return Refused(relative, "not a plain name inside the folder (no '..', '/' or empty parts)");
    }
  }
  int dir = fd_;
  std::vector<int> opened;
  struct CloseAll {
    std::vector<int>* fds;
    ~CloseAll() {
      for (int f : *fds) ::close(f);
    }
  } close_all{&opened};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string name(parts[i]);
    int sub = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(relative, " is missing"));
      if (errno == ELOOP || errno == ENOTDIR) {
        return Refused(relative, absl::StrCat(name, " is a symbolic link or not a directory"));
      }
      return ErrnoError(errno, absl::StrCat("open ", path_, "/", relative));
    }
    opened.push_back(sub);
    dir = sub;
  }
  const std::string leaf(parts.back());
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  int fd = ::openat(dir, leaf.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(relative, " is missing"));
    if (errno == ELOOP) return Refused(relative, "is a symbolic link (not followed)");
    return ErrnoError(errno, absl::StrCat("open ", path_, "/", relative));
  }
  struct Guard {
    int fd;
    ~Guard() {
      if (fd >= 0) ::close(fd);
    }
  } guard{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoError(errno, absl::StrCat("stat ", relative));
  if (!S_ISREG(st.st_mode)) return Refused(relative, "is not a regular file");
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return ErrnoError(errno, absl::StrCat("fcntl ", relative));
  }
  guard.fd = -1;
  return std::make_unique<File>(fd, static_cast<uint64_t>(st.st_size));
}

absl::StatusOr<std::string> CaptureFolder::ReadFile(absl::string_view relative,
                                                    uint64_t max_bytes) const {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<File> f, OpenFile(relative));
  if (f->size() > max_bytes) {
    return Refused(relative, absl::StrCat("holds ", f->size(), " bytes, more than the ",
                                          max_bytes, " such a file may have"));
  }
  std::string out(f->size(), '\0');
  KC_RETURN_IF_ERROR(PreadAll(f->fd(), out.data(), out.size(), 0, absl::StrCat("read ", relative)));
  return out;
}

bool CaptureFolder::HasFile(absl::string_view relative) const { return OpenFile(relative).ok(); }

}  // namespace kerncap::import
