// hsa_capture.h: turns a stored capture (kerncap.v1.CaptureManifest plus its
// chunks) into the input of ReplayDispatch (hsa_replay.h). The chunks come
// from any ChunkReader: a `.kcap` file (reproducer/replay/capture_source.h),
// or a kerncapd store read in process (tests).
//
//   code object  the captured hsaco (CODE_OBJECT_HSACO) whose metadata names
//                the kernel; the first hsaco when none does
//   kernarg      the manifest's argument_blob (hidden arguments included)
//   arguments    offset, size and value kind of each captured argument; an
//                older agent sent hidden arguments with the value kind as
//                their name and no value_kind: that name is used
//   regions      pre images in manifest order; the post bytes of a region are
//                its pre bytes overlaid with the post image's changed chunks
//                (post diff), or the post image's full bytes; a region missing
//                from a complete post image did not change (post = pre); with
//                no complete post image nothing is validated
//   launch       grid (work-items), workgroup, group/private segment sizes
//
// Every region is held in memory whole (pre and post): this replay path is for
// captures that fit in host memory.
#ifndef KERNCAP_REPRODUCER_HSA_HSA_CAPTURE_H_
#define KERNCAP_REPRODUCER_HSA_HSA_CAPTURE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerncap/v1/manifest.pb.h"
#include "reproducer/hsa/hsa_replay.h"

namespace kerncap::replay::hsa {

// Fills *out with the raw bytes of chunk `digest` (32 raw bytes; empty: an
// all-zero chunk), which must be `raw_size` long.
using ChunkReader =
    std::function<absl::Status(const std::string& digest, uint32_t raw_size, std::string* out)>;

// The whole content of `list`.
absl::StatusOr<std::string> ReadChunkListBytes(const v1::ChunkList& list, const ChunkReader& read);

// InvalidArgument when the manifest is not an HSA capture (platform other than
// PLATFORM_HSA/unspecified) or has no hsaco; errors of `read` pass through.
absl::StatusOr<HsaReplayInput> HsaInputFromManifest(const v1::CaptureManifest& manifest,
                                                    const ChunkReader& read);

}  // namespace kerncap::replay::hsa

#endif  // KERNCAP_REPRODUCER_HSA_HSA_CAPTURE_H_
