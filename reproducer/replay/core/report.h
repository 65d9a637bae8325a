// report.h: what kerncap-replay prints. One JSON document per command with
// --json (stable snake_case keys), else a short human report. Pure formatting
// and statistics; the GPU work lives in replay_session.h.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_REPORT_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "reproducer/replay/core/comparator.h"
#include "reproducer/replay/core/relocator.h"

namespace kerncap::replay {

// A texture or surface object recreated for the replay (texture_objects.h).
struct ReplayedTextureObject {
  bool surface = false;
  uint64_t captured_handle = 0;
  uint64_t replay_handle = 0;
  std::string resource;  // "linear" | "pitch2d"
  uint64_t captured_ptr = 0;
  uint64_t replay_ptr = 0;
  uint64_t bytes = 0;    // memory it covers from the pointer on
  std::vector<uint32_t> argument_offsets;
};

// One pre-image region that is not at its captured address in this replay.
struct MovedRegion {
  size_t region = 0;        // pre-image index
  std::string kind;         // RegionKindName
  uint64_t old_va = 0;
  uint64_t size = 0;
  uint64_t new_va = 0;
  // Pointer words into it found (argument blob, restored memory, module
  // variables) and rewritten to its new address.
  uint64_t pointers_patched = 0;
};

// How much a relocation matters:
//   kNone       every region at its captured address;
//   kNote       only small pinned host blocks moved (each at most
//               kSmallHostBlockBytes) and not one pointer to any of them was
//               found: the kernel has no captured pointer to reach them by (runtimes
//               keep small pinned bookkeeping and staging blocks the
//               capture records because they are registered);
//   kRelocated  anything else: pointers were rewritten by a heuristic
//               (relocator.h), so results may differ from a faithful replay.
enum class RelocationSeverity { kNone, kNote, kRelocated };
inline constexpr uint64_t kSmallHostBlockBytes = 2ull << 20;
RelocationSeverity ClassifyRelocation(const std::vector<MovedRegion>& moved);
// "none", "note", "relocated".
const char* RelocationSeverityName(RelocationSeverity s);

// Facts about restoring and launching, common to every command.
struct ReplayInfo {
  std::string capture_id;
  std::string kernel;
  std::string device;
  bool relocated = false;            // at least one region not at its original address
  std::vector<MovedRegion> moved;    // what moved, and the pointers found into it
  uint64_t patched_words = 0;        // pointer words rewritten by relocation
  uint64_t regions = 0;
  uint64_t restored_bytes = 0;
  uint64_t reservations = 0;
  double restore_seconds = 0;        // all of Prepare (reserve, map, upload, code, globals)
  // Phases of Prepare. map_seconds runs on the mapping thread, overlapped
  // with staging_seconds and upload_seconds (not a term of a sum);
  // map_wait_seconds: restore workers blocked on a not-yet-mapped region,
  // summed over workers.
  double init_seconds = 0;           // cuInit, device checks
  double reserve_seconds = 0;        // address reservations + context
  double map_seconds = 0;            // cuMemCreate + cuMemMap + cuMemSetAccess, all mappings
  double map_wait_seconds = 0;
  double staging_seconds = 0;        // pinned staging allocation (inside upload_seconds)
  double code_seconds = 0;           // code object, globals, attributes, arguments, sync
  // The pipelined pre-image upload alone (read + verify + decompress + copy).
  uint64_t upload_bytes = 0;
  double upload_seconds = 0;
  int upload_workers = 0;
  double launch_ms = 0;              // the first (validated) launch, device time
  // Texture/surface objects recreated and patched into the arguments.
  std::vector<ReplayedTextureObject> texture_objects;
  std::vector<std::string> warnings;
  // A launch override (launch_override.h): the launch that ran, in words and
  // as the override's JSON; empty/null: the captured launch.
  std::string launch_override;
  nlohmann::json launch_override_json;
  RelocationSeverity relocation() const { return ClassifyRelocation(moved); }
};

// The relocation lines of the human report (empty when nothing moved):
// "note: ..." for RelocationSeverity::kNote, "RELOCATED REPLAY: ..." else,
// then one line per moved region (kind, index, old address, size, new
// address, pointers patched).
std::string FormatRelocation(const ReplayInfo& info);

struct RegionResult {
  size_t index = 0;
  uint64_t va = 0;          // address in the application
  uint64_t replay_va = 0;   // address in this replay (differs when relocated or a global)
  std::string kind;
  std::string name;
  uint64_t size = 0;
  DType dtype = DType::kBytes;
  Tolerance tolerance;
  CompareStats stats;
  bool passed = true;
  // Compared by validate's device path (the GPU prefilter, then the host
  // comparator for the units that differ); false: on the host.
  bool on_device = false;
};

// Where and how fast a validation compared (the CUDA engine's device path:
// cuda/device_expectation.h; the HSA engine: always the host).
struct ComparisonInfo {
  // "device": every compared device region on the GPU; "host": none;
  // "mixed": some on each (a region whose copy did not fit in device memory).
  std::string path = "host";
  std::string requested = "auto";  // --compare-on
  // Why some or all device regions were compared on the host; empty when
  // none was.
  std::string host_reason;
  uint64_t device_regions = 0;      // compared on the GPU
  uint64_t device_bytes = 0;
  uint64_t host_regions = 0;        // device regions compared on the host
  uint64_t host_bytes = 0;
  // Of device_bytes: in compare units the GPU found not bitwise equal,
  // compared again on the host.
  uint64_t rechecked_bytes = 0;
  uint64_t expectation_bytes = 0;   // device memory holding the expected image
  uint64_t golden_upload_bytes = 0; // post-image chunks the kernel changed, uploaded
  double expectation_seconds = 0;   // device copy + upload, before the launch
  double compare_seconds = 0;       // the comparison after the launch, all of it
  double device_compare_seconds = 0;  // of it: the comparison kernel and its counters
};

// Captured state the verdict does not cover: a module variable the loaded
// code object lacks (or has with another size), a post-image region with no
// pre-image region, a post image whose shape differs from the region's.
struct NotCompared {
  size_t index = 0;  // pre-image index (post-image index when `post_only`)
  bool post_only = false;
  uint64_t va = 0;
  std::string kind;
  std::string name;
  uint64_t size = 0;
  std::string reason;
  // A module variable the loaded code object cannot reach (pointer_scan.h):
  // unchanged by the captured dispatch, not defined by the loaded module,
  // no captured pointer into it. Verdicts list it as a note
  // (ValidationReport::unreachable), not as a gap.
  bool unreachable = false;
};

struct ValidationReport {
  ReplayInfo info;
  std::vector<RegionResult> regions;      // every compared region
  std::vector<NotCompared> not_compared;  // captured state left out of the comparison
  // Captured module variables the loaded code object does not define, which
  // the captured dispatch left unchanged and into which no captured word
  // (memory or arguments) points: the loaded kernel cannot reach them, so
  // they are unchanged by it too. A note, not a gap in the verdict (a
  // minimal unit drops the unused tables of a whole unit's module).
  std::vector<NotCompared> unreachable;
  ComparisonInfo comparison;
  // Wall time of the whole command's work: restore (when it ran in this
  // call) + expectation + launch + comparison; 0 when not measured.
  double validate_seconds = 0;
  // "pass": something was compared, every compared region is within
  // tolerance and nothing was left out; "fail": a compared region is not;
  // "incomplete": none fails but part of the captured state (or all of it)
  // was not compared; "launch_shape_dependent": it failed under a launch
  // override whose shape also makes the captured code object fail while the
  // captured shape passes, so the captured outputs cannot judge it (see
  // launch_override.h). Only "pass" passes.
  const char* verdict() const;
  bool launch_shape_dependent = false;
  // The probe behind launch_shape_dependent: the captured code object's
  // verdicts at the overridden and at the captured launch; null: no probe.
  nlohmann::json shape_probe;
  bool passed() const;
  size_t failing() const;
};

struct BenchStats {
  size_t iterations = 0;
  double min_ms = 0, median_ms = 0, max_ms = 0, mean_ms = 0, stddev_ms = 0;
  double p10_ms = 0, p90_ms = 0;  // 10th/90th percentiles (Percentile)
};
// Sample standard deviation (n-1); median of an even count is the mean of
// the middle two. Empty input gives all zeros.
BenchStats ComputeBenchStats(std::vector<double> samples_ms);

// A variant against the original (captured) binary, timed in one run.
// speedup = original median / variant median (> 1: the variant is faster).
// Its spread comes from the pairs: launch k of the variant and launch k of
// the original ran back to back, so each pair's ratio original/variant sees
// the same clocks and thermal state; the ratios' median, 10th/90th
// percentiles and extremes say how stable the speedup is.
struct SpeedupStats {
  size_t pairs = 0;
  double speedup = 0;  // original median / variant median
  double pair_median = 0, pair_p10 = 0, pair_p90 = 0, pair_min = 0, pair_max = 0;
};
// Pairs (original[k], variant[k]) up to the shorter vector; a pair with a
// variant time <= 0 gives no ratio. A variant median of 0 gives infinity.
// Percentiles interpolate linearly between the closest ranks.
SpeedupStats ComputeSpeedup(const std::vector<double>& original_ms,
                            const std::vector<double>& variant_ms);
// The p-th percentile (0..100) of `samples` (linear interpolation; 0 when empty).
double Percentile(std::vector<double> samples, double p);

struct BenchComparison {
  std::string variant;   // the variant's code object (--code-object); empty: captured
  std::string original;  // the captured code object's name
  std::string order;     // how launches were interleaved, e.g. "ABBA"
  BenchStats original_stats;
  std::vector<double> original_samples_ms;  // pair k: samples_ms[k], original_samples_ms[k]
  SpeedupStats speedup;
};

// The persisting-L2 state the timing ran with. A previous user of the
// context (or process) may have set aside L2 for persisting accesses
// (cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)) or left persisting
// lines behind; the bench resets both and clears the launch stream's
// access-policy window, then puts the limit back afterwards.
struct PersistingL2State {
  bool supported = true;       // false: the driver has no such limit here (nothing to reset)
  uint64_t limit_before = 0;   // bytes set aside when the bench started
  uint64_t limit_during = 0;   // read back after the reset (what the timing ran with)
  bool lines_reset = false;    // cuCtxResetPersistingL2Cache
  bool window_cleared = false; // the stream's access-policy window is empty
  std::string note;            // what could not be done, if anything
};

struct BenchReport {
  ReplayInfo info;
  BenchStats stats;  // the kernel as loaded (the variant when comparing)
  int warmup = 0;
  bool cold_l2 = false;
  uint64_t l2_flush_bytes = 0;  // cold_l2: bytes written before every timed launch
  bool restore_each = false;
  uint64_t restore_bytes_per_iteration = 0;
  std::vector<double> samples_ms;
  bool compared = false;  // comparison below is filled (--compare-original)
  BenchComparison comparison;
  PersistingL2State persisting_l2;
  // What one timed launch is, in order (the same for every binary).
  std::string protocol;
  // Each timed binary validated before the timing loop and again after it
  // (restored inputs, one launch, a full comparison): a binary that passes
  // first and corrupts state during the timing shows in `after`. Absent
  // without a post image (validation_note says so). kernel = the one `stats`
  // describes; original = the captured one when compared.
  std::optional<ValidationReport> kernel_before, kernel_after;
  std::optional<ValidationReport> original_before, original_after;
  // Regions found changed after the timing loop that the restores do not
  // cover (a launch wrote where the capture says the kernel does not); they
  // are put back before the revalidations.
  std::vector<RegionResult> changed_during_timing;
  std::string validation_note;
  // True when every verdict present is "pass".
  bool verdicts_pass() const;
};

nlohmann::json ReplayInfoJson(const ReplayInfo& info);
nlohmann::json ValidationJson(const ValidationReport& report);
// {"result", "regions_compared", "regions_failing", "failing": [{"index",
// "va", "kind", "name", "elements_failing", "first_fail_offset"}],
// "not_compared": [...]}: a verdict without the per-region statistics.
nlohmann::json VerdictJson(const ValidationReport& report);
nlohmann::json NotComparedJson(const NotCompared& n);
nlohmann::json ComparisonJson(const ComparisonInfo& c);
nlohmann::json BenchStatsJson(const BenchStats& s);
nlohmann::json PersistingL2Json(const PersistingL2State& l2);
nlohmann::json BenchJson(const BenchReport& report, bool include_samples);

std::string FormatReplayInfo(const ReplayInfo& info);
// The "compare:" lines of the human report: where, how much, how long.
std::string FormatComparison(const ComparisonInfo& c);
std::string FormatValidation(const ValidationReport& report);
std::string FormatBench(const BenchReport& report);

// "0x7f3a00000000"
std::string Hex(uint64_t v);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_REPORT_H_
