// engine.h: the replay engine interface. kerncap-replay picks one engine per
// capture in main (the CUDA engine, cuda/cuda_engine.h, or the HSA engine,
// hsa/hsa_engine.h: engine_factory.h) and runs the command on it; the
// commands, their reports (report.h) and JSON are the same for both.
//
// What an engine does per command:
//   Run()       restore the pre image at the captured addresses, one launch;
//   Validate()  Run() and compare with the captured post image (report.h's
//               verdicts; with a launch override that changes the shape, a
//               failure is probed: launch_override.h); where device regions
//               are compared is CompareOptions::place (the CUDA engine's
//               device path: cuda/device_expectation.h; the verdict is the
//               same on either), said in ValidationReport::comparison;
//   Bench()     a validated launch, warm-up, timed launches (device time),
//               validated again after the timing.
// An option an engine cannot honour is refused (Unimplemented, naming it),
// never ignored in silence: a result must be of what was asked.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_ENGINE_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_ENGINE_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "reproducer/replay/core/compare_options.h"
#include "reproducer/replay/core/launch_override.h"
#include "reproducer/replay/core/report.h"

namespace kerncap::replay {

// How an engine is set up (kerncap-replay's common flags).
struct EngineOptions {
  int device = -1;                // -1: the captured device ordinal (0 if absent)
  bool allow_relocation = true;   // false: fail when an address cannot be had
  bool force_relocation = false;  // testing: map everything elsewhere
  // Replaces the captured code object of the kernel (a rebuilt cubin/PTX or
  // hsaco); it must define the captured kernel. Empty: the captured one.
  std::string code_object_path;
  std::string hsa_runtime_path;   // HSA: the runtime library (empty: the default)
  LaunchOverride launch;          // replaces parts of the captured launch
};

struct BenchOptions {
  int warmup = 5;
  int iterations = 50;
  bool cold_l2 = false;
  int restore_each = -1;  // -1: automatic (on when the kernel writes memory)
  // Also time the captured code object, loaded as a second module beside the
  // one under test (EngineOptions::code_object_path; without one the
  // captured code object is compared with itself: a noise check). Both get
  // the captured function attributes and module variables; launches
  // alternate in ABBA order, each after the same restore (and L2 flush);
  // warm-up and iterations count pairs. BenchReport::comparison has both
  // binaries' statistics and the speedup. With a launch override the
  // captured code object runs at the captured launch (the baseline an
  // overridden launch must beat). CUDA only.
  bool compare_original = false;
  // The code object to time instead of the session's (a cubin/PTX/fatbin
  // file defining the captured kernel): loaded for this bench beside the
  // session's module, its module variables and attributes set as the
  // session's, unloaded afterwards. Empty: the session's code object.
  std::string variant_path;
  // Time the captured code object (alone, or as the original with
  // compare_original) even when the session loaded another one.
  bool captured = false;
  // How the validations before and after the timing compare.
  CompareOptions compare;
};

class ReplayEngine {
 public:
  virtual ~ReplayEngine() = default;
  // "cuda" or "hsa": the JSON documents' "platform".
  virtual const char* platform() const = 0;
  virtual absl::StatusOr<ReplayInfo> Run() = 0;
  virtual absl::StatusOr<ValidationReport> Validate(const CompareOptions& options) = 0;
  virtual absl::StatusOr<BenchReport> Bench(const BenchOptions& options) = 0;
  // Facts only this platform has, for the JSON documents (the HSA engine's
  // "hsa" key: runtime, hidden arguments patched); null when none.
  virtual nlohmann::json PlatformJson() const { return nullptr; }
};

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_ENGINE_H_
