// codec.h: per-chunk compression. zstd level N (default 1) with the frame
// content checksum on, so a decode also verifies the raw bytes; a chunk is
// stored raw when compression saves less than 3% (decoding it would cost more
// than the space is worth).
#ifndef KERNCAP_FORMAT_CODEC_H_
#define KERNCAP_FORMAT_CODEC_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct ZSTD_CCtx_s ZSTD_CCtx;

namespace kerncap::store {

// Keep compressed output only when stored < kKeepRatio * raw.
inline constexpr double kKeepRatio = 0.97;

// One compressor per worker thread: ZSTD_CCtx allocation is ~1 MB of tables
// that we reuse for every chunk. Not thread-safe.
class ChunkCompressor {
 public:
  explicit ChunkCompressor(int level);
  ~ChunkCompressor();
  ChunkCompressor(const ChunkCompressor&) = delete;
  ChunkCompressor& operator=(const ChunkCompressor&) = delete;

  // Encodes `raw`; returns the codec byte (pack_format.h) and fills `out`
  // with the bytes to store (a copy of `raw` when stored raw).
  absl::StatusOr<uint8_t> Encode(absl::string_view raw, std::string* out);

 private:
  ZSTD_CCtx* cctx_;
  int level_;
};

// Decodes stored bytes into `raw_len` raw bytes at `out`. DataLoss (message
// prefixed with `what`) when the frame is corrupt, its checksum fails or its
// size is not raw_len. Thread-safe (one decompression context per thread).
absl::Status DecodeChunk(uint8_t codec, absl::string_view stored, uint32_t raw_len, char* out,
                         absl::string_view what);

}  // namespace kerncap::store

#endif  // KERNCAP_FORMAT_CODEC_H_
