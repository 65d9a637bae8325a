// ncu_profile.h: `kerncap-replay profile`: Nsight Compute (ncu) on the
// replayed kernel, and the figures performance engineers read first.
//
// kerncap-replay re-runs itself as `kerncap-replay run ...` (same capture,
// code object and launch overrides) under
//   ncu --csv --page raw --print-units base --metrics <NcuMetrics()>
//       --kernel-name-base mangled --kernel-name <captured kernel>
//       --launch-count 1 --target-processes all
// and reads the one profiled launch from the CSV: a header row of column
// names (ID, Process ID, ..., Kernel Name, ..., Block Size, Grid Size, ...,
// then one column per metric), a row of units, then one row per kernel
// launch; values are quoted and may carry thousands separators.
//
// Figures (ProfileFigures): duration; achieved and theoretical occupancy;
// DRAM and L2 throughput (% of peak, bytes/s); SM and memory speed-of-light
// (% of peak); roofline position: FP32 (or FP64 when the kernel does more
// FP64) FLOPs from the SASS instruction counters (FMA = 2), DRAM bytes,
// arithmetic intensity, achieved FLOP/s against the peak and the ridge
// point (peak FLOP/s / peak DRAM bytes/s): "memory" bound left of it,
// "compute" right of it. A figure whose metrics ncu did not report is absent
// (never a 0).
//
// Skips (exit 77, the tests' skip code, with the reason): no ncu found
// (--ncu, $KERNCAP_NCU, PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-compute)
// or no permission to read the performance counters (ERR_NVGPUCTRPERM).
#ifndef KERNCAP_REPRODUCER_REPLAY_CUDA_NCU_PROFILE_H_
#define KERNCAP_REPRODUCER_REPLAY_CUDA_NCU_PROFILE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace kerncap::replay {

// The metrics asked of ncu.
const std::vector<std::string>& NcuMetrics();

struct ProfileFigures {
  std::string kernel;  // as ncu named it
  std::string grid, block;
  std::optional<double> duration_ns;
  std::optional<double> achieved_occupancy_pct, theoretical_occupancy_pct;
  std::optional<double> dram_throughput_pct, dram_bytes_per_second;
  std::optional<double> l2_throughput_pct, l2_bytes_per_second;
  std::optional<double> sm_sol_pct, memory_sol_pct;
  // Roofline.
  std::string precision;  // "fp32" or "fp64"
  std::optional<double> flops, dram_bytes, arithmetic_intensity;
  std::optional<double> achieved_flops_per_second, peak_flops_per_second;
  std::optional<double> peak_dram_bytes_per_second, ridge_point;
  std::string bound;  // "memory", "compute", or "" (not enough metrics)
  std::map<std::string, std::string> metrics;  // every metric column: "value unit"
};

// The launch's figures from ncu's raw-page CSV. InvalidArgument when the
// text has no header with the metric columns or no launch row; with more
// than one launch row the first is used.
absl::StatusOr<ProfileFigures> ParseNcuCsv(const std::string& csv);

nlohmann::json ProfileJson(const ProfileFigures& f);
std::string FormatProfile(const ProfileFigures& f);

// The ncu to run: `flag` when given (it must be executable), else
// $KERNCAP_NCU, PATH, then the toolkit's usual places; nullopt when none.
std::optional<std::string> FindNcu(const std::string& flag);

// ncu's argv (without argv[0]) for profiling `kernel` (mangled) in `child`.
std::vector<std::string> NcuArgs(const std::string& kernel, const std::vector<std::string>& child);

struct ProcessResult {
  int exit_code = 0;  // 128+N when killed by signal N
  std::string out, err;
};
// Runs `argv` (argv[0] a path) with no stdin, collecting stdout and stderr,
// killed after `timeout_s` (exit_code 124 then).
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv, int timeout_s);

// The reason to skip rather than fail, when ncu's output says the counters
// cannot be read; nullopt otherwise.
std::optional<std::string> NcuSkipReason(const ProcessResult& r);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CUDA_NCU_PROFILE_H_
