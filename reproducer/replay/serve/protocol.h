// protocol.h: the wire protocol of `kerncap-replay serve` (resident mode):
// requests, their validation, and the answers. Pure: no sockets, no GPU.
//
// Transport: a Unix stream socket (serve --socket=PATH, mode 0600). Each
// request is ONE JSON object on ONE line (UTF-8, terminated by '\n'); the
// server answers each with one JSON object on one line, in order. A client
// may send any number of requests on one connection; requests from all
// connections are executed one at a time (the GPU state is one resource).
// Requests longer than 256 MiB are refused.
//
// Requests ("op" selects the operation; unknown keys are errors, so typos
// such as "iteration" are caught; "id", any JSON value, is echoed back):
//
//   {"op":"evaluate",
//    "code_object_path":"/abs/path/cand.cubin",  // cubin, fatbin or PTX
//        -- or --
//    "code_object_b64":"f0VMRgIBAQ...",          // the same bytes, base64
//    "kernel":"_Z6matmulPfS_S_i",   // mangled name; default: the captured one
//    "iterations":10,   // timed launches, 0..100000 (0: validate only)
//    "warmup":2,        // untimed launches before them, 0..10000
//    "validate":true,   // false: no verdict (changes are still detected)
//    "restore_each":true,  // restore written regions before every timed
//                          // launch; default: when the kernel writes memory
//    "compare_original":true,  // also time the captured code object (loaded
//                          // once, kept), launches interleaved ABBA with the
//                          // candidate's, same restores, at the captured
//                          // launch even when "launch" overrides the
//                          // candidate's; default false
//    "cold_l2":true,    // overwrite a buffer of twice the L2 size on the
//                       // launch stream before every timed launch (outside
//                       // the events); default false
//    "tolerance":{      // as `kerncap-replay validate` (compare_options.h)
//      "dtype":"f32", "region_dtype":["0x7f3a00000000:f16","3:i32"],
//      "atol":1e-5, "rtol":1e-3, "ulp":2, "nan_unequal":false},
//    "launch":{         // launch overrides (core/launch_override.h), every key
//      "grid":[64,1,1], "block":[128,1,1], "shared_mem_bytes":0,  // optional;
//      "max_dynamic_shared_mem":49152, "cache_preference":"l1",   // for this
//      "cluster":[2,1,1]}}                                       // request only
//   {"op":"info"}       // what is being served
//   {"op":"shutdown"}   // answer, then stop serving (exit 0)
//
// Exactly one of code_object_path / code_object_b64. A relative path is
// resolved against the server's working directory (`submit` sends absolute
// paths).
//
// Answers:
//   {"ok":true,"id":..,"op":"evaluate","kernel":"..",
//    "validation":{"passed":true,"verdict":"pass","regions_compared":12,
//                  "regions_failing":0,"not_compared":[..],"unreachable":[..],
//                  "regions":[{"index":3,"va":"0x7f3a00200000","kind":"device",
//                              "name":"","size":4096,"written":true,"dtype":"f32",
//                              "passed":true,"mismatches":0,"differing":0,
//                              "nan_mismatches":0,"worst_abs":0,"worst_rel":0,
//                              "worst_ulp":0,"first_mismatch_offset":-1,
//                              "first_mismatch":{"expected":..,"actual":..}}]},
//    "kernel_ms":{"min":..,"median":..,"max":..,"mean":..,"stddev":..,"iterations":10},
//    "validation_launch_ms":..,"kernel_total_ms":..,"wall_ms":..,"overhead_ms":..,
//    "load_ms":..,"restored_bytes":..,"restore_each":true,"warmup":2,
//    "warnings":[..]}
//   With "compare_original" (and iterations > 0) also
//    "original_ms":{..as kernel_ms..},"speedup":1.23,
//    "speedup_pairs":{"pairs":10,"median":..,"p10":..,"p90":..,"min":..,"max":..},
//    "original_validation":{"before":{..as validation..},"after":{..}}
//   With iterations > 0 (and a verdict asked for) also
//    "revalidation":{..as validation..}: the candidate once more after the
//      timing loop, from restored inputs (a candidate that passes first and
//      corrupts state on later launches fails here),
//   and always "cold_l2", "l2_flush_bytes", "protocol" (one timed launch, in
//   words), "persisting_l2" (l2_control.h: the limit a previous user had set
//   aside, the one the timing ran with), "verdicts_pass" (every verdict given
//   is "pass"), and, when a region is not at its captured address,
//   "relocation" ("note" or "relocated") and "moved_ranges" (report.h).
//   "verdict" is "pass", "fail", "incomplete" (captured state left out of
//   the comparison, listed in "not_compared": e.g. a module variable the
//   candidate lacks or has with another size; never a "pass"), or
//   "launch_shape_dependent": with a "launch" that changes the shape, the
//   candidate failed and so does the captured code object at that launch
//   while it passes at the captured one, so the captured outputs cannot
//   judge the candidate ("shape_probe" in the validation has both verdicts;
//   "launch" in the answer is the launch that ran).
//   speedup = original median / candidate median (> 1: the candidate is
//   faster); speedup_pairs: the ratios original/candidate of launches timed
//   back to back (report.h, ComputeSpeedup).
//   "regions" lists the regions the capture says the kernel writes plus any
//   region that differs (a candidate writing where it should not); the
//   others are counted in regions_compared. "validation" is absent with
//   "validate":false. kernel_ms covers the timed launches (the validation
//   launch alone when iterations is 0). overhead_ms = wall_ms (the whole
//   evaluation inside the server: reading and loading the code object,
//   restores, comparison, launches, unloading) - kernel_total_ms (device time
//   of every launch of the evaluation: validation, warm-up, timed).
//   Infinite errors are the string "inf" (JSON has no infinity).
//
//   {"ok":true,"id":..,"op":"info", ...facts about the served capture...}
//   {"ok":true,"id":..,"op":"shutdown"}
//   {"ok":false,"id":..,"error":"message","code":"INVALID_ARGUMENT"}
//   {"ok":false,...,"context_lost":true}: the candidate faulted (illegal
//     address, trap, ...); the CUDA context and with it the restored state
//     are gone, so the server answers this and exits non-zero rather than
//     answer later requests wrongly.
#ifndef KERNCAP_REPRODUCER_REPLAY_SERVE_PROTOCOL_H_
#define KERNCAP_REPRODUCER_REPLAY_SERVE_PROTOCOL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "reproducer/replay/core/compare_options.h"
#include "reproducer/replay/core/launch_override.h"
#include "reproducer/replay/core/report.h"

namespace kerncap::replay::serve {

inline constexpr size_t kMaxRequestBytes = 256u << 20;
inline constexpr int kMaxIterations = 100000;
inline constexpr int kMaxWarmup = 10000;
inline constexpr int kDefaultIterations = 10;
inline constexpr int kDefaultWarmup = 2;

struct EvaluateRequest {
  // Exactly one is set: a path the server reads, or the bytes themselves
  // (decoded from code_object_b64).
  std::string code_object_path;
  std::optional<std::string> code_object;
  std::string kernel;  // empty: the captured kernel
  int iterations = kDefaultIterations;
  int warmup = kDefaultWarmup;
  bool validate = true;
  std::optional<bool> restore_each;  // unset: automatic
  bool compare_original = false;     // also time the captured code object
  bool cold_l2 = false;              // flush L2 before every timed launch
  CompareOptions compare;
  LaunchOverride launch;  // empty: the captured launch
  // What the request said about tolerances, to send it on (client side).
  nlohmann::json tolerance_json = nlohmann::json::object();
};

enum class Op { kEvaluate, kInfo, kShutdown };

struct Request {
  Op op = Op::kInfo;
  nlohmann::json id;  // null when the request had none
  EvaluateRequest evaluate;
};

// Parses and validates one request line (without or with its '\n').
// InvalidArgument with a message meant for the client on any problem: not
// JSON, not an object, missing or unknown op, unknown keys, no code object
// or both forms, bad base64, iterations/warmup out of range, bad tolerance.
absl::StatusOr<Request> ParseRequest(absl::string_view line);

// The "id" of a request line when it can be recovered (for answering a
// request that failed validation); null otherwise.
nlohmann::json RequestId(absl::string_view line);

// Parses a "tolerance" object into compare options (shared by the parser
// and by `submit`, which builds the object from its flags).
absl::StatusOr<CompareOptions> ParseTolerance(const nlohmann::json& tolerance);

// The request object `submit` and the benchmarks send.
nlohmann::json EvaluateRequestJson(const EvaluateRequest& request, const nlohmann::json& id);

// --- Answers ---------------------------------------------------------------

// One compared region (mirrors comparator.h's CompareStats, trimmed).
struct RegionVerdict {
  size_t index = 0;
  uint64_t va = 0;
  uint64_t replay_va = 0;
  std::string kind;
  std::string name;
  uint64_t size = 0;
  bool written = false;  // the captured post image changes it
  DType dtype = DType::kBytes;
  bool passed = true;
  uint64_t mismatches = 0;  // elements outside the tolerance
  uint64_t differing = 0;   // elements bitwise different
  uint64_t nan_mismatches = 0;
  double worst_abs = 0;
  double worst_rel = 0;
  uint64_t worst_ulp = 0;
  int64_t first_mismatch_offset = -1;
  std::optional<std::pair<double, double>> first_mismatch;  // expected, actual
};

// One comparison of the device state with the captured post image.
struct ValidationSummary {
  size_t regions_compared = 0;
  size_t regions_failing = 0;
  std::vector<RegionVerdict> regions;      // written or differing (see above)
  std::vector<NotCompared> not_compared;   // captured state left out (report.h)
  std::vector<NotCompared> unreachable;    // module variables the candidate cannot reach (report.h)
  // Set by the launch-shape probe (see the protocol above).
  bool launch_shape_dependent = false;
  nlohmann::json shape_probe;  // null: no probe ran
  // "launch_shape_dependent" when the probe says so; else "fail" when a
  // region fails; else "incomplete" when something was left out or nothing
  // compared; else "pass".
  const char* verdict() const;
  bool passed() const;
};

struct EvaluateResult {
  std::string kernel;
  bool validated = false;        // a verdict was asked for ("validate")
  ValidationSummary validation;  // the candidate before the timing
  std::optional<ValidationSummary> revalidation;         // after it (iterations > 0)
  std::optional<ValidationSummary> original_validation;  // compare_original: the
  std::optional<ValidationSummary> original_revalidation;  // captured binary, before/after
  BenchStats kernel_ms;
  bool compared = false;   // compare_original: the two below are filled
  BenchStats original_ms;  // the captured code object, interleaved with kernel_ms's launches
  SpeedupStats speedup;
  int warmup = 0;
  double validation_launch_ms = 0;
  double kernel_total_ms = 0;
  double wall_ms = 0;
  double overhead_ms = 0;
  double load_ms = 0;
  uint64_t restored_bytes = 0;
  bool restore_each = false;
  bool cold_l2 = false;
  uint64_t l2_flush_bytes = 0;
  std::string protocol;          // one timed launch, in words
  PersistingL2State persisting_l2;
  std::vector<MovedRegion> moved;  // regions not at their captured address (the served state's)
  std::vector<std::string> warnings;
  std::string launch;  // the overridden launch in words (empty: the captured one)
  // Every verdict present is "pass" (true without a verdict).
  bool verdicts_pass() const;
};

nlohmann::json EvaluateAnswer(const nlohmann::json& id, const EvaluateResult& result);
nlohmann::json ValidationSummaryJson(const ValidationSummary& v);
nlohmann::json ErrorAnswer(const nlohmann::json& id, const absl::Status& status,
                           bool context_lost = false);
// `info` is the evaluator's description; ok/id/op are added.
nlohmann::json InfoAnswer(const nlohmann::json& id, nlohmann::json info);
nlohmann::json ShutdownAnswer(const nlohmann::json& id);

// One line of the wire format: compact JSON + '\n'.
std::string ToLine(const nlohmann::json& answer);

// JSON has no infinity or NaN: "inf", "-inf", "nan" strings instead.
nlohmann::json JsonNumber(double v);

}  // namespace kerncap::replay::serve

#endif  // KERNCAP_REPRODUCER_REPLAY_SERVE_PROTOCOL_H_
