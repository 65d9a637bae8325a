// pack_reader.h: read access to a published pack file. Opening validates the
// trailer (pack_format.h); reads are positional so one open file serves any
// number of threads.
#ifndef KERNCAP_FORMAT_PACK_READER_H_
#define KERNCAP_FORMAT_PACK_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "format/pack_format.h"

namespace kerncap::store {

class PackReader {
 public:
  // Opens `path` and parses its trailer into entries(). DataLoss when the
  // trailer is missing or damaged; the caller decides to quarantine.
  static absl::StatusOr<std::unique_ptr<PackReader>> Open(const std::string& path,
                                                          const std::string& name);
  ~PackReader();
  PackReader(const PackReader&) = delete;
  PackReader& operator=(const PackReader&) = delete;

  // Reads `len` stored bytes at `offset`. Thread-safe.
  absl::Status ReadBlob(uint64_t offset, uint32_t len, std::string* out) const;
  // The same into `out` (`len` writable bytes). Thread-safe.
  absl::Status ReadInto(uint64_t offset, size_t len, char* out) const;
  // The open pack file (for chunk_read.h; owned by the reader).
  int fd() const { return fd_; }

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  uint64_t file_size() const { return size_; }
  const std::vector<PackEntry>& entries() const { return entries_; }
  void ReleaseEntries() { std::vector<PackEntry>().swap(entries_); }

 private:
  PackReader(std::string path, std::string name, int fd, uint64_t size)
      : path_(std::move(path)), name_(std::move(name)), fd_(fd), size_(size) {}

  std::string path_;
  std::string name_;
  int fd_;
  uint64_t size_;
  std::vector<PackEntry> entries_;
};

}  // namespace kerncap::store

#endif  // KERNCAP_FORMAT_PACK_READER_H_
