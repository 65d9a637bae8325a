// pack_writer.h: writes one pack file (pack_format.h) durably.
//
// Publication protocol (the store is the only copy of a capture):
//   packs/<xx>/tmp-<name>.pack   blobs appended, then the trailer
//   fdatasync(tmp) -> rename(tmp, <name>.pack) -> fsync(packs/<xx>)
// Only after Finish() returns OK may the caller publish the entries in the
// chunk index. A writer destroyed without Finish() unlinks its temp file.
//
// While appending, writeback of every kWritebackBytes written is started
// (sync_file_range, non-blocking), so the disk works while the CPU is still
// compressing and the fdatasync in Finish() has little left to wait for.
//
// Not thread-safe: the store serializes appends to its open pack.
#ifndef KERNCAP_DAEMON_STORE_PACK_WRITER_H_
#define KERNCAP_DAEMON_STORE_PACK_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "format/pack_format.h"

namespace kerncap::store {

// Called at named points of the write protocol ("pack.before_rename", ...);
// fault tests use it to die at an exact step. Null in production.
using TestHook = std::function<void(absl::string_view point)>;

// Starts writeback of [offset, offset+len) of `fd` (the store hands it to a
// background thread, since sync_file_range can block on a congested disk).
// Must not keep `fd` past the call without dup()ing it.
using WritebackFn = std::function<void(int fd, uint64_t offset, uint64_t len)>;

class PackWriter {
 public:
  static constexpr uint64_t kWritebackBytes = 8ull << 20;

  // Creates packs_dir/<xx>/tmp-<name>.pack for a fresh random name.
  // `writeback` (optional) replaces the inline sync_file_range.
  static absl::StatusOr<std::unique_ptr<PackWriter>> Create(const std::string& packs_dir,
                                                            TestHook hook,
                                                            WritebackFn writeback = nullptr);
  ~PackWriter();
  PackWriter(const PackWriter&) = delete;
  PackWriter& operator=(const PackWriter&) = delete;

  // Appends one stored chunk; returns its entry (with the offset it got).
  absl::StatusOr<PackEntry> Append(const Digest& digest, uint8_t codec, absl::string_view stored,
                                   uint32_t raw_len, uint64_t xxh3);

  // Writes the trailer and publishes the pack durably (see above).
  absl::Status Finish();

  const std::string& name() const { return name_; }        // "<32 hex>"
  const std::string& path() const { return final_path_; }  // valid after Finish
  uint64_t bytes() const { return offset_; }
  const std::vector<PackEntry>& entries() const { return entries_; }

 private:
  PackWriter(std::string name, std::string dir, std::string tmp_path, int fd, TestHook hook,
             WritebackFn writeback);
  void Abandon();

  std::string name_;
  std::string dir_;
  std::string tmp_path_;
  std::string final_path_;
  int fd_;
  TestHook hook_;
  WritebackFn writeback_;
  uint64_t offset_ = 0;
  uint64_t writeback_from_ = 0;  // start of bytes not yet handed to writeback
  bool finished_ = false;
  std::vector<PackEntry> entries_;
};

// Path of the pack called `name` under packs_dir (packs/<first 2 hex>/<name>.pack).
std::string PackPath(const std::string& packs_dir, const std::string& name);

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_PACK_WRITER_H_
