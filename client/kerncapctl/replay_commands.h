// replay_commands.h: `kerncapctl replay|validate|bench CAPTURE [flags]`. These
// drive the replayer, kerncap-replay (reproducer/replay), which needs a GPU
// and the CUDA driver that kerncapctl itself does without: kerncapctl finds
// the binary, passes the capture and the flags through, and exits with the
// replayer's exit code (the shared table, docs/EXIT_CODES.md: 0 ok/pass,
// 8 outputs differ, 2 usage, 1 replay error, 77 no CUDA driver or device).
//
// Where the capture comes from:
//   - CAPTURE names an existing file: a .kcap, given to the replayer as is;
//   - kerncapctl talks to a Unix socket: `--daemon=unix:<socket>` CAPTURE, the
//     replayer reads the capture from kerncapd itself;
//   - kerncapctl talks to a TCP daemon (--host, TLS, tokens, which the
//     replayer does not speak): kerncapctl exports the capture to a temporary
//     .kcap over its own connection, runs the replayer on it, and deletes it.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_REPLAY_COMMANDS_H_
#define KERNCAP_CLIENT_KERNCAPCTL_REPLAY_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/control/replay_lookup.h"
#include "client/kerncapctl/connection.h"

namespace kerncap::ctl {

// What the replayer is asked to do, with the flags it is given verbatim.
struct ReplayRequest {
  std::string mode;     // "run" (kerncapctl replay), "validate" or "bench"
  std::string capture;  // capture id (or unique prefix), or a .kcap path
  std::vector<std::string> flags;  // "--rtol=1e-5", "--json", ...
};

// kerncap-replay is found by the one lookup kerncapd's preflight uses too.
using ::kerncap::FindReplayBinary;
using ::kerncap::ReplayLookup;
using ::kerncap::ReplayLookupFromProcess;

// The replayer's argv (without argv[0]): MODE [--daemon=ENDPOINT] CAPTURE FLAGS.
// `daemon_endpoint` empty: CAPTURE is a file.
std::vector<std::string> ReplayArgs(const ReplayRequest& request,
                                    const std::string& daemon_endpoint);

// Runs the request and returns the replayer's exit code (128+N when it died
// of signal N), which kerncapctl exits with; an error when the replayer could
// not be run (not found, export failed). With a Unix socket or a file the
// replayer replaces kerncapctl (exec) and this returns only on failure.
absl::StatusOr<int> RunReplayCommand(const ReplayRequest& request,
                                     const ConnectionOptions& connection);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_REPLAY_COMMANDS_H_
