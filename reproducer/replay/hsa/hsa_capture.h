// hsa_capture.h: turns a stored capture (kerncap.v1.CaptureManifest plus its
// chunks) into the input of ReplayDispatch (hsa_replay.h). The chunks come
// from any ChunkReader: a `.kcap` file (reproducer/replay/core/capture_source.h),
// or a kerncapd store read in process (tests).
//
//   code object  the captured hsaco (CODE_OBJECT_HSACO) whose metadata names
//                the kernel; the first hsaco when none does
//   kernarg      the manifest's argument_blob (hidden arguments included)
//   arguments    offset, size and value kind of each captured argument; an
//                older agent sent hidden arguments with the value kind as
//                their name and no value_kind: that name is used
//   regions      pre images in manifest order, as chunk digests; the post
//                digest of a chunk is the post image's (diff or full image)
//                where it lists the chunk, else the pre one (unchanged); a
//                region missing from a complete post image did not change;
//                with no complete post image nothing is validated
//   read         the chunks' bytes, through `read` (nothing is read here but
//                the code objects: the replay reads chunks when it restores
//                and compares them)
//   launch       grid (work-items), workgroup, group/private segment sizes
#ifndef KERNCAP_REPRODUCER_REPLAY_HSA_HSA_CAPTURE_H_
#define KERNCAP_REPRODUCER_REPLAY_HSA_HSA_CAPTURE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerncap/v1/manifest.pb.h"
#include "reproducer/replay/hsa/hsa_replay.h"

namespace kerncap::replay::hsa {

// Fills *out with the raw bytes of chunk `digest` (32 raw bytes; empty: an
// all-zero chunk), which must be `raw_size` long.
using ChunkReader =
    std::function<absl::Status(const std::string& digest, uint32_t raw_size, std::string* out)>;

// The whole content of `list`.
absl::StatusOr<std::string> ReadChunkListBytes(const v1::ChunkList& list, const ChunkReader& read);

// `read` is kept in the input (HsaReplayInput::read) and must stay usable
// while it is replayed. InvalidArgument when the manifest is not an HSA capture (platform other than
// PLATFORM_HSA/unspecified) or has no hsaco; errors of `read` pass through.
absl::StatusOr<HsaReplayInput> HsaInputFromManifest(const v1::CaptureManifest& manifest,
                                                    const ChunkReader& read);

}  // namespace kerncap::replay::hsa

#endif  // KERNCAP_REPRODUCER_REPLAY_HSA_HSA_CAPTURE_H_
