// agent_control.h: what the gRPC control service needs from the agent side of
// the daemon (implemented by AgentLinkServer). Kept abstract so the service
// can be tested without live agents.
//
// Every call acts for a caller (daemon/caller.h) and reaches only what the
// caller may: agents whose process is the caller's user, arms and
// substitutions the caller made (all of them for a privileged caller). An
// arm reaches only processes of its owner's user unless a privileged caller
// made it.
#ifndef KERNCAP_DAEMON_AGENT_LINK_AGENT_CONTROL_H_
#define KERNCAP_DAEMON_AGENT_LINK_AGENT_CONTROL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/caller.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap {

class AgentControl {
 public:
  virtual ~AgentControl() = default;

  virtual std::vector<v1::AgentInfo> ListAgents(const Caller& caller) = 0;

  // The kernel census of the agents the request names (control.proto
  // ListKernelsRequest): one entry per matching agent, with its kernels or
  // the reason it has none to give.
  virtual v1::ListKernelsResponse ListKernels(const v1::ListKernelsRequest&, const Caller&) {
    return {};
  }

  // Validates the selector (InvalidArgument naming the bad field, e.g. an
  // invalid regex), records the arm, and pushes it to every connected agent
  // (and to agents that connect later, until it is done or expires).
  virtual absl::StatusOr<v1::ArmInfo> Arm(const v1::ArmRequest& request, const Caller& caller) = 0;
  // NotFound for an unknown arm id; InvalidArgument if neither id nor all.
  virtual absl::StatusOr<std::vector<v1::ArmInfo>> Disarm(const v1::DisarmRequest& request,
                                                          const Caller& caller) = 0;
  virtual std::vector<v1::ArmInfo> ListArms(bool include_finished, const Caller& caller) = 0;

  virtual int IngestsInFlight() = 0;

  // Live substitution (control.proto SubstituteRequest). Defaults: not
  // offered (implementations without agents).
  // `preflight`: what kerncapd validated before going live (recorded).
  virtual absl::StatusOr<v1::SubstitutionInfo> Substitute(const v1::SubstituteRequest&,
                                                          const Caller&,
                                                          const std::string& /*preflight*/) {
    return absl::UnimplementedError("this daemon does not substitute kernels");
  }
  // NotFound for an unknown id.
  virtual absl::StatusOr<v1::SubstitutionInfo> Unsubstitute(const std::string&, const Caller&) {
    return absl::UnimplementedError("this daemon does not substitute kernels");
  }
  virtual std::vector<v1::SubstitutionInfo> ListSubstitutions(bool /*include_finished*/,
                                                              const Caller&) {
    return {};
  }
};

}  // namespace kerncap

#endif  // KERNCAP_DAEMON_AGENT_LINK_AGENT_CONTROL_H_
