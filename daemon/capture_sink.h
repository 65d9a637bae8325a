// capture_sink.h: the seam between whoever produces a capture's bytes (the
// agent link, the reference-tool importer, tests) and the store that ingests
// them. Producers never see chunks, digests or packs.
//
// Life of one capture:
//   auto ingest = sink.BeginCapture();                 // pins nothing yet
//   int r = ingest->AddRegion(ImageKind::kPre, region); // region.data.size set
//   ingest->WriteRegion(r, 0, ptr, len, release);       // any number, any order
//   ...                                                 // post-dispatch state:
//   int p = ingest->AddRegion(ImageKind::kPost, region_with_same_va);
//   ingest->WriteRegion(p, ...);                        // diffed against pre
//   ingest->AddCodeObject(meta, bytes, size);
//   auto id = ingest->Commit(manifest);                 // durable, then visible
// Dropping the CaptureIngest without Commit aborts it: nothing becomes visible
// and any chunks written only for it are garbage for the next GC.
#ifndef KERNCAP_DAEMON_CAPTURE_SINK_H_
#define KERNCAP_DAEMON_CAPTURE_SINK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/agent_link/vocabulary.h"
#include "common/digest.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap {

// Which image a region belongs to: the link's own enumeration, so a region an
// agent declares reaches the store as it was decoded.
using ImageKind = link::ImageKind;

// Progress of one ingest, for events and progress bars.
struct IngestProgress {
  uint64_t bytes_received = 0;
  uint64_t bytes_declared = 0;  // sum of region sizes declared so far
};

class CaptureIngest {
 public:
  virtual ~CaptureIngest() = default;

  // Declares a region of the pre- or post-dispatch image. `region.data.size`
  // must be set (the region's byte size); `data.chunk_digests` must be empty.
  // For kPost, the bytes are compared chunk by chunk with the kPre region at
  // the same va (if any) and only changed chunks are recorded (Region.diff).
  // Returns the region's handle for WriteRegion.
  virtual absl::StatusOr<int> AddRegion(ImageKind image, const v1::Region& region) = 0;

  // Supplies `size` bytes of region `handle` starting at `offset`. `offset`
  // must be a multiple of the store's chunk size and `size` a multiple of it
  // unless the write ends the region. The bytes must stay valid until
  // `on_consumed` is called (possibly on another thread, possibly before
  // WriteRegion returns); this lets ring slots be released without a copy.
  // Blocks when the ingest pipeline is full (backpressure).
  virtual absl::Status WriteRegion(int handle, uint64_t offset, const void* data, size_t size,
                                   std::function<void()> on_consumed) = 0;

  // Declares chunks [first_chunk, first_chunk+count) of post region `handle`
  // equal to the same chunks of the pre region at the same va and device
  // (declared before, of the same size): they are recorded with the digests
  // the ingest computes for the pre region's bytes, never with anything the
  // caller says. Fails (InvalidArgument) for a pre region, a post region
  // without such a pre region, a range outside the region, or chunks already
  // written or marked. Ingests that do not support it return Unimplemented.
  virtual absl::Status MarkUnchanged(int handle, uint64_t first_chunk, uint64_t count) {
    (void)handle, (void)first_chunk, (void)count;
    return absl::UnimplementedError("this ingest takes every post chunk's bytes");
  }

  // Declares chunks [first_chunk, first_chunk + digests.size()) of region
  // `handle` (pre or post) to be the chunks the store already holds under
  // `digests` (an all-zero digest: a zero chunk), without their bytes. Only
  // for digests the caller learned from this sink (CommittedDigests of an
  // earlier capture): fails (NotFound) for a digest the store does not hold
  // (any more), InvalidArgument for a range outside the region or chunks
  // already written. The chunks are kept from GC from here on.
  virtual absl::Status MarkKnown(int handle, uint64_t first_chunk,
                                 const std::vector<Digest>& digests) {
    (void)handle, (void)first_chunk, (void)digests;
    return absl::UnimplementedError("this ingest takes every chunk's bytes");
  }
  // Whether the store holds a chunk of this digest now (a later MarkKnown
  // can still fail if a GC removes it meanwhile).
  virtual bool HoldsChunk(const Digest& digest) {
    (void)digest;
    return false;
  }
  // After a successful Commit: the digest of every chunk of region `handle`
  // as stored (post regions: also the chunks equal to the pre image's).
  virtual absl::StatusOr<std::vector<Digest>> CommittedDigests(int handle) const {
    (void)handle;
    return absl::UnimplementedError("this ingest does not report digests");
  }

  // Stores a code object image (cubin, hsaco, ...). meta.digest is filled in
  // if empty; if set, it must match the bytes (InvalidArgument otherwise).
  virtual absl::Status AddCodeObject(const v1::CodeObject& meta, const void* data,
                                     size_t size) = 0;

  // Waits for all writes, fills manifest.pre/.post/.code_objects/.stats and
  // capture_id (when empty), makes chunks, manifest and ref durable, records
  // the capture in the catalog, and returns the capture id. Fails with
  // FailedPrecondition if any declared region was not fully written.
  virtual absl::StatusOr<std::string> Commit(v1::CaptureManifest manifest) = 0;

  // Abandons the capture; later calls fail with Aborted.
  virtual void Abort(absl::string_view reason) = 0;

  virtual IngestProgress Progress() const = 0;
};

class CaptureSink {
 public:
  virtual ~CaptureSink() = default;
  virtual absl::StatusOr<std::unique_ptr<CaptureIngest>> BeginCapture() = 0;
};

}  // namespace kerncap

#endif  // KERNCAP_DAEMON_CAPTURE_SINK_H_
