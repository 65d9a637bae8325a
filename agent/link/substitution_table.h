// substitution_table.h: the backend-neutral policy of live substitution
// (feature "substitution", common/agent_link/messages.h): which dispatches a
// substitution takes, when it ends, what it has counted and timed, and the
// reports the link sends about it. The backend (agent/cuda) does what is
// vendor specific: loading the variant, checking its parameter layout,
// swapping the launched function, recording device time.
//
// Life of a substitution:
//   Add (the daemon's Substitute)          state "pending"
//   the first matching dispatch: the backend's prepare() runs once (under the
//     table's lock, so concurrent launches of the kernel wait for it): it
//     loads the variant and checks it. Ok: "active"; error: "refused", and no
//     dispatch is ever substituted.
//   Decide() per matching dispatch: substitute or not (ab: every second one,
//     the original first), counted; count reached / ttl passed: "ended".
//   Remove (the daemon's Unsubstitute), Fail (a variant launch the driver
//     refused): "ended". DropAll (the link went away): everything is
//     forgotten at once, nothing more is substituted.
//
// Hot path: with no live substitution, live() is one atomic load.
#ifndef KERNCAP_AGENT_LINK_SUBSTITUTION_TABLE_H_
#define KERNCAP_AGENT_LINK_SUBSTITUTION_TABLE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/agent_link/messages.h"
#include "common/agent_link/result.h"
#include "common/agent_link/selector.h"

namespace kerncap::agent {

// What a backend keeps of a loaded variant (a module and its function).
class SubstitutionVariant {
 public:
  virtual ~SubstitutionVariant() = default;
};

// Running mean and sample standard deviation (Welford), with min and max.
class TimingStats {
 public:
  void Add(double us);
  link::DeviceTimingInfo Info() const;

 private:
  uint64_t n_ = 0;
  double mean_ = 0, m2_ = 0, min_ = 0, max_ = 0;
};

class SubstitutionTable {
 public:
  using Clock = std::chrono::steady_clock;
  // At most this many substitutions per agent (ended ones included; the
  // oldest ended one is forgotten to make room).
  static constexpr size_t kMaxSubstitutions = 16;

  struct Prepared {
    std::shared_ptr<SubstitutionVariant> variant;
    std::vector<std::string> checks;  // what was checked, for the report
  };
  // The backend's load and check of a variant for the dispatch that matched
  // first (`mangled`: that dispatch's kernel). Error: the reason it is refused.
  using PrepareFn = std::function<link::LinkResult<Prepared>(
      const link::SubstituteMsg& msg, const std::string& code_object, std::string_view mangled)>;

  struct Decision {
    std::string sub_id;
    bool use_variant = false;
    bool timed = false;  // ab: the backend measures this dispatch's device time
    std::shared_ptr<SubstitutionVariant> variant;  // set when use_variant
  };

  // `pid` / `process_name`: this process, for the selector's process fields.
  SubstitutionTable(uint32_t pid, std::string process_name);

  // A Substitute from the daemon. Refused (error, nothing added) for a
  // duplicate id, a bad selector, or an empty code object; the caller
  // reports the refusal.
  link::LinkStatus Add(const link::SubstituteMsg& msg, std::string code_object,
                       Clock::time_point now);
  // Unsubstitute: ends it (false: unknown id).
  bool Remove(const std::string& sub_id, link::UnsubstituteReason reason);
  // The link dropped: every substitution is forgotten, nothing is reported.
  void DropAll();
  // Fork child: a fresh lock (a parent thread may have held it), nothing kept.
  void ResetAfterFork();

  // Any substitution pending or active (one atomic load).
  bool live() const { return live_.load(std::memory_order_acquire) > 0; }

  // A dispatch of `mangled` / `demangled` on `device`: the first live
  // substitution that selects it decides. `accepts` (may be empty) lets the
  // backend decline a prepared variant for this dispatch (another context);
  // such a dispatch is left alone and not counted.
  std::optional<Decision> Decide(std::string_view demangled, std::string_view mangled,
                                 int32_t device, Clock::time_point now, const PrepareFn& prepare,
                                 const std::function<bool(const SubstitutionVariant&)>& accepts);
  // The device time of a timed dispatch (microseconds), or that it could not
  // be read.
  void AddTiming(const std::string& sub_id, bool variant, double us);
  void TimingFailed(const std::string& sub_id);
  // The variant's launch failed in the driver: ends the substitution.
  void Fail(const std::string& sub_id, const std::string& reason);

  // Reports due: every state change at once (but an "ended" one only once
  // the timings of its timed dispatches are in, so the final report is
  // complete), otherwise changed counts at most every
  // kSubstitutionReportIntervalMs (force: everything that changed).
  std::vector<link::SubstitutionReportMsg> TakeReports(Clock::time_point now, bool force = false);
  // The current report of one substitution (tests, diagnostics).
  std::optional<link::SubstitutionReportMsg> Report(const std::string& sub_id) const;

 private:
  struct Entry {
    link::SubstituteMsg msg;
    std::string code_object;  // freed once prepared
    link::Selector selector;
    std::optional<link::NameMatcher> matcher;
    Clock::time_point added;
    link::SubstitutionState state = link::SubstitutionState::kPending;
    std::string reason;
    std::string kernel;
    std::vector<std::string> checks;
    std::shared_ptr<SubstitutionVariant> variant;
    uint64_t matched = 0;  // matching dispatches decided while active
    uint64_t variant_launches = 0;
    uint64_t original_launches = 0;
    uint64_t timing_failures = 0;
    uint64_t timings_pending = 0;  // timed dispatches whose time is not in yet
    TimingStats variant_time, original_time;
    Clock::time_point first_dispatch, last_dispatch;
    bool state_changed = true;  // a report is due at once
    bool counts_changed = false;
    Clock::time_point last_report;
  };
  Entry* FindLocked(const std::string& sub_id);
  void EndLocked(Entry* e, const std::string& reason);
  void SetLiveLocked();
  static link::SubstitutionReportMsg ReportOf(const Entry& e);

  const uint32_t pid_;
  const std::string process_name_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;  // oldest first
  std::atomic<int> live_{0};
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_LINK_SUBSTITUTION_TABLE_H_
