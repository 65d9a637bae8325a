// manifest_check.h: what a CaptureManifest must satisfy before anything is
// allocated or read from its numbers. Every manifest that crosses a process
// boundary (an import stream, a .kcap file, a store's manifest file) goes
// through ValidateManifest once, wherever it is read, so no reader trusts a
// size, count or index a crafted file chose.
//
// A ChunkList (v1.ChunkList: `size` bytes cut into chunks of `chunk_size`)
// is valid when:
//   - chunk_size is a power of two in [kMinChunkSize, kMaxChunkSize] (it
//     may be 0 only for an empty list);
//   - it is a full list with exactly ceil(size / chunk_size) digests, or a
//     diff list (Region.diff) with one digest per changed_chunks entry,
//     changed_chunks strictly increasing and below ceil(size / chunk_size);
//   - every digest is empty (an all-zero chunk) or 32 bytes (SHA-256).
// A manifest is valid when every region and code object list is, every
// region's [va, va + size) lies inside the 64-bit address space (va + size
// <= 2^64 - 1: an end of exactly 2^64 wraps to 0 too), and the
// totals stay within ManifestLimits (region count and size, code object
// size, logical bytes, argument blob), so that a reader that holds a region
// or code object in memory allocates a bounded amount.
#ifndef KERNCAP_FORMAT_MANIFEST_CHECK_H_
#define KERNCAP_FORMAT_MANIFEST_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::format {

// Chunk sizes a manifest may use: powers of two in this range. Stores cut
// chunks of 64 KiB..4 MiB (store.h); tests and tools may use smaller ones.
inline constexpr uint32_t kMinChunkSize = 4u << 10;
inline constexpr uint32_t kMaxChunkSize = 4u << 20;

struct ManifestLimits {
  uint32_t max_regions = 1u << 18;               // pre + post
  uint64_t max_region_bytes = 4ull << 40;        // one region
  uint64_t max_logical_bytes = 16ull << 40;      // all regions together
  uint32_t max_code_objects = 1024;
  uint64_t max_code_object_bytes = 1ull << 30;   // one code object
  uint64_t max_argument_blob_bytes = 1ull << 20;
};

// Number of chunks a list of `size` bytes is cut into (0 for chunk_size 0).
uint64_t ChunkCount(const v1::ChunkList& list);
// Raw bytes of chunk `index` of the list (0 past its end).
uint32_t ChunkLength(const v1::ChunkList& list, uint64_t index);

// One list; `region` is its region (for diff lists) or null (code objects).
// `where` names it in errors ("pre region 3").
absl::Status ValidateChunkList(const v1::ChunkList& list, const v1::Region* region,
                               absl::string_view where);

// The whole manifest. InvalidArgument naming the first problem ("post
// region 2 at va 0x7f00...: 3 digests for 5 chunks").
absl::Status ValidateManifest(const v1::CaptureManifest& manifest,
                              const ManifestLimits& limits = ManifestLimits());

}  // namespace kerncap::format

#endif  // KERNCAP_FORMAT_MANIFEST_CHECK_H_
