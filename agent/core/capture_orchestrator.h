// capture_orchestrator.h: the backend-neutral capture flow.
//
//   launch ENTER (caller holds the CaptureGate exclusively)
//     Before(): quiesce the device -> enumerate regions -> Begin session
//               -> pre image of every region, chunk-wise through ring slots
//               -> code objects (each distinct image once per capture)
//   the driver runs the dispatch
//   launch EXIT
//     After():  wait for the dispatch -> post image of the same regions
//               (the daemon keeps only changed chunks) -> End
//
// Two paths read the memory (CaptureStatsSummary::path says which was taken):
//   host             the images are copied device-to-host through ring slots
//                    inside the gate, as drawn above.
//   device_snapshot  when the source offers DeviceSnapshotOps, the transport
//                    takes MarkUnchanged, and the device has room for a copy
//                    of the regions plus SnapshotPolicy's margin: Before()
//                    copies the regions device-to-device into a snapshot
//                    buffer; After() compares every chunk with its snapshot
//                    on the device and copies only the changed chunks into a
//                    second buffer; the application is released; Drain()
//                    then sends the pre image, the code objects, the changed
//                    post chunks and MarkUnchanged for the others through the
//                    ring (on a thread of the caller's choosing), freeing each
//                    buffer once it is drained. When the changed chunks do
//                    not fit on the device, After() drains the pre image and
//                    reads them from live memory inside the gate instead.
//
// Fingerprints (both paths; when the source's DeviceSnapshotOps can
// Fingerprint, the daemon speaks "chunk_fingerprints" and SnapshotPolicy::
// fingerprints is on): every pre region is fingerprinted on the device
// (host path: inside the gate, on live memory; device_snapshot: in the
// drain, on the snapshot), the daemon is asked which of those chunks it
// holds from this agent's earlier captures, and those are named by
// fingerprint (MarkKnown) instead of copied; the others are sent with their
// fingerprints (TellFingerprints) so later captures can name them. On the
// host path the post image is fingerprinted on the device too and only the
// chunks whose fingerprint changed are copied, the others are declared
// unchanged (common/agent_link/chunk_fingerprint.h says what that relies
// on; the device_snapshot path keeps its exact compare). Any fingerprint
// or query failure falls back to sending the bytes.
//
// Any failure aborts the transport session (the daemon keeps nothing of it)
// and is returned to the caller, which logs it and lets the app continue:
// the launch itself is never blocked or altered by a failed capture.
//
// The device-specific work is behind DispatchSource: the CUDA backend
// implements it with cuCtxSynchronize / cuMemcpyDtoH, the HSA backend with
// barrier packets / hsa_memory_copy, tests with host buffers.
#ifndef KERNCAP_AGENT_CORE_CAPTURE_ORCHESTRATOR_H_
#define KERNCAP_AGENT_CORE_CAPTURE_ORCHESTRATOR_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/core/capture_transport.h"
#include "agent/core/capture_types.h"
#include "agent/core/device_snapshot.h"
#include "agent/core/status.h"

namespace kerncap::agent {

// The device side of one dispatch being captured.
class DispatchSource {
 public:
  virtual ~DispatchSource() = default;
  // Waits until no queued work can still change memory (whole device).
  virtual Status Quiesce() = 0;
  // Regions to capture (allocations of the device, module globals...).
  // Called after Quiesce, so it sees allocations made by queued work too.
  virtual Result<std::vector<RegionDesc>> Regions() = 0;
  // Code objects the dispatch needs (normally the kernel's module).
  virtual Result<std::vector<CodeObjectRef>> CodeObjects() = 0;
  // Copies region bytes [offset, offset+size) to host memory `dst`.
  virtual Status ReadRegion(const RegionDesc& region, uint64_t offset, void* dst,
                            size_t size) = 0;
  // Waits until the captured dispatch has finished.
  virtual Status WaitForDispatch() = 0;
  // A ring slot about to receive ReadRegion bytes (called for every slot
  // acquired; the CUDA backend pins new slots so copies run at full PCIe
  // speed). The source is destroyed when the capture ends, however it ends:
  // it undoes such preparations in its destructor.
  virtual void OnSlot(void* data, size_t capacity) {}
  // The device snapshot capability (device_snapshot.h); null: host path only.
  // Owned by the source.
  virtual DeviceSnapshotOps* snapshot_ops() { return nullptr; }
};

struct CaptureStatsSummary {
  uint64_t regions = 0;
  uint64_t pre_bytes = 0;
  uint64_t post_bytes = 0;
  uint64_t code_objects = 0;
  double quiesce_seconds = 0;
  double pre_seconds = 0;
  double post_seconds = 0;
  CapturePath path = CapturePath::kHost;
  std::string path_reason;
  double drain_seconds = 0;           // device_snapshot: snapshot -> ring after the release
  uint64_t pcie_bytes = 0;            // bytes read device -> host
  uint64_t unchanged_post_bytes = 0;  // post bytes sent as MarkUnchanged
  uint64_t snapshot_bytes = 0;        // device memory the snapshots took (pre + post)
  uint64_t known_bytes = 0;           // bytes named by fingerprint (the daemon held them)
  double fingerprint_seconds = 0;     // on-device fingerprinting and the daemon's answers
  std::string fingerprint_note;       // why fingerprints were not used (empty: they were)
};

// A capture between launch ENTER and EXIT.
class PendingCapture {
 public:
  const CaptureHeader& header() const { return header_; }
  const CaptureStatsSummary& stats() const { return stats_; }
  // True between After() and Drain() of a device_snapshot capture.
  bool needs_drain() const { return needs_drain_; }
  ~PendingCapture();

 private:
  friend class CaptureOrchestrator;
  // A run of changed chunks of one region kept in the post buffer.
  struct ChangedRun {
    uint64_t offset = 0;      // in the region (chunk-aligned)
    uint64_t size = 0;
    uint64_t buffer_at = 0;   // device address in post_buffer_
  };
  void FreeSnapshots();

  CaptureHeader header_;
  std::unique_ptr<DispatchSource> source_;
  std::unique_ptr<TransportSession> session_;
  std::vector<RegionDesc> regions_;
  CaptureStatsSummary stats_;
  std::chrono::steady_clock::time_point gate_taken_;
  // device_snapshot path
  DeviceSnapshotOps* ops_ = nullptr;
  std::vector<CodeObjectRef> codes_;  // sent by the drain, after the pre image
  uint64_t pre_buffer_ = 0;
  std::vector<uint64_t> pre_at_;      // device address of region i's snapshot
  uint64_t post_buffer_ = 0;
  uint64_t chunk_ = 0;                // the transport's chunk size
  std::vector<std::vector<uint8_t>> changed_;   // per region, per chunk
  std::vector<std::vector<ChangedRun>> runs_;   // per region
  // Fingerprints: the ops that compute them (null: not used), per region
  // the pre image's fingerprints (empty: that region is sent whole) and
  // which of its chunks the daemon holds.
  DeviceSnapshotOps* fp_ops_ = nullptr;
  std::vector<std::vector<ChunkFingerprint>> pre_fp_;
  std::vector<std::vector<uint8_t>> pre_held_;
  bool pre_sent_ = false;   // the pre image is already in the ring (post spill)
  bool post_sent_ = false;  // the post image is already in the ring (post spill)
  bool needs_drain_ = false;
};

class CaptureOrchestrator {
 public:
  explicit CaptureOrchestrator(CaptureTransport* transport,
                               SnapshotPolicy policy = SnapshotPolicy::HostOnly())
      : transport_(transport), policy_(policy) {}

  // gate_taken: when the application was stopped (for the held time sent
  // with the End).
  Result<std::unique_ptr<PendingCapture>> Before(
      std::unique_ptr<DispatchSource> source, const CaptureHeader& header,
      std::string_view arg_blob,
      std::chrono::steady_clock::time_point gate_taken = std::chrono::steady_clock::now());

  // launch_ok=false (the driver rejected the launch): the capture is aborted.
  // Returns the stats on success. For a device_snapshot capture with `drain`
  // set, the capture is moved to *drain (needs_drain()) once its post image
  // is on the device: the caller releases the application and calls Drain();
  // with `drain` null, After() drains before it returns.
  Result<CaptureStatsSummary> After(std::unique_ptr<PendingCapture> pending, bool launch_ok,
                                    std::unique_ptr<PendingCapture>* drain = nullptr);

  // Sends a device_snapshot capture's images and ends it. bind_thread: on a
  // thread of its own (the snapshot ops' BindDrainThread runs first).
  // held_seconds: the application's pause, for the End's timing.
  static Result<CaptureStatsSummary> Drain(std::unique_ptr<PendingCapture> pending,
                                           double held_seconds, bool bind_thread = true);

 private:
  // Declares `regions` in `image` and streams their bytes through ring slots.
  static Status SendImage(PendingCapture& p, ImageKind image, uint64_t* bytes);
  // device_snapshot: the pre image from its snapshot, then the code objects.
  static Status SendPreFromSnapshot(PendingCapture& p);
  // device_snapshot: post regions: changed runs from the post buffer (or
  // from live memory: from_live), MarkUnchanged for the rest.
  static Status SendPostChanged(PendingCapture& p, bool from_live);
  static Status SendCodeObjects(PendingCapture& p, const std::vector<CodeObjectRef>& codes);
  // Which of `fps` the daemon holds (1 each); none when asking fails (the
  // chunks are then sent, and the reason noted once).
  static std::vector<uint8_t> HeldByDaemon(PendingCapture& p,
                                           const std::vector<ChunkFingerprint>& fps);
  // Decides whether fingerprints are used (p.fp_ops_, p.chunk_).
  void SetUpFingerprints(PendingCapture& p);
  // Fingerprints region i's pre image at device address src_of(i) and asks
  // the daemon which chunks it holds (fills pre_fp_ / pre_held_).
  template <typename SrcOf>
  static void FingerprintPre(PendingCapture& p, const SrcOf& src_of);
  // Sends chunks [first, end) of region `handle` (region i): runs the
  // daemon holds by fingerprint, the rest as bytes read by `read` with their
  // fingerprints. fps/held: per chunk of the region (empty: all as bytes).
  template <typename Read>
  static Status SendChunks(PendingCapture& p, int handle, const RegionDesc& r, uint64_t first,
                           uint64_t end, const std::vector<ChunkFingerprint>& fps,
                           const std::vector<uint8_t>& held, uint64_t* bytes, const Read& read);
  // Host path with fingerprints: the post image of region i by fingerprint
  // compare against its pre image; false when region i has none.
  static Status SendPostByFingerprint(PendingCapture& p, size_t i, uint64_t* bytes, bool* done);
  // Streams `size` bytes read by `read(dst, offset, n)` as region bytes
  // [offset0, offset0+size) of `handle`.
  template <typename Read>
  static Status Stream(PendingCapture& p, int handle, uint64_t offset0, uint64_t size,
                       uint64_t* bytes, const Read& read);
  // Picks the path; on device_snapshot allocates and fills the pre buffer.
  void TrySnapshot(PendingCapture& p, std::vector<CodeObjectRef> codes);
  Status SnapshotPost(PendingCapture& p);
  static void FillTiming(PendingCapture& p, double held_seconds);

  CaptureTransport* transport_;
  SnapshotPolicy policy_;
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_CAPTURE_ORCHESTRATOR_H_
