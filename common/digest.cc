#include "common/digest.h"

#include <openssl/sha.h>
#include <xxhash.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace kerncap {

std::string Digest::ToHex() const {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), kSize));
}

absl::StatusOr<Digest> Digest::FromHex(absl::string_view hex) {
  if (hex.size() != 2 * kSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("digest must be 64 hex characters, got ", hex.size()));
  }
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat("digest is not hex: ", hex));
    }
  }
  return FromBytes(absl::HexStringToBytes(hex));
}

absl::StatusOr<Digest> Digest::FromBytes(absl::string_view raw) {
  if (raw.size() != kSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("digest must be 32 bytes, got ", raw.size()));
  }
  Digest d;
  std::memcpy(d.bytes.data(), raw.data(), kSize);
  return d;
}

Digest Sha256(const void* data, size_t size) {
  Digest d;
  SHA256(static_cast<const unsigned char*>(data), size, d.bytes.data());
  return d;
}

uint64_t Xxh3(const void* data, size_t size) { return XXH3_64bits(data, size); }

bool IsAllZero(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  // Word-at-a-time scan; compilers vectorise the inner OR-reduction.
  size_t i = 0;
  constexpr size_t kBlock = 256;
  while (i + kBlock <= size) {
    uint64_t acc = 0;
    for (size_t j = 0; j < kBlock; j += 8) {
      uint64_t w;
      std::memcpy(&w, p + i + j, 8);
      acc |= w;
    }
    if (acc != 0) return false;
    i += kBlock;
  }
  for (; i < size; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

}  // namespace kerncap
