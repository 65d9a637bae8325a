#include "agent/link/substitution_table.h"

#include <algorithm>
#include <cmath>
#include <new>

namespace kerncap::agent {

using link::LinkStatus;

void TimingStats::Add(double us) {
  ++n_;
  if (n_ == 1) {
    min_ = max_ = us;
  } else {
    min_ = std::min(min_, us);
    max_ = std::max(max_, us);
  }
  const double d = us - mean_;
  mean_ += d / static_cast<double>(n_);
  m2_ += d * (us - mean_);
}

link::DeviceTimingInfo TimingStats::Info() const {
  link::DeviceTimingInfo info;
  info.samples = n_;
  if (n_ == 0) return info;
  info.mean_us = mean_;
  info.stddev_us = n_ > 1 ? std::sqrt(m2_ / static_cast<double>(n_ - 1)) : 0.0;
  info.min_us = min_;
  info.max_us = max_;
  return info;
}

SubstitutionTable::SubstitutionTable(uint32_t pid, std::string process_name)
    : pid_(pid), process_name_(std::move(process_name)) {}

SubstitutionTable::Entry* SubstitutionTable::FindLocked(const std::string& sub_id) {
  for (auto& e : entries_) {
    if (e->msg.sub_id == sub_id) return e.get();
  }
  return nullptr;
}

void SubstitutionTable::SetLiveLocked() {
  int n = 0;
  for (const auto& e : entries_) {
    if (e->state == link::SubstitutionState::kPending || e->state == link::SubstitutionState::kActive) ++n;
  }
  live_.store(n, std::memory_order_release);
}

void SubstitutionTable::EndLocked(Entry* e, const std::string& reason) {
  if (e->state == link::SubstitutionState::kEnded || e->state == link::SubstitutionState::kRefused) return;
  // A substitution that never substituted anything ends as it was: a pending
  // one that is removed is "ended" with nothing counted.
  e->state = link::SubstitutionState::kEnded;
  e->reason = reason;
  e->state_changed = true;
  e->code_object.clear();
  e->code_object.shrink_to_fit();
  SetLiveLocked();
}

LinkStatus SubstitutionTable::Add(const link::SubstituteMsg& msg, std::string code_object,
                                  Clock::time_point now) {
  if (msg.sub_id.empty()) return LinkStatus::Error("Substitute without a sub_id");
  if (code_object.empty()) return LinkStatus::Error("Substitute without a code object");
  link::Selector selector;
  selector.kernel = msg.kernel;
  selector.match = msg.match;
  selector.pid = msg.pid;
  selector.process_name = msg.process_name;
  selector.device = msg.device;
  if (!link::MatchesProcess(selector, pid_, process_name_)) {
    return LinkStatus::Error("the selector does not apply to this process");
  }
  link::LinkResult<link::NameMatcher> matcher =
      link::NameMatcher::Compile(selector.kernel, selector.match);
  if (!matcher.ok()) return LinkStatus::Error("bad kernel selector: " + matcher.error());
  std::lock_guard lock(mu_);
  if (FindLocked(msg.sub_id) != nullptr) {
    return LinkStatus::Error("substitution " + msg.sub_id + " exists already");
  }
  if (entries_.size() >= kMaxSubstitutions) {
    auto ended = std::find_if(entries_.begin(), entries_.end(), [](const auto& e) {
      return e->state == link::SubstitutionState::kEnded || e->state == link::SubstitutionState::kRefused;
    });
    if (ended == entries_.end()) {
      return LinkStatus::Error("this agent already has " + std::to_string(kMaxSubstitutions) +
                               " live substitutions");
    }
    entries_.erase(ended);
  }
  auto e = std::make_unique<Entry>();
  e->msg = msg;
  e->code_object = std::move(code_object);
  e->selector = std::move(selector);
  e->matcher.emplace(std::move(matcher).value());
  e->added = now;
  e->last_report = now;
  entries_.push_back(std::move(e));
  SetLiveLocked();
  return LinkStatus::Ok();
}

bool SubstitutionTable::Remove(const std::string& sub_id, link::UnsubstituteReason reason) {
  std::lock_guard lock(mu_);
  Entry* e = FindLocked(sub_id);
  if (e == nullptr) return false;
  EndLocked(e, std::string(link::WireName(reason)));
  return true;
}

void SubstitutionTable::DropAll() {
  std::vector<std::unique_ptr<Entry>> gone;
  {
    std::lock_guard lock(mu_);
    gone.swap(entries_);
    live_.store(0, std::memory_order_release);
  }
  // Variants are released outside the lock (a backend may unload there).
}

void SubstitutionTable::ResetAfterFork() {
  new (&mu_) std::mutex();
  entries_.clear();  // the child's copy; no substitution survives a fork
  live_.store(0, std::memory_order_release);
}

std::optional<SubstitutionTable::Decision> SubstitutionTable::Decide(
    std::string_view demangled, std::string_view mangled, int32_t device, Clock::time_point now,
    const PrepareFn& prepare, const std::function<bool(const SubstitutionVariant&)>& accepts) {
  std::lock_guard lock(mu_);
  for (auto& ep : entries_) {
    Entry* e = ep.get();
    if (e->state != link::SubstitutionState::kPending && e->state != link::SubstitutionState::kActive) continue;
    if (e->msg.ttl_ms != 0 && now - e->added >= std::chrono::milliseconds(e->msg.ttl_ms)) {
      EndLocked(e, "ttl of " + std::to_string(e->msg.ttl_ms) + " ms passed");
      continue;
    }
    if (!link::MatchesDevice(e->selector, device) || !e->matcher->Matches(demangled, mangled)) {
      continue;
    }
    if (e->state == link::SubstitutionState::kPending) {
      e->kernel = std::string(mangled);
      link::LinkResult<Prepared> p =
          prepare ? prepare(e->msg, e->code_object, mangled)
                  : link::LinkResult<Prepared>(LinkStatus::Error("no backend to load variants"));
      e->code_object.clear();
      e->code_object.shrink_to_fit();
      e->state_changed = true;
      if (!p.ok()) {
        e->state = link::SubstitutionState::kRefused;
        e->reason = p.error();
        SetLiveLocked();
        continue;
      }
      e->state = link::SubstitutionState::kActive;
      e->variant = std::move(p->variant);
      e->checks = std::move(p->checks);
    }
    // A substitution is for one kernel: the one its first dispatch named.
    if (mangled != e->kernel) continue;
    if (accepts && e->variant != nullptr && !accepts(*e->variant)) continue;
    Decision d;
    d.sub_id = e->msg.sub_id;
    d.use_variant = e->msg.ab ? (e->matched % 2 == 1) : true;
    d.timed = e->msg.ab;
    if (d.timed) ++e->timings_pending;
    if (e->matched == 0) e->first_dispatch = now;
    e->last_dispatch = now;
    ++e->matched;
    if (d.use_variant) {
      d.variant = e->variant;
      ++e->variant_launches;
    } else {
      ++e->original_launches;
    }
    e->counts_changed = true;
    if (e->msg.count != 0 && e->variant_launches >= e->msg.count) {
      EndLocked(e, "count of " + std::to_string(e->msg.count) + " reached");
    }
    return d;
  }
  return std::nullopt;
}

void SubstitutionTable::AddTiming(const std::string& sub_id, bool variant, double us) {
  std::lock_guard lock(mu_);
  Entry* e = FindLocked(sub_id);
  if (e == nullptr) return;
  (variant ? e->variant_time : e->original_time).Add(us);
  if (e->timings_pending > 0) --e->timings_pending;
  e->counts_changed = true;
}

void SubstitutionTable::TimingFailed(const std::string& sub_id) {
  std::lock_guard lock(mu_);
  Entry* e = FindLocked(sub_id);
  if (e == nullptr) return;
  ++e->timing_failures;
  if (e->timings_pending > 0) --e->timings_pending;
  e->counts_changed = true;
}

void SubstitutionTable::Fail(const std::string& sub_id, const std::string& reason) {
  std::lock_guard lock(mu_);
  Entry* e = FindLocked(sub_id);
  if (e != nullptr) EndLocked(e, reason);
}

link::SubstitutionReportMsg SubstitutionTable::ReportOf(const Entry& e) {
  link::SubstitutionReportMsg r;
  r.sub_id = e.msg.sub_id;
  r.state = e.state;
  r.reason = e.reason;
  r.kernel = e.kernel;
  r.checks = e.checks;
  r.variant_launches = e.variant_launches;
  r.original_launches = e.original_launches;
  r.variant = e.variant_time.Info();
  r.original = e.original_time.Info();
  r.timing_failures = e.timing_failures;
  if (e.matched > 1) {
    const double s = std::chrono::duration<double>(e.last_dispatch - e.first_dispatch).count();
    if (s > 0) r.launch_rate_hz = static_cast<double>(e.matched - 1) / s;
  }
  return r;
}

std::vector<link::SubstitutionReportMsg> SubstitutionTable::TakeReports(Clock::time_point now,
                                                                        bool force) {
  std::vector<link::SubstitutionReportMsg> out;
  std::lock_guard lock(mu_);
  for (auto& ep : entries_) {
    Entry* e = ep.get();
    // Expiry is noticed here too, so a kernel that stops being launched
    // still ends on time.
    if (e->msg.ttl_ms != 0 && now - e->added >= std::chrono::milliseconds(e->msg.ttl_ms)) {
      EndLocked(e, "ttl of " + std::to_string(e->msg.ttl_ms) + " ms passed");
    }
    const bool periodic =
        e->counts_changed &&
        (force || now - e->last_report >= std::chrono::milliseconds(link::kSubstitutionReportIntervalMs));
    if (!e->state_changed && !periodic) continue;
    if (!force && e->state == link::SubstitutionState::kEnded && e->timings_pending > 0) continue;
    e->state_changed = false;
    e->counts_changed = false;
    e->last_report = now;
    out.push_back(ReportOf(*e));
  }
  return out;
}

std::optional<link::SubstitutionReportMsg> SubstitutionTable::Report(
    const std::string& sub_id) const {
  std::lock_guard lock(mu_);
  for (const auto& e : entries_) {
    if (e->msg.sub_id == sub_id) return ReportOf(*e);
  }
  return std::nullopt;
}

}  // namespace kerncap::agent
