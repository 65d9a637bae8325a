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
// Any failure aborts the transport session (the daemon keeps nothing of it)
// and is returned to the caller, which logs it and lets the app continue:
// the launch itself is never blocked or altered by a failed capture.
//
// The device-specific work is behind DispatchSource: the CUDA backend
// implements it with cuCtxSynchronize / cuMemcpyDtoH, the HSA backend with
// barrier packets / hsa_memory_copy, tests with host buffers.
#ifndef KERNCAP_AGENT_CORE_CAPTURE_ORCHESTRATOR_H_
#define KERNCAP_AGENT_CORE_CAPTURE_ORCHESTRATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/core/capture_transport.h"
#include "agent/core/capture_types.h"
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
};

struct CaptureStatsSummary {
  uint64_t regions = 0;
  uint64_t pre_bytes = 0;
  uint64_t post_bytes = 0;
  uint64_t code_objects = 0;
  double quiesce_seconds = 0;
  double pre_seconds = 0;
  double post_seconds = 0;
};

// A capture between launch ENTER and EXIT.
class PendingCapture {
 public:
  const CaptureHeader& header() const { return header_; }
  const CaptureStatsSummary& stats() const { return stats_; }

 private:
  friend class CaptureOrchestrator;
  CaptureHeader header_;
  std::unique_ptr<DispatchSource> source_;
  std::unique_ptr<TransportSession> session_;
  std::vector<RegionDesc> regions_;
  CaptureStatsSummary stats_;
};

class CaptureOrchestrator {
 public:
  explicit CaptureOrchestrator(CaptureTransport* transport) : transport_(transport) {}

  Result<std::unique_ptr<PendingCapture>> Before(std::unique_ptr<DispatchSource> source,
                                                 const CaptureHeader& header,
                                                 std::string_view arg_blob);

  // launch_ok=false (the driver rejected the launch): the capture is aborted.
  // Returns the final stats on success.
  Result<CaptureStatsSummary> After(std::unique_ptr<PendingCapture> pending, bool launch_ok);

 private:
  // Declares `regions` in `image` and streams their bytes through ring slots.
  Status SendImage(PendingCapture& p, ImageKind image, uint64_t* bytes);

  CaptureTransport* transport_;
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_CAPTURE_ORCHESTRATOR_H_
