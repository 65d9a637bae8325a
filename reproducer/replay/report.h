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

struct BenchReport {
  ReplayInfo info;
  BenchStats stats;
  int warmup = 0;
  bool cold_l2 = false;
  bool restore_each = false;
  uint64_t restore_bytes_per_iteration = 0;
  std::vector<double> samples_ms;
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
