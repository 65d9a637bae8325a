// file_util.h: durable file operations. The store is the only copy of a
// capture, so every publish follows: write temp file -> fsync -> rename ->
// fsync the directory. Readers never see a half-written file.
#ifndef KERNCAP_COMMON_FILE_UTIL_H_
#define KERNCAP_COMMON_FILE_UTIL_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kerncap {

// Creates `path` and missing parents (mode 0755 unless given).
absl::Status MakeDirs(const std::string& path, int mode = 0755);

// fsyncs a directory so that a rename or create inside it is durable.
absl::Status FsyncDir(const std::string& dir);

// Writes `data` to `path` atomically and durably: a "tmp-" sibling is written,
// fsynced, renamed over `path`, and the directory fsynced. On any error the
// temp file is removed and `path` is untouched.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view data,
                             int mode = 0644);

absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes all of `data` to `fd` (retrying short writes and EINTR).
absl::Status WriteAll(int fd, const void* data, size_t size, absl::string_view what);
// Reads exactly `size` bytes at `offset` (DataLoss if the file is shorter).
absl::Status PreadAll(int fd, void* data, size_t size, uint64_t offset,
                      absl::string_view what);

// The directory part of `path` ("." when none).
std::string DirName(const std::string& path);

// True when `name` is a safe single path component: non-empty, no '/', not
// "." or "..", no NUL, at most 255 bytes.
bool IsSafePathComponent(absl::string_view name);

}  // namespace kerncap

#endif  // KERNCAP_COMMON_FILE_UTIL_H_
