// limits.h: the bounds every request to kerncapd is checked against. Each one
// exists so that a malformed or hostile request gets InvalidArgument instead
// of making the daemon allocate without bound.
#ifndef KERNCAP_COMMON_CONTROL_LIMITS_H_
#define KERNCAP_COMMON_CONTROL_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace kerncap::service {

// gRPC's default 4 MiB message cap is below one 4 MiB chunk plus framing and
// below the manifest of a large capture (500k digests at 64 KiB chunks is
// ~17 MB). Server and clients both raise it to this.
inline constexpr int kMaxMessageBytes = 128 << 20;

// FindMissingChunks: digests per request. Clients batch above this.
inline constexpr size_t kMaxDigestsPerRequest = 100'000;
// ExportCapture.skip_digests: one 34-byte entry per chunk; 2M entries is a
// 2 TiB capture at 1 MiB chunks and stays under kMaxMessageBytes.
inline constexpr size_t kMaxSkipDigests = 2'000'000;
// ListCaptures.limit.
inline constexpr uint32_t kMaxListLimit = 100'000;
// The largest chunk size a store accepts (store.h: power of two up to 4 MiB).
inline constexpr uint32_t kMaxChunkBytes = 4u << 20;
// Free-form strings (kernel names, tags, process names).
inline constexpr size_t kMaxStringBytes = 4096;
// Ids (capture and arm ids, and their prefixes).
inline constexpr size_t kMaxIdBytes = 128;
inline constexpr size_t kMaxTags = 64;
// PATH_MAX.
inline constexpr size_t kMaxPathBytes = 4096;
// Arm: captures per arm and dispatches to skip / the nth to take.
inline constexpr uint64_t kMaxArmCount = 1'000'000;
// ListKernelsRequest.sample_ms: a launch sample holds the RPC for its length.
inline constexpr uint32_t kMaxKernelSampleMs = 60'000;

}  // namespace kerncap::service

#endif  // KERNCAP_COMMON_CONTROL_LIMITS_H_
