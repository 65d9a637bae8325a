// chunk_fingerprint.h: the 128-bit fingerprint an agent computes on the GPU
// for every chunk of device memory, so that chunks kerncapd already holds
// for this agent need not cross PCIe again (feature "chunk_fingerprints",
// messages.h), and so that the agent can tell, without a device copy of the
// pre image, which chunks a dispatch changed.
//
// Definition (the CPU reference below and the agent's GPU kernel,
// agent/cuda/cuda_snapshot.cc, compute exactly this). A chunk of n bytes is
// read as little-endian 64-bit words w_0..w_{m-1}, m = ceil(n / 8), the last
// one zero-padded. With
//   mix(x) = the 64-bit finalizer of MurmurHash3 (a bijection of 2^64)
//   K0 = 0x9e3779b97f4a7c15, K1 = 0xc2b2ae3d27d4eb4f
//   s_j = sum over i of mix(w_i + (i + 1) * K_j)        (mod 2^64, j = 0, 1)
// the fingerprint is
//   lo = mix(s_0 ^ n),  hi = mix(s_1 ^ ~n)
// Each lane is a sum of per-position terms, so the GPU computes it as a
// parallel reduction in any order and at memory speed.
//
// What it guarantees: two chunks of equal length that differ in exactly one
// word always differ in both lanes (mix is a bijection, so that word's term
// changes and no other does). For other differences it is a non-
// cryptographic hash: chunks not chosen against it collide with probability
// about 2^-128 per pair. It is not collision resistant against a chooser;
// that is why kerncapd never lets a fingerprint name bytes of another agent:
// it resolves a fingerprint only against chunks the same connection sent as
// bytes earlier (whose SHA-256 digests kerncapd computed itself), so a lying
// agent can at worst make its own capture wrong, as it could by sending
// wrong bytes. The store stays content-addressed by SHA-256.
//
// On the wire a fingerprint is 16 bytes: lo then hi, each little-endian.
#ifndef KERNCAP_COMMON_AGENT_LINK_CHUNK_FINGERPRINT_H_
#define KERNCAP_COMMON_AGENT_LINK_CHUNK_FINGERPRINT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kerncap::link {

struct ChunkFingerprint {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const ChunkFingerprint& o) const { return lo == o.lo && hi == o.hi; }
  bool operator!=(const ChunkFingerprint& o) const { return !(*this == o); }
};

inline constexpr uint64_t kFingerprintK0 = 0x9e3779b97f4a7c15ull;
inline constexpr uint64_t kFingerprintK1 = 0xc2b2ae3d27d4eb4full;
inline constexpr size_t kFingerprintWireBytes = 16;

// MurmurHash3's fmix64.
constexpr uint64_t FingerprintMix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

// The lane sums of words [first_word, first_word + count) of a chunk:
// partial sums add up (mod 2^64) to the chunk's.
struct FingerprintSums {
  uint64_t s0 = 0;
  uint64_t s1 = 0;
};
// Adds the terms of word `index` (0-based, in its chunk) to `sums`.
inline void AddFingerprintTerm(FingerprintSums* sums, uint64_t word, uint64_t index) {
  sums->s0 += FingerprintMix(word + (index + 1) * kFingerprintK0);
  sums->s1 += FingerprintMix(word + (index + 1) * kFingerprintK1);
}
// The little-endian word of the n <= 8 bytes at `p`, zero-padded.
uint64_t LoadFingerprintWord(const void* p, size_t n);
// The finished fingerprint of a chunk of `bytes` bytes from its lane sums.
ChunkFingerprint FinishFingerprint(const FingerprintSums& sums, uint64_t bytes);

// The reference: the fingerprint of `bytes` bytes at `data`.
ChunkFingerprint FingerprintChunk(const void* data, size_t bytes);
// The fingerprint of `bytes` zero bytes, without reading memory: O(bytes/8)
// arithmetic (about 2 ms for 4 MiB).
ChunkFingerprint ZeroChunkFingerprint(uint64_t bytes);
// Fingerprints of the chunks of [data, data+bytes): chunk i is bytes
// [i*chunk, min(bytes, (i+1)*chunk)).
std::vector<ChunkFingerprint> FingerprintChunks(const void* data, size_t bytes, size_t chunk);

// Wire form: 16 bytes per fingerprint.
std::string EncodeFingerprints(const std::vector<ChunkFingerprint>& fps);
// False when `payload` is not a whole number of fingerprints.
bool DecodeFingerprints(std::string_view payload, std::vector<ChunkFingerprint>* fps);

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_AGENT_LINK_CHUNK_FINGERPRINT_H_
