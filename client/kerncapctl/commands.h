// commands.h: kerncapctl's subcommands. Each takes a connected Connection and
// its parsed options, writes human or --json output to `out`, and returns a
// status that main() turns into the exit code (connection.h).
#ifndef KERNCAP_CLIENT_KERNCAPCTL_COMMANDS_H_
#define KERNCAP_CLIENT_KERNCAPCTL_COMMANDS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/kerncapctl/connection.h"
#include "client/kerncapctl/output.h"

namespace kerncap::ctl {


struct ArmOptions {
  std::string kernel;
  std::string match = "substring";
  uint32_t pid = 0;
  std::string process;
  int device = -1;
  int64_t rank = -1;
  uint64_t skip = 0;
  uint64_t nth = 0;
  uint32_t count = 1;
  bool count_given = false;  // --count on the command line (per-shape arms default to 16)
  std::string per_shape;     // "", "scalars" or "launch"
  std::string ttl;
  std::vector<std::string> tags;
};

struct KernelsOptions {
  uint32_t pid = 0;
  std::string process;
  std::string agent;
  std::string kernel;  // optional filter, matched per `match` as an arm would
  std::string match = "substring";
  std::string sample;  // non-empty: count launches this long first ("5s")
};

struct CapturesOptions {
  std::string kernel;
  uint32_t pid = 0;
  std::string tag;
  uint32_t limit = 0;
  std::string since;  // ParseTimePoint forms (args.h)
  std::string until;
};

// One line for a selector (arms, substitutions): match kind, kernel, filters.
std::string SelectorText(const v1::Selector& s);

absl::Status CmdStatus(Connection& c, Output o);
absl::Status CmdAgents(Connection& c, Output o);
// The kernel census of the live agents (ListKernels), optionally filtered by
// a kernel pattern with the arm selector's semantics.
absl::Status CmdKernels(Connection& c, Output o, const KernelsOptions& opts);
absl::Status CmdArm(Connection& c, Output o, const ArmOptions& opts);
absl::Status CmdDisarm(Connection& c, Output o, const std::string& arm_id, bool all);
absl::Status CmdArms(Connection& c, Output o, bool all);
absl::Status CmdCaptures(Connection& c, Output o, const CapturesOptions& opts);
absl::Status CmdShow(Connection& c, Output o, const std::string& capture);
// Deletes each id in turn; the result is the first failure (all are tried).
absl::Status CmdRm(Connection& c, Output o, const std::vector<std::string>& captures);
// Client, daemon, API and store format versions; the daemon part is left out
// (with the reason) when no daemon answers.
absl::Status CmdVersion(const ConnectionOptions& options, Output o);
absl::Status CmdGc(Connection& c, Output o, bool dry_run);
absl::Status CmdVerify(Connection& c, Output o, const std::string& capture, bool rehash);
absl::Status CmdImport(Connection& c, Output o, const std::string& path);
// Imports a .kcap file into the daemon `c` reaches; the new capture's id.
absl::StatusOr<std::string> ImportKcap(Connection& c, const std::string& path);
absl::Status CmdExport(Connection& c, Output o, const std::string& capture,
                       const std::string& out_file);
absl::Status CmdPull(Connection& source, Connection& dest, Output o, const std::string& capture);
absl::Status CmdWatch(Connection& c, Output o);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_COMMANDS_H_
