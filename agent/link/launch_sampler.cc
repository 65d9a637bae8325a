#include "agent/link/launch_sampler.h"

#include <algorithm>

#include "agent/link/kernel_census.h"

namespace kerncap::agent {

void LaunchSampler::Start(uint64_t id, Clock::duration duration, Clock::time_point now) {
  bool hold = false;
  {
    std::lock_guard lock(mu_);
    const auto longest = std::chrono::milliseconds(link::kMaxSampleMs);
    id_ = id;
    started_ = now;
    deadline_ = now + std::clamp<Clock::duration>(duration, Clock::duration::zero(), longest);
    ClearLocked();
    hold = !holding_;
    holding_ = true;
    active_.store(true, std::memory_order_relaxed);
  }
  if (hold && hold_) hold_(true);
}

bool LaunchSampler::CountingLocked(Clock::time_point now) const {
  return id_ != 0 && now < deadline_;
}

void LaunchSampler::Record(std::string_view mangled_name, std::string_view demangled_name,
                           const link::SampledConfig& config,
                           std::optional<uint64_t> argument_shape, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (!CountingLocked(now)) return;
  if (mangled_name.empty() || !SendableKernelName(mangled_name) ||
      !SendableKernelName(demangled_name)) {
    ++unattributed_;
    return;
  }
  auto it = kernels_.find(mangled_name);
  if (it == kernels_.end()) {
    if (kernels_.size() >= link::kMaxSampledKernels) {
      if (left_out_names_.size() < link::kMaxSampledKernels) {
        left_out_names_.emplace(mangled_name);
      }
      return;
    }
    it = kernels_.emplace(std::string(mangled_name), KernelCounts{}).first;
    it->second.demangled_name = std::string(demangled_name);
  }
  KernelCounts& k = it->second;
  ++k.launches;
  const ConfigKey key{config.grid, config.block, config.cluster, config.shared_mem_bytes};
  auto c = k.configs.find(key);
  if (c != k.configs.end()) {
    ++c->second;
  } else if (k.configs.size() < link::kMaxSampledConfigsPerKernel) {
    k.configs.emplace(key, 1);
  } else {
    ++k.other_config_launches;
  }
  if (argument_shape && !k.argument_shapes_capped && !k.argument_shapes.count(*argument_shape)) {
    if (k.argument_shapes.size() < link::kMaxArgumentShapesCounted) {
      k.argument_shapes.insert(*argument_shape);
    } else {
      k.argument_shapes_capped = true;
    }
  }
}

void LaunchSampler::RecordGraphLaunch(Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (CountingLocked(now)) ++graph_launches_;
}

void LaunchSampler::ClearLocked() {
  kernels_.clear();
  left_out_names_.clear();
  unattributed_ = 0;
  graph_launches_ = 0;
}

bool LaunchSampler::EndLocked() {
  id_ = 0;
  active_.store(false, std::memory_order_relaxed);
  ClearLocked();
  const bool release = holding_;
  holding_ = false;
  return release;
}

link::SampleReportMsg LaunchSampler::Stop(uint64_t id, Clock::time_point now) {
  link::SampleReportMsg report;
  report.sample_id = id;
  bool release = false;
  {
    std::lock_guard lock(mu_);
    if (id == 0 || id != id_) {
      report.error = id_ == 0 ? "no sample is running" : "another sample is running";
      return report;
    }
    report.seconds =
        std::chrono::duration<double>(std::min(now, deadline_) - started_).count();
    report.unattributed_launches = unattributed_;
    report.graph_launches = graph_launches_;
    report.kernels_left_out = left_out_names_.size();
    std::vector<const std::pair<const std::string, KernelCounts>*> order;
    order.reserve(kernels_.size());
    for (const auto& e : kernels_) order.push_back(&e);
    std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
      return a->second.launches > b->second.launches;
    });
    // Bounded as the protocol says: the body stays under
    // kMaxSampleReportBytes (names can be 64 KiB each).
    size_t bytes = 512;
    for (const auto* e : order) {
      const KernelCounts& k = e->second;
      link::SampledKernel out;
      out.mangled_name = e->first;
      out.demangled_name = k.demangled_name;
      out.launches = k.launches;
      out.other_config_launches = k.other_config_launches;
      out.argument_shapes = static_cast<uint32_t>(k.argument_shapes.size());
      out.argument_shapes_capped = k.argument_shapes_capped;
      for (const auto& [key, n] : k.configs) {
        link::SampledConfig c;
        c.grid = key.grid;
        c.block = key.block;
        c.cluster = key.cluster;
        c.shared_mem_bytes = key.shared_mem_bytes;
        c.launches = n;
        out.configs.push_back(c);
      }
      std::stable_sort(out.configs.begin(), out.configs.end(),
                       [](const auto& a, const auto& b) { return a.launches > b.launches; });
      const size_t size = link::EncodeBody(out).size() + 1;
      if (bytes + size > link::kMaxSampleReportBytes) {
        ++report.kernels_left_out;
        continue;
      }
      bytes += size;
      report.kernels.push_back(std::move(out));
    }
    release = EndLocked();
  }
  if (release && hold_) hold_(false);
  return report;
}

void LaunchSampler::Abort() {
  bool release = false;
  {
    std::lock_guard lock(mu_);
    release = EndLocked();
  }
  if (release && hold_) hold_(false);
}

}  // namespace kerncap::agent
