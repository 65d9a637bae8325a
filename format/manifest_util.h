// manifest_util.h: read-only views of a CaptureManifest shared by the service
// (export/import) and kerncapctl (pull planning, `show`).
#ifndef KERNCAP_FORMAT_MANIFEST_UTIL_H_
#define KERNCAP_FORMAT_MANIFEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/digest.h"
#include "kerncap/v1/control.pb.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::service {

struct ChunkRef {
  Digest digest;
  uint32_t raw_size = 0;
};

// The one walk over a manifest's chunk lists, used by every reader that
// visits them (validation, export, GC, verify, pins, the store reader):
// every pre region, every post region, then every code object, in that order.
// `region` is null for code objects; `where` names the list for messages
// ("pre region 3"). Stops at, and returns, the first error `fn` returns.
absl::Status ForEachChunkList(
    const v1::CaptureManifest& manifest,
    absl::FunctionRef<absl::Status(const v1::ChunkList& list, const v1::Region* region,
                                   absl::string_view where)>
        fn);

// Every distinct stored chunk the manifest references (pre and post images,
// code objects), in first-reference order. All-zero chunks (empty digest) are
// never stored and are left out. InvalidArgument when a digest is neither
// empty nor 32 bytes, or a ChunkList is inconsistent (too many digests for its
// size, a changed_chunks index out of range).
absl::StatusOr<std::vector<ChunkRef>> ManifestChunks(const v1::CaptureManifest& manifest);

// Bytes of `region` that sit in all-zero chunks (for the memory map's zero %).
uint64_t ZeroBytes(const v1::Region& region);

}  // namespace kerncap::service

#endif  // KERNCAP_FORMAT_MANIFEST_UTIL_H_
