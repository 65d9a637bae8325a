// resident_state.h: what `kerncap-replay serve` keeps on the GPU between
// candidates. The capture is restored once, at its original addresses, by a
// ReplaySession (replay_session.h); then, beside it:
//
//   pristine  a device-to-device copy (cuMemAlloc'd) of every device region's
//             pre-dispatch bytes, so a region a candidate wrote is restored
//             at device-copy speed instead of from the .kcap;
//   golden    for each device region the captured post image changes, its
//             post-dispatch bytes (pristine + the changed chunks), so a
//             candidate is validated on the device. Unchanged regions are
//             expected to equal pristine.
//   host      host-pinned regions and module variables (__device__,
//             __constant__) keep both images in host memory: they are small,
//             and module variables live in each candidate's own module.
//
// and a dirty mark per region: set for every region a launch may have
// changed (the captured written set, plus whatever a comparison found
// changed), cleared by RestoreDirty(). Costs one extra copy of the device
// state plus the written regions once more.
#ifndef KERNCAP_REPRODUCER_REPLAY_SERVE_RESIDENT_STATE_H_
#define KERNCAP_REPRODUCER_REPLAY_SERVE_RESIDENT_STATE_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "reproducer/replay/core/capture_source.h"
#include "reproducer/replay/cuda/replay_session.h"

namespace kerncap::replay::serve {

class ResidentState {
 public:
  enum class Where { kDevice, kHost, kGlobal };
  struct Region {
    size_t index = 0;          // in the pre image
    Where where = Where::kDevice;
    uint64_t va = 0;           // in the application
    uint64_t replay_va = 0;    // device or host address here (globals: per candidate)
    uint64_t size = 0;
    std::string kind;          // RegionKindName
    std::string name;          // module variables
    bool written = false;      // the captured post image changes it
    CUdeviceptr pristine = 0;  // kDevice: pre-dispatch copy
    CUdeviceptr golden = 0;    // kDevice: post-dispatch bytes (== pristine when !written)
    std::string host_pristine; // kHost, kGlobal (relocation-patched like the restore)
    std::string host_golden;   // kHost, kGlobal; empty when !written (pristine is expected)
    bool dirty = false;        // may differ from pristine now
    const std::string& host_expected() const { return written ? host_golden : host_pristine; }
  };

  // Restores `source` (which must outlive the state) and builds the copies.
  static absl::StatusOr<std::unique_ptr<ResidentState>> Create(const CaptureSource* source,
                                                               const SessionOptions& options);
  ~ResidentState();
  ResidentState(const ResidentState&) = delete;
  ResidentState& operator=(const ResidentState&) = delete;

  ReplaySession& session() { return *session_; }
  const CaptureSource& source() const { return *source_; }
  const CudaDriver& cu() const { return cu_; }
  std::vector<Region>& regions() { return regions_; }
  const std::vector<Region>& regions() const { return regions_; }

  // Marks every region the capture says the kernel writes (after a launch).
  void MarkWritten();
  // Restores every dirty device and host region from its pristine copy and
  // clears the marks (module variables are the evaluator's: they live in a
  // candidate's module). Device copies are enqueued on `stream`; host ones
  // wait for it first. Returns the bytes restored.
  absl::StatusOr<uint64_t> RestoreDirty(CUstream stream);
  // Enqueues the device-to-device restore of region i (no mark changes).
  absl::Status EnqueueRestore(const Region& r, CUstream stream) const;

  // Captured state no comparison covers (post-image regions without a
  // pre-image region, post images of another shape, regions the session
  // could not restore): every verdict lists it (report.h NotCompared).
  const std::vector<NotCompared>& uncovered() const { return uncovered_; }

  // How many 8-byte words of the other captured regions point into module
  // variable region `index` (pointer_scan.h); computed for every module
  // variable at the first call, then remembered.
  absl::StatusOr<uint64_t> PointerWordsInto(size_t index);

  // Facts for the "info" answer.
  nlohmann::json Info() const;

 private:
  ResidentState(const CaptureSource* source, const CudaDriver& cu) : source_(source), cu_(cu) {}
  absl::Status BuildRegions();
  absl::Status CheckMemory() const;
  absl::Status BuildPristine();
  absl::Status BuildGolden();
  // The captured bytes of one chunk (`digest`), pointer-patched when relocated.
  absl::Status ReadPatched(const v1::Region& r, const std::string& digest, uint64_t offset,
                           uint32_t length, std::string* out) const;

  const CaptureSource* source_;
  const CudaDriver& cu_;
  std::optional<absl::flat_hash_map<size_t, uint64_t>> global_pointers_;  // PointerWordsInto
  std::unique_ptr<ReplaySession> session_;
  std::vector<Region> regions_;
  std::vector<NotCompared> uncovered_;
  uint64_t pristine_bytes_ = 0;
  uint64_t golden_bytes_ = 0;
  double startup_seconds_ = 0;
};

}  // namespace kerncap::replay::serve

#endif  // KERNCAP_REPRODUCER_REPLAY_SERVE_RESIDENT_STATE_H_
