// hsa_cli.h: the HSA path of kerncap-replay (run / validate / bench) over the
// same report types and JSON as the CUDA path (reproducer/replay/report.h).
// The HSA runtime is loaded at run time (hsa_runtime.h); the capture comes
// from a .kcap (CaptureSource) and is replayed by ReplayDispatch at its
// original addresses (no relocation on HSA: an address that cannot be had is
// an error).
//
// Validation runs the shared RegionComparator (dtype, tolerance, per-region
// rules) on each region's bytes after the first dispatch. Bench uses the
// runtime's dispatch timestamps; --cold-l2 is not implemented for HSA and is
// reported as a warning.
#ifndef KERNCAP_REPRODUCER_HSA_HSA_CLI_H_
#define KERNCAP_REPRODUCER_HSA_HSA_CLI_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "reproducer/hsa/hsa_capture.h"
#include "reproducer/hsa/hsa_replay.h"
#include "reproducer/hsa/hsa_runtime.h"
#include "reproducer/replay/capture_source.h"
#include "reproducer/replay/compare_options.h"
#include "reproducer/replay/report.h"

namespace kerncap::replay::hsa {

struct HsaCliOptions {
  std::string runtime_path;  // empty: DefaultHsaRuntimePath()
  int timeout_ms = 10000;    // per dispatch
  // Replaces the captured hsaco (a rebuilt one, reproducer `make recompile`);
  // it must define the captured kernel. Empty: the captured code object.
  std::string code_object_path;
};

struct HsaBenchOptions {
  int warmup = 5;
  int iterations = 50;
  bool cold_l2 = false;   // not implemented on HSA: warning
  int restore_each = -1;  // -1: on when the capture shows the kernel writing memory
};

class HsaCliSession {
 public:
  // Reads the capture (every region into memory) and loads the runtime.
  static absl::StatusOr<std::unique_ptr<HsaCliSession>> Open(const CaptureSource& source,
                                                             const HsaCliOptions& options);
  // Restore, one dispatch.
  absl::StatusOr<ReplayInfo> Run();
  // Restore, one dispatch, compare every region that has a post image.
  absl::StatusOr<ValidationReport> Validate(const CompareOptions& options);
  // Restore, one validated dispatch, warm-up, timed dispatches.
  absl::StatusOr<BenchReport> Bench(const HsaBenchOptions& options);

  // HSA-specific facts of the last command, for the JSON document's "hsa" key.
  nlohmann::json HsaJson() const;

 private:
  HsaCliSession() = default;
  absl::StatusOr<HsaReplayReport> Replay(const HsaReplayOptions& options);
  ReplayInfo Info(const HsaReplayReport& r) const;

  const CaptureSource* source_ = nullptr;
  HsaCliOptions options_;
  HsaReplayInput input_;
  std::unique_ptr<HsaRuntime> runtime_;
  std::string gpu_name_;
  HsaReplayReport last_;
  std::vector<std::string> extra_warnings_;
};

}  // namespace kerncap::replay::hsa

#endif  // KERNCAP_REPRODUCER_HSA_HSA_CLI_H_
