// substitute_command.h: live substitution from the command line
// (control.proto SubstituteRequest):
//
//   kerncapctl substitute --kernel=SELECTOR --code-object=FILE
//       (--preflight=CAPTURE | --no-preflight) [--count=N] [--ttl=DURATION]
//       [--ab] [--wait] [--format=cubin|fatbin|ptx] [--match/--pid/--process/--device]
//   kerncapctl unsubstitute SUBSTITUTION
//   kerncapctl substitutions [SUBSTITUTION] [--all]
//
// --preflight=CAPTURE has kerncapd run `kerncap-replay validate
// --code-object=FILE CAPTURE` on its node (where the GPU and the application
// are), with the caller's rights, and substitute only when it passes (a
// capture of the same kernel: the variant must reproduce the captured
// outputs); the result records what kerncapd checked. A .kcap file is
// imported first. A variant that faults inside the application cannot be
// undone (CUDA errors are sticky), so one of --preflight or an explicit
// --no-preflight is required; a selector that names no process needs
// --all-processes.
//
// --wait polls until every agent has ended (count, ttl or unsubstitute) and
// prints the final figures: per agent the substituted/original dispatches,
// with --ab the device time of both (mean, stddev, min, max; events around
// the launch on the application's stream) and the variant/original ratio,
// and the launch rate. -o json|yaml prints the SubstitutionInfo under the
// JSON policy (docs/JSON.md); -q the substitution ids.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_SUBSTITUTE_COMMAND_H_
#define KERNCAP_CLIENT_KERNCAPCTL_SUBSTITUTE_COMMAND_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/kerncapctl/output.h"
#include "client/kerncapctl/connection.h"

namespace kerncap::ctl {

// The code object's format from its bytes: an ELF image is a cubin, the
// fatbin magic a fatbin, text with a ".target" directive PTX; otherwise an
// error naming the file.
absl::StatusOr<std::string> DetectCodeObjectFormat(const std::string& bytes,
                                                   const std::string& path);

// The command line of `kerncapctl substitute` (cli_substitute.cc fills it).
struct SubstituteOptions {
  std::string kernel;
  std::string match = "substring";
  uint32_t pid = 0;
  std::string process;
  int device = -1;
  std::string code_object;
  std::string format;  // empty: from the bytes
  uint64_t count = 0;
  std::string ttl;
  bool ab = false;
  bool wait = false;
  std::string preflight;  // capture to validate the variant against
  bool no_preflight = false;
  bool all_processes = false;
};

// substitute: the Substitute RPC, whose preflight kerncapd runs. A failed
// preflight exits 8 (outputs differ), 77 (no device on the daemon's node) or
// 9 (refused) and substitutes nothing.
absl::Status CmdSubstitute(Connection& c, Output o, const SubstituteOptions& opts);
absl::Status CmdUnsubstitute(Connection& c, Output o, const std::string& id);
absl::Status CmdSubstitutions(Connection& c, Output o, const std::string& id, bool all);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_SUBSTITUTE_COMMAND_H_
