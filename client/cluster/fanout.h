// fanout.h: runs one command per cluster node, a bounded number at a time,
// each under its own deadline, and keeps every node's outcome, so a fleet
// operation reports which nodes answered and names those that did not
// (docs/CLUSTER.md). The commands are child processes (srun steps, or
// kerncapctl against a node's TLS listener): a node that hangs costs one slot
// until its deadline, never the whole operation.
#ifndef KERNCAP_CLIENT_CLUSTER_FANOUT_H_
#define KERNCAP_CLIENT_CLUSTER_FANOUT_H_

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace kerncap::cluster {

struct NodeCommand {
  std::string node;               // the name results are reported under
  std::vector<std::string> argv;  // argv[0] is looked up on PATH
};

struct NodeOutcome {
  std::string node;
  int exit_code = -1;       // the command's exit status; -1: it did not exit by itself
  bool timed_out = false;   // killed at its deadline
  std::string spawn_error;  // non-empty: it could not be started
  std::string out;          // stdout (at most FanoutOptions::max_output bytes)
  std::string err;          // stderr (the same bound)
  bool truncated = false;   // output beyond the bound was dropped
  double seconds = 0;       // wall time from start to exit (or kill)
  bool ok() const { return spawn_error.empty() && !timed_out && exit_code == 0; }
};

struct FanoutOptions {
  size_t concurrency = 16;   // children running at once (at least 1)
  double timeout_s = 30;     // each child's deadline; 0: none
  double kill_grace_s = 2;   // SIGTERM at the deadline, SIGKILL this much later
  size_t max_output = 4 << 20;  // per stream per node
  // Called with each finished node as it finishes (in completion order), on
  // the calling thread; may be empty.
  std::function<void(const NodeOutcome&)> on_done;
  // Called with each chunk of a child's stdout as it arrives (watch), on the
  // calling thread; may be empty.
  std::function<void(const std::string& node, const std::string& chunk)> on_output;
};

// Runs every command and returns one outcome per command, in input order.
// Never throws; a command that cannot start is an outcome with spawn_error.
std::vector<NodeOutcome> RunFanout(const std::vector<NodeCommand>& commands,
                                   const FanoutOptions& options);

}  // namespace kerncap::cluster

#endif  // KERNCAP_CLIENT_CLUSTER_FANOUT_H_
