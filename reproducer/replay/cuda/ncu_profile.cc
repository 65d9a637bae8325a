#include "reproducer/replay/cuda/ncu_profile.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace kerncap::replay {
namespace {

constexpr const char* kDuration = "gpu__time_duration.sum";
constexpr const char* kAchievedOcc = "sm__warps_active.avg.pct_of_peak_sustained_active";
constexpr const char* kTheoreticalOcc = "sm__maximum_warps_per_active_cycle_pct";
constexpr const char* kDramPct = "dram__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* kDramBytes = "dram__bytes.sum";
constexpr const char* kDramRate = "dram__bytes.sum.per_second";
constexpr const char* kL2Pct = "lts__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* kL2Rate = "lts__t_bytes.sum.per_second";
constexpr const char* kSmSol = "sm__throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* kMemSol = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed";
constexpr const char* kSmClock = "sm__cycles_elapsed.avg.per_second";
constexpr const char* kDramClock = "dram__cycles_elapsed.avg.per_second";
constexpr const char* kDramPeak = "dram__bytes.sum.peak_sustained";
#define KC_OP(p, op) "sm__sass_thread_inst_executed_op_" #p #op "_pred_on.sum"
constexpr const char* kFfma = KC_OP(f, fma);
constexpr const char* kFadd = KC_OP(f, add);
constexpr const char* kFmul = KC_OP(f, mul);
constexpr const char* kDfma = KC_OP(d, fma);
constexpr const char* kDadd = KC_OP(d, add);
constexpr const char* kDmul = KC_OP(d, mul);
#undef KC_OP
constexpr const char* kFfmaPeak = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained";
constexpr const char* kDfmaPeak = "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained";

// One CSV record: fields separated by commas, optionally quoted ("" is a
// quote inside a quoted field).
std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(cur));
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(std::move(cur));
  return out;
}

std::optional<double> Number(std::string v) {
  v.erase(std::remove(v.begin(), v.end(), ','), v.end());
  double d = 0;
  if (v.empty() || v == "n/a" || !absl::SimpleAtod(v, &d)) return std::nullopt;
  return d;
}

}  // namespace

const std::vector<std::string>& NcuMetrics() {
  static const std::vector<std::string> kMetrics = {
      kDuration, kAchievedOcc, kTheoreticalOcc, kDramPct, kDramBytes, kDramRate, kL2Pct, kL2Rate,
      kSmSol,    kMemSol,      kSmClock,        kDramClock, kDramPeak, kFfma,    kFadd, kFmul,
      kDfma,     kDadd,        kDmul,           kFfmaPeak,  kDfmaPeak};
  return kMetrics;
}

absl::StatusOr<ProfileFigures> ParseNcuCsv(const std::string& csv) {
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(csv, '\n')) {
    // ncu's own messages (==PROF==, ==WARNING==) and the child's output are
    // not CSV records: keep only lines that start with a quoted field.
    if (!absl::StartsWith(line, "\"")) continue;
    rows.push_back(SplitCsvLine(std::string(line)));
  }
  size_t header = rows.size();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (std::find(rows[i].begin(), rows[i].end(), "Kernel Name") != rows[i].end()) {
      header = i;
      break;
    }
  }
  if (header == rows.size()) {
    return absl::InvalidArgumentError(
        "ncu printed no CSV header (no \"Kernel Name\" column): was the kernel profiled?");
  }
  const std::vector<std::string>& names = rows[header];
  // The units row follows the header (its ID field is empty); then launches.
  size_t units = header + 1, first = header + 1;
  if (units < rows.size() && !rows[units].empty() && rows[units][0].empty()) first = units + 1;
  if (first >= rows.size()) {
    return absl::InvalidArgumentError("ncu profiled no launch of the kernel (no result row)");
  }
  const std::vector<std::string>& row = rows[first];
  ProfileFigures f;
  std::map<std::string, double> v;
  for (size_t c = 0; c < names.size() && c < row.size(); ++c) {
    const std::string& n = names[c];
    if (n == "Kernel Name") f.kernel = row[c];
    if (n == "Grid Size") f.grid = row[c];
    if (n == "Block Size") f.block = row[c];
    if (n.find("__") == std::string::npos) continue;  // not a metric column
    const std::string unit =
        units < rows.size() && first > units && c < rows[units].size() ? rows[units][c] : "";
    f.metrics[n] = unit.empty() ? row[c] : absl::StrCat(row[c], " ", unit);
    if (std::optional<double> d = Number(row[c])) v[n] = *d;
  }
  auto get = [&](const char* k) -> std::optional<double> {
    auto it = v.find(k);
    if (it == v.end()) return std::nullopt;
    return it->second;
  };
  f.duration_ns = get(kDuration);
  f.achieved_occupancy_pct = get(kAchievedOcc);
  f.theoretical_occupancy_pct = get(kTheoreticalOcc);
  f.dram_throughput_pct = get(kDramPct);
  f.dram_bytes_per_second = get(kDramRate);
  f.l2_throughput_pct = get(kL2Pct);
  f.l2_bytes_per_second = get(kL2Rate);
  f.sm_sol_pct = get(kSmSol);
  f.memory_sol_pct = get(kMemSol);
  f.dram_bytes = get(kDramBytes);
  // Roofline: FMA counts twice.
  auto flops = [&](const char* fma, const char* add, const char* mul) -> std::optional<double> {
    if (!get(fma) || !get(add) || !get(mul)) return std::nullopt;
    return 2 * *get(fma) + *get(add) + *get(mul);
  };
  std::optional<double> fp32 = flops(kFfma, kFadd, kFmul), fp64 = flops(kDfma, kDadd, kDmul);
  const bool use64 = fp64 && (!fp32 || *fp64 > *fp32);
  f.precision = use64 ? "fp64" : "fp32";
  f.flops = use64 ? fp64 : fp32;
  std::optional<double> fma_peak = get(use64 ? kDfmaPeak : kFfmaPeak);
  if (fma_peak && get(kSmClock)) f.peak_flops_per_second = *fma_peak * 2 * *get(kSmClock);
  if (get(kDramPeak) && get(kDramClock)) {
    f.peak_dram_bytes_per_second = *get(kDramPeak) * *get(kDramClock);
  }
  if (f.flops && f.duration_ns && *f.duration_ns > 0) {
    f.achieved_flops_per_second = *f.flops / (*f.duration_ns * 1e-9);
  }
  if (f.flops && f.dram_bytes && *f.dram_bytes > 0) {
    f.arithmetic_intensity = *f.flops / *f.dram_bytes;
  }
  if (f.peak_flops_per_second && f.peak_dram_bytes_per_second &&
      *f.peak_dram_bytes_per_second > 0) {
    f.ridge_point = *f.peak_flops_per_second / *f.peak_dram_bytes_per_second;
    if (f.arithmetic_intensity) {
      f.bound = *f.arithmetic_intensity < *f.ridge_point ? "memory" : "compute";
    }
  }
  return f;
}

nlohmann::json ProfileJson(const ProfileFigures& f) {
  auto opt = [](const std::optional<double>& d) -> nlohmann::json {
    return d ? nlohmann::json(*d) : nlohmann::json(nullptr);
  };
  nlohmann::json roofline = {{"precision", f.precision},
                             {"flops", opt(f.flops)},
                             {"dram_bytes", opt(f.dram_bytes)},
                             {"arithmetic_intensity", opt(f.arithmetic_intensity)},
                             {"achieved_flops_per_second", opt(f.achieved_flops_per_second)},
                             {"peak_flops_per_second", opt(f.peak_flops_per_second)},
                             {"peak_dram_bytes_per_second", opt(f.peak_dram_bytes_per_second)},
                             {"ridge_point", opt(f.ridge_point)},
                             {"bound", f.bound.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.bound)}};
  if (f.achieved_flops_per_second && f.peak_flops_per_second && *f.peak_flops_per_second > 0) {
    roofline["pct_of_peak_flops"] = 100 * *f.achieved_flops_per_second / *f.peak_flops_per_second;
  }
  return {{"kernel", f.kernel},
          {"grid", f.grid},
          {"block", f.block},
          {"duration_us", f.duration_ns ? nlohmann::json(*f.duration_ns / 1e3) : nullptr},
          {"achieved_occupancy_pct", opt(f.achieved_occupancy_pct)},
          {"theoretical_occupancy_pct", opt(f.theoretical_occupancy_pct)},
          {"dram_throughput_pct", opt(f.dram_throughput_pct)},
          {"dram_bytes_per_second", opt(f.dram_bytes_per_second)},
          {"l2_throughput_pct", opt(f.l2_throughput_pct)},
          {"l2_bytes_per_second", opt(f.l2_bytes_per_second)},
          {"sm_sol_pct", opt(f.sm_sol_pct)},
          {"memory_sol_pct", opt(f.memory_sol_pct)},
          {"roofline", roofline},
          {"metrics", f.metrics}};
}

std::string FormatProfile(const ProfileFigures& f) {
  auto cell = [](const std::optional<double>& d, int precision, double scale) {
    return d ? absl::StrFormat("%.*f", precision, *d * scale) : std::string("n/a");
  };
  std::string out = absl::StrFormat("kernel %s  grid %s  block %s\n", f.kernel, f.grid, f.block);
  const std::pair<const char*, std::string> rows[] = {
      {"duration (us)", cell(f.duration_ns, 3, 1e-3)},
      {"achieved occupancy (%)", cell(f.achieved_occupancy_pct, 1, 1)},
      {"theoretical occupancy (%)", cell(f.theoretical_occupancy_pct, 1, 1)},
      {"DRAM throughput (% of peak)", cell(f.dram_throughput_pct, 1, 1)},
      {"DRAM bandwidth (GB/s)", cell(f.dram_bytes_per_second, 1, 1e-9)},
      {"L2 throughput (% of peak)", cell(f.l2_throughput_pct, 1, 1)},
      {"L2 bandwidth (GB/s)", cell(f.l2_bytes_per_second, 1, 1e-9)},
      {"SM speed-of-light (%)", cell(f.sm_sol_pct, 1, 1)},
      {"memory speed-of-light (%)", cell(f.memory_sol_pct, 1, 1)},
      {"arithmetic intensity (FLOP/B)", cell(f.arithmetic_intensity, 3, 1)},
      {"achieved (GFLOP/s)", cell(f.achieved_flops_per_second, 1, 1e-9)},
      {"peak (GFLOP/s)", cell(f.peak_flops_per_second, 1, 1e-9)},
      {"ridge point (FLOP/B)", cell(f.ridge_point, 2, 1)},
  };
  for (const auto& [name, value] : rows) absl::StrAppendFormat(&out, "  %-30s %12s\n", name, value);
  absl::StrAppendFormat(&out, "  %-30s %12s\n", "roofline (" + f.precision + ")",
                        f.bound.empty() ? "n/a" : f.bound + "-bound");
  return out;
}

std::optional<std::string> FindNcu(const std::string& flag) {
  auto executable = [](const std::string& p) { return ::access(p.c_str(), X_OK) == 0; };
  if (!flag.empty()) return executable(flag) ? std::optional<std::string>(flag) : std::nullopt;
  if (const char* e = std::getenv("KERNCAP_NCU"); e != nullptr && *e != '\0') {
    return executable(e) ? std::optional<std::string>(e) : std::nullopt;
  }
  if (const char* path = std::getenv("PATH")) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      std::string p = absl::StrCat(dir, "/ncu");
      if (executable(p)) return p;
    }
  }
  for (const char* p : {"/usr/local/cuda/bin/ncu", "/usr/local/cuda/nsight-compute/ncu"}) {
    if (executable(p)) return std::string(p);
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/opt/nvidia/nsight-compute", ec)) {
    std::string p = (e.path() / "ncu").string();
    if (executable(p)) return p;
  }
  return std::nullopt;
}

std::vector<std::string> NcuArgs(const std::string& kernel, const std::vector<std::string>& child) {
  std::vector<std::string> a = {"--csv",
                                "--page",
                                "raw",
                                "--print-units",
                                "base",
                                "--metrics",
                                absl::StrJoin(NcuMetrics(), ","),
                                "--kernel-name-base",
                                "mangled",
                                "--kernel-name",
                                kernel,
                                "--launch-count",
                                "1",
                                "--target-processes",
                                "all"};
  a.insert(a.end(), child.begin(), child.end());
  return a;
}

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv, int timeout_s) {
  if (argv.empty()) return absl::InvalidArgumentError("RunProcess: empty argv");
  char out_tmpl[] = "/tmp/kc_profile_out_XXXXXX";
  char err_tmpl[] = "/tmp/kc_profile_err_XXXXXX";
  const int out_fd = ::mkstemp(out_tmpl);
  const int err_fd = ::mkstemp(err_tmpl);
  if (out_fd < 0 || err_fd < 0) return absl::InternalError("mkstemp failed");
  ::unlink(out_tmpl);
  ::unlink(err_tmpl);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ::close(out_fd);
    ::close(err_fd);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", argv[0], ": ", std::strerror(rc)));
  }
  ProcessResult r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  bool timed_out = false;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.exit_code = timed_out            ? 124
                : WIFEXITED(status) ? WEXITSTATUS(status)
                                    : 128 + WTERMSIG(status);
  auto slurp = [](int fd) {
    std::string s;
    ::lseek(fd, 0, SEEK_SET);
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return s;
  };
  r.out = slurp(out_fd);
  r.err = slurp(err_fd);
  return r;
}

std::optional<std::string> NcuSkipReason(const ProcessResult& r) {
  const std::string all = r.out + r.err;
  if (absl::StrContains(all, "ERR_NVGPUCTRPERM")) {
    return "ncu has no permission to read the GPU performance counters (ERR_NVGPUCTRPERM): run "
           "as root, or load the driver with NVreg_RestrictProfilingToAdminUsers=0";
  }
  return std::nullopt;
}

}  // namespace kerncap::replay
