// evaluator.h: evaluates one candidate code object against the resident
// state (resident_state.h). Per request:
//
//   1. read the code object (path or inline bytes); cuModuleLoadDataEx
//      (cubin, fatbin, or PTX that the driver JIT-compiles; the JIT log is
//      returned on failure); cuModuleGetFunction(kernel);
//   2. restore the capture's module variables into the candidate's module
//      and re-apply the captured function attributes;
//   3. restore every dirty region from its pristine copy (device-to-device);
//   4. one launch with the captured configuration and argument blob, timed
//      with events; then ONE comparison launch over every device region
//      against its expected image (golden if written, else pristine), host
//      regions and module variables on the host. This both validates and
//      finds regions the candidate changed that it should not have; those
//      are restored next time like the written ones;
//   5. warm-up + timed launches, restoring the dirty regions before each
//      (unless restore_each is false; with cold_l2 an L2 flush after the
//      restores), all enqueued at once with an event pair around each launch
//      and one synchronization at the end, the persisting-L2 limit reset for
//      them (l2_control.h);
//   6. the candidate once more from pristine state, compared: the verdict
//      after the timing ("revalidation");
//   7. unload the module.
// With compare_original the captured code object is loaded once as a
// baseline (kept between requests, its module variables restored per
// request) and timed in step 5 as well, its launches interleaved ABBA with
// the candidate's: speedup = baseline median / candidate median; it is
// validated before and after the timing like the candidate.
//
// With a "launch" override the candidate runs at that launch (the session's
// override, set per request); a failed verdict at a changed shape is probed
// with the captured code object (ProbeLaunchShape).
//
// A CUDA error that leaves the context unusable (illegal address, trap, ...)
// makes lost() true: the restored state is gone with the context.
#ifndef KERNCAP_REPRODUCER_REPLAY_SERVE_EVALUATOR_H_
#define KERNCAP_REPRODUCER_REPLAY_SERVE_EVALUATOR_H_

#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "reproducer/replay/cuda/l2_control.h"
#include "reproducer/replay/cuda/device_comparator.h"
#include "reproducer/replay/serve/resident_state.h"
#include "reproducer/replay/serve/server.h"

namespace kerncap::replay::serve {

class ResidentEvaluator : public Evaluator {
 public:
  // `state` must outlive the evaluator. JIT-loads the comparison kernel.
  static absl::StatusOr<std::unique_ptr<ResidentEvaluator>> Create(ResidentState* state);
  ~ResidentEvaluator() override;

  nlohmann::json Info() override;
  absl::StatusOr<EvaluateResult> Evaluate(const EvaluateRequest& request) override;
  bool lost() const override { return lost_; }

 private:
  class Candidate;  // one loaded code object (RAII unload)
  struct GlobalSlot {  // a module variable of the capture, in the candidate's module
    ResidentState::Region* region;
    CUdeviceptr address;
  };

  explicit ResidentEvaluator(ResidentState* state);  // out of line: Candidate is incomplete here

  absl::StatusOr<std::string> ReadCodeObject(const EvaluateRequest& request) const;
  // The capture's module variables in `candidate`'s module; those it cannot
  // match go to *unbound (the verdict lists them).
  absl::StatusOr<std::vector<GlobalSlot>> BindGlobals(const Candidate& candidate,
                                                      std::vector<NotCompared>* unbound,
                                                      std::vector<std::string>* warnings);
  absl::Status RestoreGlobals(const std::vector<GlobalSlot>& globals, bool dirty_only);
  // Compares the state after a launch with the expected images.
  absl::Status Validate(const EvaluateRequest& request, const std::vector<GlobalSlot>& globals,
                        const std::vector<NotCompared>& unbound, ValidationSummary* result);
  // From pristine state (dirty regions and `globals` restored): one launch
  // of `f`, then Validate; its restores and device time are added to *totals.
  absl::Status LaunchAndValidate(const EvaluateRequest& request, CUfunction f,
                                 const std::vector<GlobalSlot>& globals,
                                 const std::vector<NotCompared>& unbound,
                                 ValidationSummary* result, EvaluateResult* totals);
  // The captured code object, loaded once (compare_original); its module
  // variables bound (resets their dirty marks: call before a launch).
  absl::Status LoadBaseline(std::vector<std::string>* warnings);
  // Timed launches of `f`; with `baseline` also of the captured kernel,
  // interleaved ABBA (pair k: samples[k], baseline_samples[k]).
  absl::Status Time(const EvaluateRequest& request, CUfunction f,
                    const std::vector<GlobalSlot>& globals, bool baseline, L2Flusher* flusher,
                    EvaluateResult* result, std::vector<double>* samples,
                    std::vector<double>* baseline_samples);
  // A failed validation under a launch that changes the shape: runs the
  // captured code object at that launch and at the captured one and marks
  // the verdict launch_shape_dependent when only the captured launch passes.
  absl::Status ProbeLaunchShape(const EvaluateRequest& request, EvaluateResult* result);
  absl::Status EnsureEvents(size_t count);
  // A failed CUDA step: when the context is gone, marks the evaluator lost
  // and says so; otherwise returns `s`.
  absl::Status Failed(absl::Status s);

  ResidentState* state_;
  const CudaDriver& cu_;
  std::unique_ptr<DeviceComparator> comparator_;
  std::vector<size_t> compared_;  // state regions (indices) the comparator covers, in order
  CUstream stream_ = nullptr;
  std::vector<CUevent> events_;
  bool lost_ = false;
  std::unique_ptr<Candidate> baseline_;    // compare_original: the captured code object
  std::vector<GlobalSlot> baseline_globals_;
  std::vector<NotCompared> baseline_unbound_;
  uint64_t evaluations_ = 0;
  uint64_t failed_evaluations_ = 0;
};

}  // namespace kerncap::replay::serve

#endif  // KERNCAP_REPRODUCER_REPLAY_SERVE_EVALUATOR_H_
