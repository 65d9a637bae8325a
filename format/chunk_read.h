// chunk_read.h: the one verified read of a stored chunk, for every place a
// chunk is stored: a pack file of a store (pack_format.h: the chunk is a
// blob, its XXH3 in the pack trailer) and a .kcap file (kcap_file.h: the
// chunk's bytes sit inside a record whose payload carries the XXH3). Used by
// kerncapd's reads, the read-only store reader and the .kcap reader, so the
// checks below are written once:
//   - the checksummed bytes are read with pread and their XXH3-64 must match
//     (a corrupt file is DataLoss, never decoded);
//   - raw chunks must hold exactly raw_size bytes and are read straight into
//     the caller's buffer in pieces, each hashed while it is still in the
//     core's cache (one pass over the bytes);
//   - zstd chunks are decompressed from a per-thread buffer, and the frame
//     checksum and size checked (codec.h).
#ifndef KERNCAP_FORMAT_CHUNK_READ_H_
#define KERNCAP_FORMAT_CHUNK_READ_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace kerncap::format {

// Where a chunk's stored bytes are in a file.
struct StoredChunkSpan {
  uint64_t offset = 0;       // file offset of the bytes the checksum covers
  uint64_t length = 0;       // how many bytes it covers
  uint64_t data_offset = 0;  // the chunk's stored bytes within them ...
  uint64_t data_length = 0;  // ... and their length
  int codec = 0;             // 1 raw, 2 zstd (0, from writers of old .kcap files: raw)
  uint64_t xxh3 = 0;         // XXH3-64 of the `length` covered bytes
};

// Reads the chunk at `span` of `fd` into exactly `raw_size` bytes at `out`.
// DataLoss prefixed with what() ("chunk 1f2e in pack 3a at offset 4096") on
// a short file, a checksum mismatch, a size mismatch or a bad frame.
// Thread-safe.
absl::Status ReadVerifiedChunk(int fd, const StoredChunkSpan& span, uint32_t raw_size, char* out,
                               absl::FunctionRef<std::string()> what);

}  // namespace kerncap::format

#endif  // KERNCAP_FORMAT_CHUNK_READ_H_
