#include "common/agent_link/launch_shape.h"

#include <cstring>

#include "common/agent_link/chunk_fingerprint.h"  // FingerprintMix: MurmurHash3 fmix64

namespace kerncap::link {
namespace {

// FNV-1a, 64-bit, fed field by field.
class ShapeHash {
 public:
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= b[i];
      h_ *= 0x100000001b3ull;
    }
  }
  void U32(uint32_t v) { Bytes(&v, sizeof(v)); }
  void U64(uint64_t v) { Bytes(&v, sizeof(v)); }
  // fmix64 spreads FNV's weak high bits.
  uint64_t Finish() const { return FingerprintMix(h_); }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

// Stands for "a word that points into an allocation" in the hash.
constexpr uint64_t kPointerMarker = 0x50747250747250ull;  // "PtrPtrP"

}  // namespace

uint64_t LaunchShapeKey(PerShape mode, const LaunchShapeInputs& in,
                        const std::function<bool(uint64_t)>& points_into_allocation) {
  if (mode == PerShape::kOff) return 0;
  ShapeHash h;
  h.U32(static_cast<uint32_t>(mode));
  for (uint32_t v : in.grid) h.U32(v);
  for (uint32_t v : in.block) h.U32(v);
  h.U32(in.shared_mem_bytes);
  for (uint32_t v : in.cluster) h.U32(v);
  if (mode != PerShape::kScalars) return h.Finish();
  const std::string_view blob = in.argument_blob;
  h.U64(blob.size());
  size_t i = 0;
  for (; i + 8 <= blob.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, blob.data() + i, 8);
    if (word != 0 && points_into_allocation && points_into_allocation(word)) {
      h.U64(kPointerMarker);
    } else {
      h.U64(word);
    }
  }
  h.Bytes(blob.data() + i, blob.size() - i);
  return h.Finish();
}

std::string LaunchShapeKeyText(uint64_t key) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(kLaunchShapeKeyChars, '0');
  for (size_t i = 0; i < kLaunchShapeKeyChars; ++i) {
    out[kLaunchShapeKeyChars - 1 - i] = kDigits[(key >> (4 * i)) & 0xf];
  }
  return out;
}

bool IsLaunchShapeKey(std::string_view text) {
  if (text.size() != kLaunchShapeKeyChars) return false;
  for (char ch : text) {
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  }
  return true;
}

}  // namespace kerncap::link
