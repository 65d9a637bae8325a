#include "common/agent_link/chunk_fingerprint.h"

#include <algorithm>
#include <cstring>

namespace kerncap::link {
namespace {

void PutLe64(uint64_t v, char* out) {
  for (int b = 0; b < 8; ++b) out[b] = static_cast<char>((v >> (8 * b)) & 0xff);
}

}  // namespace

uint64_t LoadFingerprintWord(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t v = 0;
  for (size_t i = 0; i < n && i < 8; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
  return v;
}

ChunkFingerprint FinishFingerprint(const FingerprintSums& sums, uint64_t bytes) {
  return ChunkFingerprint{FingerprintMix(sums.s0 ^ bytes), FingerprintMix(sums.s1 ^ ~bytes)};
}

ChunkFingerprint FingerprintChunk(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  FingerprintSums sums;
  const size_t words = (bytes + 7) / 8;
  for (size_t i = 0; i < words; ++i) {
    const size_t at = i * 8;
    AddFingerprintTerm(&sums, LoadFingerprintWord(p + at, std::min<size_t>(8, bytes - at)), i);
  }
  return FinishFingerprint(sums, bytes);
}

ChunkFingerprint ZeroChunkFingerprint(uint64_t bytes) {
  FingerprintSums sums;
  const uint64_t words = (bytes + 7) / 8;
  for (uint64_t i = 0; i < words; ++i) AddFingerprintTerm(&sums, 0, i);
  return FinishFingerprint(sums, bytes);
}

std::vector<ChunkFingerprint> FingerprintChunks(const void* data, size_t bytes, size_t chunk) {
  std::vector<ChunkFingerprint> out;
  if (chunk == 0) return out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t at = 0; at < bytes; at += chunk) {
    out.push_back(FingerprintChunk(p + at, std::min(chunk, bytes - at)));
  }
  return out;
}

std::string EncodeFingerprints(const std::vector<ChunkFingerprint>& fps) {
  std::string out(fps.size() * kFingerprintWireBytes, '\0');
  for (size_t i = 0; i < fps.size(); ++i) {
    PutLe64(fps[i].lo, &out[i * kFingerprintWireBytes]);
    PutLe64(fps[i].hi, &out[i * kFingerprintWireBytes + 8]);
  }
  return out;
}

bool DecodeFingerprints(std::string_view payload, std::vector<ChunkFingerprint>* fps) {
  if (payload.size() % kFingerprintWireBytes != 0) return false;
  const size_t n = payload.size() / kFingerprintWireBytes;
  fps->resize(n);
  const auto* p = reinterpret_cast<const unsigned char*>(payload.data());
  for (size_t i = 0; i < n; ++i) {
    (*fps)[i].lo = LoadFingerprintWord(p + i * kFingerprintWireBytes, 8);
    (*fps)[i].hi = LoadFingerprintWord(p + i * kFingerprintWireBytes + 8, 8);
  }
  return true;
}

}  // namespace kerncap::link
