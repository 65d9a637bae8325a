#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/errno_status.h"
#include "common/status_macros.h"

namespace kerncap {

absl::Status MakeDirs(const std::string& path, int mode) {
  if (path.empty()) return absl::OkStatus();
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  }
  std::string parent = DirName(path);
  if (parent != path && parent != "." && parent != "/") {
    KC_RETURN_IF_ERROR(MakeDirs(parent, mode));
  }
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return ErrnoError(errno, absl::StrCat("mkdir ", path));
  }
  return absl::OkStatus();
}

absl::Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open dir ", dir));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoError(err, absl::StrCat("fsync dir ", dir));
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const void* data, size_t size, absl::string_view what) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, what);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status PreadAll(int fd, void* data, size_t size, uint64_t offset,
                      absl::string_view what) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, what);
    }
    if (n == 0) return absl::DataLossError(absl::StrCat(what, ": unexpected end of file"));
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

absl::Status WriteFileAtomic(const std::string& path, absl::string_view data, int mode) {
  std::string dir = DirName(path);
  std::random_device rd;
  std::string tmp = absl::StrFormat("%s/tmp-%08x%08x", dir, rd(), rd());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("create ", tmp));
  absl::Status st = WriteAll(fd, data.data(), data.size(), absl::StrCat("write ", tmp));
  if (st.ok() && ::fdatasync(fd) != 0) st = ErrnoError(errno, absl::StrCat("fsync ", tmp));
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = ErrnoError(errno, absl::StrCat("rename ", tmp, " -> ", path));
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return FsyncDir(dir);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(err, absl::StrCat("stat ", path));
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  absl::Status s = PreadAll(fd, out.data(), out.size(), 0, absl::StrCat("read ", path));
  ::close(fd);
  if (!s.ok()) return s;
  return out;
}

bool IsSafePathComponent(absl::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  for (char c : name) {
    if (c == '/' || c == '\0') return false;
  }
  return true;
}

}  // namespace kerncap
