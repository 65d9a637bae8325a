// capture_folder.h: reads the files of a capture folder (a reference-tool
// capture, daemon/import/reference_capture.h) without ever leaving it.
//
// The folder is named by a user of the daemon's local socket and read with
// the daemon's rights, so every file is opened relative to the folder's own
// descriptor, one component at a time: symbolic links are never followed
// (O_NOFOLLOW on every component), ".." and absolute names are refused, and
// only regular files are read (opened O_NONBLOCK and checked with fstat, so a
// FIFO or device cannot block or feed the import). Sizes are checked against
// a bound before anything is read.
#ifndef KERNCAP_DAEMON_IMPORT_CAPTURE_FOLDER_H_
#define KERNCAP_DAEMON_IMPORT_CAPTURE_FOLDER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerncap::import {

class CaptureFolder {
 public:
  // A regular file of the folder, open for reading.
  class File {
   public:
    File(int fd, uint64_t size) : fd_(fd), size_(size) {}
    ~File();
    File(const File&) = delete;
    File& operator=(const File&) = delete;
    int fd() const { return fd_; }
    uint64_t size() const { return size_; }

   private:
    int fd_;
    uint64_t size_;
  };

  // InvalidArgument when `path` is not a directory.
  static absl::StatusOr<std::unique_ptr<CaptureFolder>> Open(const std::string& path);
  ~CaptureFolder();

  // `relative` ("memory/region_7f00.bin"): NotFound when absent;
  // InvalidArgument naming it when it escapes the folder, is (or passes
  // through) a symbolic link, or is not a regular file.
  absl::StatusOr<std::unique_ptr<File>> OpenFile(absl::string_view relative) const;
  // The whole file; InvalidArgument when it holds more than `max_bytes`.
  absl::StatusOr<std::string> ReadFile(absl::string_view relative, uint64_t max_bytes) const;
  // True when OpenFile would succeed.
  bool HasFile(absl::string_view relative) const;

  const std::string& path() const { return path_; }

 private:
  CaptureFolder(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

}  // namespace kerncap::import

#endif  // KERNCAP_DAEMON_IMPORT_CAPTURE_FOLDER_H_
