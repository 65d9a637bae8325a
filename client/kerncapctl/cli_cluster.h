// cli_cluster.h: fleet operations over a cluster job's nodes (cli_cluster.cc,
// docs/CLUSTER.md), kept apart from cli.h's command groups.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_CLI_CLUSTER_H_
#define KERNCAP_CLIENT_KERNCAPCTL_CLI_CLUSTER_H_

#include "client/kerncapctl/cli.h"

namespace kerncap::ctl {

// Adds --slurm-job/--endpoints (and --nodes, --node-timeout, --fanout,
// --node-kerncapctl) to arm, disarm, arms, captures, agents, status and
// watch, and adds `wait`. Call after the other groups.
void AddClusterCommands(Cli& cli);

// After parsing: when the chosen command was given --slurm-job or
// --endpoints (or is `wait`), replaces its action with the fleet operation
// and returns true.
bool ApplyClusterMode(Cli& cli, int argc, char** argv);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_CLI_CLUSTER_H_
