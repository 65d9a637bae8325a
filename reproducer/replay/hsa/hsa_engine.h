// hsa_engine.h: the HSA replay engine (core/engine.h): run / validate /
// bench of an HSA capture over the same report types and JSON as the CUDA
// engine (core/report.h). The HSA runtime is loaded at run time
// (hsa_runtime.h); the capture's regions are described by chunk digests
// (hsa_capture.h) and replayed by ReplayDispatch at their original
// addresses, restored through the restore pipeline (no relocation on HSA:
// an address that cannot be had is an error).
//
// Validation runs the shared RegionComparator (dtype, tolerance, per-region
// rules) on each validated chunk after the first dispatch. Bench uses the
// runtime's dispatch timestamps; --cold-l2 is not implemented for HSA and is
// reported as a warning. Refused (Unimplemented, never ignored): launch
// overrides (the hidden arguments that describe the launch would need
// rewriting), --compare-original, bench variants.
#ifndef KERNCAP_REPRODUCER_REPLAY_HSA_HSA_ENGINE_H_
#define KERNCAP_REPRODUCER_REPLAY_HSA_HSA_ENGINE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "reproducer/replay/core/capture_source.h"
#include "reproducer/replay/core/compare_options.h"
#include "reproducer/replay/core/engine.h"
#include "reproducer/replay/core/report.h"
#include "reproducer/replay/hsa/hsa_capture.h"
#include "reproducer/replay/hsa/hsa_replay.h"
#include "reproducer/replay/hsa/hsa_runtime.h"

namespace kerncap::replay::hsa {

class HsaEngine : public ReplayEngine {
 public:
  // Reads the capture's manifest and code object and loads the runtime
  // (EngineOptions::hsa_runtime_path, else DefaultHsaRuntimePath()).
  // `source` must outlive the engine.
  static absl::StatusOr<std::unique_ptr<HsaEngine>> Open(const CaptureSource& source,
                                                         const EngineOptions& options);
  const char* platform() const override { return "hsa"; }
  // Restore, one dispatch.
  absl::StatusOr<ReplayInfo> Run() override;
  // Restore, one dispatch, compare every region that has a post image.
  absl::StatusOr<ValidationReport> Validate(const CompareOptions& options) override;
  // Restore, one validated dispatch, warm-up, timed dispatches.
  absl::StatusOr<BenchReport> Bench(const BenchOptions& options) override;
  // {"runtime", "hidden_args_from", "patched_hidden_args"} of the last command.
  nlohmann::json PlatformJson() const override;

  int timeout_ms = 10000;  // per dispatch

 private:
  HsaEngine() = default;
  absl::StatusOr<HsaReplayReport> Replay(const HsaReplayOptions& options);
  ReplayInfo Info(const HsaReplayReport& r) const;

  const CaptureSource* source_ = nullptr;
  HsaReplayInput input_;
  std::unique_ptr<HsaRuntime> runtime_;
  std::string gpu_name_;
  HsaReplayReport last_;
  std::vector<std::string> extra_warnings_;
};

}  // namespace kerncap::replay::hsa

#endif  // KERNCAP_REPRODUCER_REPLAY_HSA_HSA_ENGINE_H_
