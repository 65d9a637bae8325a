#include "daemon/agent_link/substitution_registry.h"

#include <algorithm>
#include <cmath>

namespace kerncap::link {
namespace {

bool Final(SubstitutionState state) {
  return state == SubstitutionState::kRefused || state == SubstitutionState::kEnded;
}
// The API keeps an agent's state by its link name (v1.AgentSubstitution.state).
bool Final(const std::string& state) {
  SubstitutionState s;
  return ParseWireName(state, &s) && Final(s);
}
std::string StateName(SubstitutionState state) { return std::string(WireName(state)); }

std::string Cut(const std::string& s) {
  return s.size() <= SubstitutionRegistry::kMaxText ? s : s.substr(0, SubstitutionRegistry::kMaxText);
}

// Non-finite or negative figures from an agent are not figures.
double Figure(double v) { return std::isfinite(v) && v >= 0 ? v : 0; }

void FillTiming(const DeviceTimingInfo& in, v1::DeviceTiming* out) {
  out->set_samples(in.samples);
  out->set_mean_us(Figure(in.mean_us));
  out->set_stddev_us(Figure(in.stddev_us));
  out->set_min_us(Figure(in.min_us));
  out->set_max_us(Figure(in.max_us));
}

}  // namespace

void SubstitutionRegistry::Recompute(v1::SubstitutionInfo* info) {
  bool live = false;
  for (const auto& a : info->agents()) live = live || !Final(a.state());
  info->set_state(live ? v1::SUBSTITUTION_ACTIVE : v1::SUBSTITUTION_ENDED);
}

void SubstitutionRegistry::Add(v1::SubstitutionInfo info,
                               const std::vector<v1::SubstitutionAgentResult>& agents) {
  for (const auto& a : agents) *info.add_agents() = a;
  Recompute(&info);
  absl::MutexLock lock(&mu_);
  order_.push_back(info.substitution_id());
  subs_[info.substitution_id()] = std::move(info);
  TrimLocked();
}

void SubstitutionRegistry::TrimLocked() {
  size_t finished = 0;
  for (const auto& id : order_) finished += subs_[id].state() == v1::SUBSTITUTION_ENDED;
  for (auto it = order_.begin(); finished > kMaxFinished && it != order_.end();) {
    if (subs_[*it].state() == v1::SUBSTITUTION_ENDED) {
      subs_.erase(*it);
      it = order_.erase(it);
      --finished;
    } else {
      ++it;
    }
  }
}

void SubstitutionRegistry::OnReport(const std::string& agent_id,
                                    const SubstitutionReportMsg& r, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  auto it = subs_.find(r.sub_id);
  if (it == subs_.end()) return;
  for (auto& a : *it->second.mutable_agents()) {
    if (a.agent_id() != agent_id) continue;
    // Once final, a result stays final (a late "active" cannot revive it),
    // but the counts and timings still arrive.
    if (!Final(a.state())) a.set_state(StateName(r.state));
    if (!r.reason.empty()) a.set_reason(Cut(r.reason));
    if (!r.kernel.empty()) a.set_kernel(Cut(r.kernel));
    if (!r.checks.empty()) {
      a.clear_checks();
      for (size_t i = 0; i < r.checks.size() && i < kMaxChecks; ++i) a.add_checks(Cut(r.checks[i]));
    }
    a.set_variant_launches(r.variant_launches);
    a.set_original_launches(r.original_launches);
    FillTiming(r.variant, a.mutable_variant());
    FillTiming(r.original, a.mutable_original());
    a.set_launch_rate_hz(Figure(r.launch_rate_hz));
    a.set_timing_failures(r.timing_failures);
    a.set_updated_unix_ms(now_ms);
  }
  Recompute(&it->second);
}

void SubstitutionRegistry::OnAgentGone(const std::string& agent_id, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, info] : subs_) {
    bool changed = false;
    for (auto& a : *info.mutable_agents()) {
      if (a.agent_id() != agent_id || Final(a.state())) continue;
      a.set_state(StateName(SubstitutionState::kEnded));
      a.set_reason("the agent disconnected (its substitutions end with the link)");
      a.set_updated_unix_ms(now_ms);
      changed = true;
    }
    if (changed) Recompute(&info);
  }
}

std::optional<std::vector<std::string>> SubstitutionRegistry::End(const std::string& id,
                                                                 const std::string& reason,
                                                                 int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  auto it = subs_.find(id);
  if (it == subs_.end()) return std::nullopt;
  std::vector<std::string> holders;
  for (auto& a : *it->second.mutable_agents()) {
    if (Final(a.state())) continue;
    holders.push_back(a.agent_id());
    a.set_state(StateName(SubstitutionState::kEnded));
    a.set_reason(reason);
    a.set_updated_unix_ms(now_ms);
  }
  if (it->second.reason().empty()) it->second.set_reason(reason);
  Recompute(&it->second);
  return holders;
}

std::optional<v1::SubstitutionInfo> SubstitutionRegistry::Get(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = subs_.find(id);
  if (it == subs_.end()) return std::nullopt;
  return it->second;
}

std::vector<v1::SubstitutionInfo> SubstitutionRegistry::List(bool include_finished) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::SubstitutionInfo> out;
  for (const auto& id : order_) {
    const v1::SubstitutionInfo& info = subs_[id];
    if (include_finished || info.state() != v1::SUBSTITUTION_ENDED) out.push_back(info);
  }
  return out;
}

}  // namespace kerncap::link
