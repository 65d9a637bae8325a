// device_snapshot.h: what a DispatchSource offers so that a capture can keep
// its memory images on the device instead of copying them to the host while
// the application waits (the "device_snapshot" path of
// capture_orchestrator.h), and the policy that decides when it is used.
//
//   inside the gate   Copy() every region into one snapshot buffer (HBM
//                     speed), run the dispatch, DiffChunks() each region
//                     against its snapshot (exact, byte for byte, on the
//                     device), Copy() only the chunks that differ into a
//                     second, small buffer
//   after release     a drain thread BindDrainThread()s and ReadToHost()s
//                     both buffers through the ring; Free() as soon as each
//                     buffer is drained
//
// The snapshot is exact (a copy taken while nothing else runs), so the
// capture means what a host-path capture means (the same pre and post
// images, byte for byte): the daemon
// cannot tell the paths apart except by CaptureEnd.timing.path.
#ifndef KERNCAP_AGENT_CORE_DEVICE_SNAPSHOT_H_
#define KERNCAP_AGENT_CORE_DEVICE_SNAPSHOT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/core/status.h"
#include "common/agent_link/chunk_fingerprint.h"

namespace kerncap::agent {

class DeviceSnapshotOps {
 public:
  virtual ~DeviceSnapshotOps() = default;
  // Device memory free now, and the device's total (CUDA: cuMemGetInfo).
  virtual Status FreeMemory(uint64_t* free_bytes, uint64_t* total_bytes) = 0;
  // `bytes` of device memory; returns its device address. Errors (out of
  // memory) make the capture fall back to the host path.
  virtual Result<uint64_t> Allocate(uint64_t bytes) = 0;
  virtual void Free(uint64_t buffer) = 0;
  // Queues a copy of `bytes` from device address `src` to `dst`.
  virtual Status Copy(uint64_t dst, uint64_t src, uint64_t bytes) = 0;
  // (*differ)[i] = 1 when chunk i (of `chunk` bytes; the last may be short)
  // of [a, a+bytes) differs from the same chunk of [b, b+bytes), else 0.
  // Must never say 0 for chunks that differ (an implementation that cannot
  // compare a range says 1 for all of it).
  virtual Status DiffChunks(uint64_t a, uint64_t b, uint64_t bytes, uint64_t chunk,
                            std::vector<uint8_t>* differ) = 0;
  // The fingerprints (common/agent_link/chunk_fingerprint.h) of the chunks
  // of [src, src+bytes), computed on the device; waits for queued copies
  // first. Unimplemented (an error) where the backend cannot: the capture
  // then sends every chunk's bytes.
  virtual Status Fingerprint(uint64_t src, uint64_t bytes, uint64_t chunk,
                             std::vector<link::ChunkFingerprint>* fps) {
    (void)src, (void)bytes, (void)chunk, (void)fps;
    return Error("this backend cannot fingerprint device memory");
  }
  // Waits for the queued copies.
  virtual Status Sync() = 0;
  // Copies device bytes to host memory (the drain; synchronous).
  virtual Status ReadToHost(uint64_t src, void* dst, size_t bytes) = 0;
  // Called once on the drain thread before it calls anything else (CUDA:
  // makes the capture's context current; marks the thread as the agent's).
  virtual Status BindDrainThread() = 0;
};

// When the snapshot path is taken. The margin is device memory left free
// after the pre-image snapshot, for what the application allocates while the
// snapshot drains (and for the post buffer of the chunks the dispatch
// changes): max(margin_min_bytes, margin_fraction x the device's memory);
// by default max(2 GiB, 5%), 7 GiB of an H200's 141 GiB. The application
// never sees an allocation fail because of a capture unless it allocates
// more than that margin during the drain (about 0.2 s per GiB of changed
// plus live memory at the ring's rate); a capture that does not fit takes
// the host path.
struct SnapshotPolicy {
  bool enabled = true;                      // KERNCAP_AGENT_SNAPSHOT=0: always the host path
  // Fingerprint chunks on the device (either path) so that chunks kerncapd
  // holds from earlier captures and post chunks the dispatch left alone do
  // not cross PCIe (KERNCAP_AGENT_FINGERPRINTS=0: off).
  bool fingerprints = true;
  uint64_t margin_min_bytes = 2ull << 30;   // KERNCAP_AGENT_SNAPSHOT_MARGIN_MIB
  double margin_fraction = 0.05;

  static SnapshotPolicy FromEnv();
  static SnapshotPolicy HostOnly() {
    SnapshotPolicy p;
    p.enabled = false;
    return p;
  }
  uint64_t Margin(uint64_t total_device_bytes) const;
  // Whether a snapshot of `needed` bytes fits; *why says why not (or how it fit).
  bool Fits(uint64_t needed, uint64_t free_bytes, uint64_t total_bytes, std::string* why) const;
};

// Snapshot buffers hold regions at this alignment.
inline constexpr uint64_t kSnapshotAlign = 256;

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_DEVICE_SNAPSHOT_H_
