// slurm_job.h: a Slurm job's nodes and state, asked of Slurm itself (squeue
// for the job, `scontrol show hostnames` to expand its hostlist: Slurm's own
// hostlist grammar, not a parser of ours), and the srun command that runs a
// command on one of its nodes inside the job (docs/CLUSTER.md).
#ifndef KERNCAP_CLIENT_CLUSTER_SLURM_JOB_H_
#define KERNCAP_CLIENT_CLUSTER_SLURM_JOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::cluster {

struct SlurmJob {
  std::string id;
  std::string state;  // RUNNING, PENDING, ...
  std::string user;
  std::string nodelist;            // Slurm's hostlist expression ("kc[1-3]")
  std::vector<std::string> nodes;  // expanded by scontrol, in Slurm's order
};

// The job `id` (digits, or digits_digits for an array task). A job Slurm does
// not know is NotFound; one that is not running is FailedPrecondition (its
// nodes and their daemons are gone or not there yet).
absl::StatusOr<SlurmJob> LookupSlurmJob(const std::string& id, double timeout_s = 30);

// Expands a hostlist expression with `scontrol show hostnames`.
absl::StatusOr<std::vector<std::string>> ExpandHostlist(const std::string& hostlist,
                                                        double timeout_s = 30);

// `nodes` restricted to `subset` (a hostlist expression); every node of the
// subset must belong to the job (InvalidArgument naming the strangers).
absl::StatusOr<std::vector<std::string>> SelectNodes(const SlurmJob& job,
                                                     const std::string& subset,
                                                     double timeout_s = 30);

// srun's argv to run `command` once on `node` inside the running job `job_id`
// as a step that overlaps the job's own steps (it takes no resources from
// them), without stdin, and quiet (Slurm's messages are errors only).
std::vector<std::string> SrunOnNode(const std::string& job_id, const std::string& node,
                                    const std::vector<std::string>& command);

}  // namespace kerncap::cluster

#endif  // KERNCAP_CLIENT_CLUSTER_SLURM_JOB_H_
