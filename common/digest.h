// digest.h: content addresses. A chunk, code object or manifest is named by
// the SHA-256 of its raw bytes (OpenSSL; SHA-NI accelerated where present).
// The cheap per-read integrity check of stored bytes is XXH3-64.
#ifndef KERNCAP_COMMON_DIGEST_H_
#define KERNCAP_COMMON_DIGEST_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace kerncap {

struct Digest {
  static constexpr size_t kSize = 32;
  std::array<uint8_t, kSize> bytes{};

  bool operator==(const Digest& o) const { return bytes == o.bytes; }
  bool operator!=(const Digest& o) const { return bytes != o.bytes; }
  bool operator<(const Digest& o) const { return bytes < o.bytes; }

  std::string ToHex() const;
  // Raw 32 bytes as a string (the form used in protobuf `bytes` fields).
  std::string ToBytes() const {
    return std::string(reinterpret_cast<const char*>(bytes.data()), kSize);
  }
  static absl::StatusOr<Digest> FromHex(absl::string_view hex);
  static absl::StatusOr<Digest> FromBytes(absl::string_view raw);

  template <typename H>
  friend H AbslHashValue(H h, const Digest& d) {
    // The digest is already uniformly distributed: 8 bytes are enough.
    uint64_t v;
    std::memcpy(&v, d.bytes.data(), sizeof(v));
    return H::combine(std::move(h), v);
  }
};

Digest Sha256(const void* data, size_t size);
inline Digest Sha256(absl::string_view s) { return Sha256(s.data(), s.size()); }

uint64_t Xxh3(const void* data, size_t size);

// True when all `size` bytes are zero (memory-speed, exits early).
bool IsAllZero(const void* data, size_t size);

}  // namespace kerncap

#endif  // KERNCAP_COMMON_DIGEST_H_
