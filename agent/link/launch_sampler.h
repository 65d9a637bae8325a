// launch_sampler.h: the agent's side of launch sampling (feature
// "launch_sample", common/agent_link/messages.h): while a sample runs, the
// backend hands every launch it sees to Record(), and Stop() turns the counts
// into the bounded SampleReport.
//
// Cost: outside a sample the backend checks active() (one relaxed atomic
// load) on paths that already run only while its launch callbacks are on;
// the callbacks themselves are turned on for the sample only (the hold
// callback, called on Start and once when the sample ends by Stop or Abort).
// Past its deadline a sample counts nothing more even if no Stop comes.
//
// Thread-safe: Record from any application thread, Start/Stop/Abort from the
// link thread.
#ifndef KERNCAP_AGENT_LINK_LAUNCH_SAMPLER_H_
#define KERNCAP_AGENT_LINK_LAUNCH_SAMPLER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/agent_link/messages.h"

namespace kerncap::agent {

class LaunchSampler {
 public:
  using Clock = std::chrono::steady_clock;
  // hold(true) when a sample starts, hold(false) when it ends: the backend
  // keeps its launch callbacks on in between. Called on the link thread
  // without the sampler's lock.
  explicit LaunchSampler(std::function<void(bool)> hold = {}) : hold_(std::move(hold)) {}

  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Starts sample `id` for `duration` (clamped to link::kMaxSampleMs),
  // replacing one still running (its counts are dropped).
  void Start(uint64_t id, Clock::duration duration, Clock::time_point now = Clock::now());
  // One launch of a kernel with this launch configuration (config.launches
  // is ignored) and, when the backend computed it, its argument shape key.
  // A name the link cannot carry (empty, over-long, not printable ASCII)
  // counts as unattributed.
  void Record(std::string_view mangled_name, std::string_view demangled_name,
              const link::SampledConfig& config, std::optional<uint64_t> argument_shape,
              Clock::time_point now = Clock::now());
  void RecordGraphLaunch(Clock::time_point now = Clock::now());
  // Ends sample `id` and returns its report within the protocol's bounds; an
  // error report when `id` is not the sample running.
  link::SampleReportMsg Stop(uint64_t id, Clock::time_point now = Clock::now());
  // The link dropped: the sample ends, nothing is reported.
  void Abort();

 private:
  struct ConfigKey {
    std::array<uint32_t, 3> grid, block, cluster;
    uint32_t shared_mem_bytes;
    auto operator<=>(const ConfigKey&) const = default;
  };
  struct KernelCounts {
    std::string demangled_name;
    uint64_t launches = 0;
    std::map<ConfigKey, uint64_t> configs;  // at most kMaxSampledConfigsPerKernel
    uint64_t other_config_launches = 0;
    std::set<uint64_t> argument_shapes;     // at most kMaxArgumentShapesCounted
    bool argument_shapes_capped = false;
  };

  // Under mu_: true while sample `id_` counts at `now`.
  bool CountingLocked(Clock::time_point now) const;
  // Under mu_: forgets the counts.
  void ClearLocked();
  // Under mu_: ends the sample; true when the hold must be released.
  bool EndLocked();

  std::function<void(bool)> hold_;
  std::atomic<bool> active_{false};
  std::mutex mu_;
  uint64_t id_ = 0;  // 0: none
  bool holding_ = false;
  Clock::time_point started_{}, deadline_{};
  std::map<std::string, KernelCounts, std::less<>> kernels_;  // by mangled name
  // Kernels first seen once kernels_ is full: their names (at most another
  // kMaxSampledKernels), only to count them.
  std::set<std::string, std::less<>> left_out_names_;
  uint64_t unattributed_ = 0;
  uint64_t graph_launches_ = 0;
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_LINK_LAUNCH_SAMPLER_H_
