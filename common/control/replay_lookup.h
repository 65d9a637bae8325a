// replay_lookup.h: where kerncap-replay is, for the programs that run it
// (kerncapctl's replay commands, kerncapd's substitution preflight).
#ifndef KERNCAP_COMMON_CONTROL_REPLAY_LOOKUP_H_
#define KERNCAP_COMMON_CONTROL_REPLAY_LOOKUP_H_

#include <string>

#include "absl/status/statusor.h"

namespace kerncap {

// Where to look, in this order: `env_override` ($KERNCAP_REPLAY; when set it
// must name an executable), the directory of `self_exe` (the running
// program's own binary), then each directory of `path_env`.
struct ReplayLookup {
  std::string env_override;
  std::string self_exe;
  std::string path_env;
};
ReplayLookup ReplayLookupFromProcess();

// The replayer's path, or NotFound (nowhere to be found) / FailedPrecondition
// ($KERNCAP_REPLAY is not executable) with a message that says where it
// looked and how to fix it.
absl::StatusOr<std::string> FindReplayBinary(const ReplayLookup& lookup);

}  // namespace kerncap

#endif  // KERNCAP_COMMON_CONTROL_REPLAY_LOOKUP_H_
