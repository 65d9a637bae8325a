#include "agent/testing/synthetic_content.h"

#include <algorithm>
#include <cstring>

namespace kerncap::agent::testing {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Byte i of block `block`.
struct BlockGen {
  int kind;  // 0 zeros, 1 bf16-like, 2 repeat, 3 random
  uint64_t key;
};

BlockGen Describe(uint64_t seed, uint32_t region, uint64_t block, uint64_t version) {
  uint64_t h = Mix(seed ^ Mix(region * 0x100000001b3ull ^ Mix(block)));
  bool is_mutable = (h >> 8) % 4 == 0;
  BlockGen g;
  g.kind = static_cast<int>(h % 4);
  if (is_mutable && version > 0 && g.kind == 0) g.kind = 3;  // a mutated zero block gets data
  g.key = g.kind == 2 ? Mix(seed) : Mix(h ^ (is_mutable ? Mix(version + 1) : 0));
  return g;
}

void FillBlockRange(const BlockGen& g, uint64_t from, uint64_t to, uint8_t* out) {
  switch (g.kind) {
    case 0:
      std::memset(out, 0, to - from);
      return;
    case 1:
      // bf16-like: plausible exponents, noisy mantissas (2 bytes per value).
      for (uint64_t i = from; i < to; ++i) {
        uint64_t r = Mix(g.key ^ (i / 2));
        out[i - from] = (i % 2 == 1) ? static_cast<uint8_t>(0x3C + (r & 0x3) + ((r >> 2) & 0x80))
                                     : static_cast<uint8_t>(r >> 8);
      }
      return;
    default:
      for (uint64_t i = from; i < to; ++i) {
        out[i - from] = static_cast<uint8_t>(Mix(g.key ^ (i / 8)) >> (8 * (i % 8)));
      }
      return;
  }
}

}  // namespace

void FillSynthetic(uint64_t seed, uint32_t region, uint64_t version, uint64_t offset,
                   uint64_t size, uint8_t* out) {
  uint64_t pos = offset;
  const uint64_t end = offset + size;
  while (pos < end) {
    uint64_t block = pos / kSyntheticBlock;
    uint64_t block_end = std::min(end, (block + 1) * kSyntheticBlock);
    BlockGen g = Describe(seed, region, block, version);
    FillBlockRange(g, pos - block * kSyntheticBlock, block_end - block * kSyntheticBlock,
                   out + (pos - offset));
    pos = block_end;
  }
}

std::string SyntheticBytes(uint64_t seed, uint32_t region, uint64_t version, uint64_t size) {
  std::string out(size, '\0');
  FillSynthetic(seed, region, version, 0, size, reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

std::string SyntheticMangled(const std::string& kernel) {
  return "_Z" + std::to_string(kernel.size()) + kernel + "v";
}

}  // namespace kerncap::agent::testing
