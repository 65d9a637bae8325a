#include "client/cluster/slurm_job.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cluster/fanout.h"

namespace kerncap::cluster {
namespace {

bool ValidJobId(const std::string& id) {
  if (id.empty() || id.size() > 32) return false;
  bool underscore = false;
  for (size_t i = 0; i < id.size(); ++i) {
    char c = id[i];
    if (c == '_' && i > 0 && i + 1 < id.size() && !underscore) {
      underscore = true;
      continue;
    }
    if (c < '0' || c > '9') return false;
  }
  return true;
}

absl::StatusOr<std::string> RunTool(const std::vector<std::string>& argv, double timeout_s) {
  FanoutOptions o;
  o.timeout_s = timeout_s;
  o.concurrency = 1;
  NodeOutcome r = RunFanout({NodeCommand{"local", argv}}, o)[0];
  std::string what = absl::StrJoin(argv, " ");
  if (!r.spawn_error.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", argv[0], " (", r.spawn_error,
                     "): --slurm-job needs Slurm's client commands on PATH"));
  }
  if (r.timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat("`", what, "` did not answer within ", timeout_s, " s"));
  }
  if (r.exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("`", what, "` failed (exit ", r.exit_code,
                                               "): ", absl::StripAsciiWhitespace(r.err)));
  }
  return r.out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandHostlist(const std::string& hostlist,
                                                        double timeout_s) {
  absl::StatusOr<std::string> out = RunTool({"scontrol", "show", "hostnames", hostlist}, timeout_s);
  if (!out.ok()) return out.status();
  std::vector<std::string> nodes;
  for (absl::string_view line : absl::StrSplit(*out, '\n', absl::SkipWhitespace())) {
    nodes.emplace_back(absl::StripAsciiWhitespace(line));
  }
  if (nodes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("hostlist \"", hostlist, "\" names no node"));
  }
  return nodes;
}

absl::StatusOr<SlurmJob> LookupSlurmJob(const std::string& id, double timeout_s) {
  if (!ValidJobId(id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slurm-job: \"", id, "\" is not a Slurm job id (digits, or JOB_TASK)"));
  }
  // One line: state|user|nodelist. squeue fails for a job that left the
  // queue long ago and prints nothing for one that just left it.
  absl::StatusOr<std::string> out =
      RunTool({"squeue", "--noheader", "--jobs=" + id, "--format=%T|%u|%N"}, timeout_s);
  if (!out.ok()) {
    if (absl::StrContains(out.status().message(), "Invalid job id")) {
      return absl::NotFoundError(absl::StrCat("Slurm knows no job ", id));
    }
    return out.status();
  }
  std::vector<std::string> lines = absl::StrSplit(*out, '\n', absl::SkipWhitespace());
  if (lines.empty()) {
    return absl::NotFoundError(
        absl::StrCat("Slurm has no job ", id, " in its queue (finished, or never ran): its "
                     "captures are where the epilog put them (docs/CLUSTER.md)"));
  }
  if (lines.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", id, " names ", lines.size(),
                     " jobs (an array?): give one array task as JOB_TASK"));
  }
  std::vector<std::string> f = absl::StrSplit(lines[0], '|');
  if (f.size() != 3) {
    return absl::InternalError(absl::StrCat("unexpected squeue line: ", lines[0]));
  }
  SlurmJob job;
  job.id = id;
  job.state = f[0];
  job.user = f[1];
  job.nodelist = f[2];
  if (job.state != "RUNNING" && job.state != "COMPLETING") {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " is ", job.state, ", not running: no daemon of it to reach"));
  }
  absl::StatusOr<std::vector<std::string>> nodes = ExpandHostlist(job.nodelist, timeout_s);
  if (!nodes.ok()) return nodes.status();
  job.nodes = *std::move(nodes);
  return job;
}

absl::StatusOr<std::vector<std::string>> SelectNodes(const SlurmJob& job,
                                                     const std::string& subset,
                                                     double timeout_s) {
  if (subset.empty()) return job.nodes;
  absl::StatusOr<std::vector<std::string>> want = ExpandHostlist(subset, timeout_s);
  if (!want.ok()) return want.status();
  absl::flat_hash_set<std::string> in_job(job.nodes.begin(), job.nodes.end());
  std::vector<std::string> strangers;
  for (const std::string& n : *want) {
    if (!in_job.contains(n)) strangers.push_back(n);
  }
  if (!strangers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--nodes: ", absl::StrJoin(strangers, ","),
                                                   " not in job ", job.id, " (its nodes: ",
                                                   job.nodelist, ")"));
  }
  return want;
}

std::vector<std::string> SrunOnNode(const std::string& job_id, const std::string& node,
                                    const std::vector<std::string>& command) {
  std::vector<std::string> argv = {"srun",        "--jobid=" + job_id, "--overlap",
                                   "--nodelist=" + node, "--nodes=1",  "--ntasks=1",
                                   "--input=none", "--quiet",          "--kill-on-bad-exit=0"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

}  // namespace kerncap::cluster
