// report.h: what kerncap-replay prints. One JSON document per command with
// --json (stable snake_case keys), else a short human report. Pure formatting
// and statistics; the GPU work lives in replay_session.h.
#ifndef KERNCAP_REPRODUCER_REPLAY_REPORT_H_
#define KERNCAP_REPRODUCER_REPLAY_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "reproducer/replay/comparator.h"
#include "reproducer/replay/relocator.h"

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

// Facts about restoring and launching, common to every command.
struct ReplayInfo {
  std::string capture_id;
  std::string kernel;
  std::string device;
  bool relocated = false;            // at least one range not at its original address
  std::vector<MovedRange> moved;     // what moved (old -> new)
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
};

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
};

struct ValidationReport {
  ReplayInfo info;
  std::vector<RegionResult> regions;  // every compared region
  bool passed() const;
  size_t failing() const;
};

struct BenchStats {
  size_t iterations = 0;
  double min_ms = 0, median_ms = 0, max_ms = 0, mean_ms = 0, stddev_ms = 0;
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

struct BenchReport {
  ReplayInfo info;
  BenchStats stats;  // the kernel as loaded (the variant when comparing)
  int warmup = 0;
  bool cold_l2 = false;
  bool restore_each = false;
  uint64_t restore_bytes_per_iteration = 0;
  std::vector<double> samples_ms;
  bool compared = false;  // comparison below is filled (--compare-original)
  BenchComparison comparison;
};

nlohmann::json ReplayInfoJson(const ReplayInfo& info);
nlohmann::json ValidationJson(const ValidationReport& report);
nlohmann::json BenchJson(const BenchReport& report, bool include_samples);

std::string FormatReplayInfo(const ReplayInfo& info);
std::string FormatValidation(const ValidationReport& report);
std::string FormatBench(const BenchReport& report);

// "0x7f3a00000000"
std::string Hex(uint64_t v);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_REPORT_H_
