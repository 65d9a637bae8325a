// substitution_registry.h: kerncapd's record of live substitutions
// (control.proto SubstituteRequest; agent protocol feature "substitution",
// common/agent_link/messages.h): which agents each one was sent to and what
// each reported. The agent link server sends the frames; this keeps the
// state the control service shows.
//
// A substitution is ACTIVE while any of its agents is "pending" or
// "active"; ENDED once every agent refused or ended (an agent whose link
// dropped has ended: the agent drops its substitutions with the link).
// Agent reports are bounded here: strings are cut, at most kMaxChecks checks.
//
// Thread-safety: all methods are thread-safe.
#ifndef KERNCAP_DAEMON_AGENT_LINK_SUBSTITUTION_REGISTRY_H_
#define KERNCAP_DAEMON_AGENT_LINK_SUBSTITUTION_REGISTRY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/agent_link/messages.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap::link {

class SubstitutionRegistry {
 public:
  static constexpr size_t kMaxChecks = 16;
  static constexpr size_t kMaxText = 1024;
  static constexpr size_t kMaxFinished = 256;  // ended substitutions kept for listing

  // Records a new substitution sent to `agents` (each starts "pending").
  void Add(v1::SubstitutionInfo info, const std::vector<v1::SubstitutionAgentResult>& agents);
  // An agent's report (ignored for unknown substitutions or agents it was
  // not sent to).
  void OnReport(const std::string& agent_id, const SubstitutionReportMsg& report, int64_t now_ms);
  // The agent's link dropped: its live substitutions have ended.
  void OnAgentGone(const std::string& agent_id, int64_t now_ms);
  // Unsubstitute: the agents that still hold it (to send Unsubstitute to);
  // nullopt for an unknown id. Their results end here at once (the agent's
  // final report still updates the counts).
  std::optional<std::vector<std::string>> End(const std::string& id, const std::string& reason,
                                              int64_t now_ms);
  std::optional<v1::SubstitutionInfo> Get(const std::string& id);
  std::vector<v1::SubstitutionInfo> List(bool include_finished);

 private:
  static void Recompute(v1::SubstitutionInfo* info);
  void TrimLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::map<std::string, v1::SubstitutionInfo> subs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);  // creation order
};

}  // namespace kerncap::link

#endif  // KERNCAP_DAEMON_AGENT_LINK_SUBSTITUTION_REGISTRY_H_
