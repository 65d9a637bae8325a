#include "format/codec.h"

#include <zstd.h>

#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "format/pack_format.h"

namespace kerncap::store {

ChunkCompressor::ChunkCompressor(int level) : cctx_(ZSTD_createCCtx()), level_(level) {
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
}

ChunkCompressor::~ChunkCompressor() { ZSTD_freeCCtx(cctx_); }

absl::StatusOr<uint8_t> ChunkCompressor::Encode(absl::string_view raw, std::string* out) {
  const size_t bound = ZSTD_compressBound(raw.size());
  out->resize(bound);
  const size_t n = ZSTD_compress2(cctx_, out->data(), bound, raw.data(), raw.size());
  if (ZSTD_isError(n)) {
    return absl::InternalError(absl::StrCat("zstd compress: ", ZSTD_getErrorName(n)));
  }
  if (static_cast<double>(n) >= kKeepRatio * static_cast<double>(raw.size())) {
    out->assign(raw.data(), raw.size());
    return kCodecRaw;
  }
  out->resize(n);
  return kCodecZstd;
}

absl::Status DecodeChunk(uint8_t codec, absl::string_view stored, uint32_t raw_len, char* out,
                         absl::string_view what) {
  if (codec == kCodecRaw) {
    if (stored.size() != raw_len) {
      return absl::DataLossError(
          absl::StrCat(what, ": raw chunk has ", stored.size(), " bytes, expected ", raw_len));
    }
    std::memcpy(out, stored.data(), raw_len);
    return absl::OkStatus();
  }
  if (codec != kCodecZstd) {
    return absl::DataLossError(absl::StrCat(what, ": unknown codec ", codec));
  }
  struct DCtxDeleter {
    void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
  };
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  const size_t n = ZSTD_decompressDCtx(dctx.get(), out, raw_len, stored.data(), stored.size());
  if (ZSTD_isError(n)) {
    return absl::DataLossError(absl::StrCat(what, ": zstd decode failed: ", ZSTD_getErrorName(n)));
  }
  if (n != raw_len) {
    return absl::DataLossError(absl::StrCat(what, ": decoded ", n, " bytes, expected ", raw_len));
  }
  return absl::OkStatus();
}

}  // namespace kerncap::store
