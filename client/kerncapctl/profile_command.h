// profile_command.h: `kerncapctl profile CAPTURE [--code-object=V] [--ncu=PATH]
// [--json] [launch overrides]`: Nsight Compute on the replayed kernel. The
// work is kerncap-replay's (`kerncap-replay profile`, reproducer/replay/cuda/
// ncu_profile.h: duration, achieved occupancy, DRAM and L2 throughput, SM and
// memory speed-of-light, roofline position, as a table or JSON; exit 77 with
// the reason when ncu or counter access is unavailable); kerncapctl finds the
// replayer and the capture as for replay/validate/bench (replay_commands.h)
// and exits with its code.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_PROFILE_COMMAND_H_
#define KERNCAP_CLIENT_KERNCAPCTL_PROFILE_COMMAND_H_

#include "CLI/CLI.hpp"
#include "client/kerncapctl/replay_commands.h"

namespace kerncap::ctl {

// Adds the `profile` subcommand to `app`. When it is parsed, *request is
// filled (mode "profile", the capture, the flags to pass on; --json also when
// *json, kerncapctl's global flag, is set) for RunReplayCommand. `request`
// and `json` must outlive parsing.
void AddProfileCommand(CLI::App* app, ReplayRequest* request, const bool* json);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_PROFILE_COMMAND_H_
