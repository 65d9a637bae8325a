// Command group: fleet operations over the nodes of a cluster job
// (docs/CLUSTER.md). `--slurm-job=ID` on arm, disarm, arms, captures, agents,
// status and watch (and `wait`, which exists only for fleets) runs the
// command on every node of the job, or on `--nodes=HOSTLIST` of them, and
// prints the answers grouped by node (and by rank for captures).
//
// Transport: by default each node's command runs inside the job as an srun
// step (`srun --jobid=ID --overlap`) that runs kerncapctl on the node against
// the job's own kerncapd (its socket is in the step's environment, exported by
// deploy/slurm/kerncap-task-prolog.sh). `--endpoints=FILE` instead reaches
// daemons over their TCP listeners (TLS options as for --host), one line
// "NAME HOST:PORT" per node, with or without Slurm.
//
// Every node is one child process: at most --fanout at once, each killed at
// --node-timeout; the output names the nodes that did not answer and why, and
// the exit code is 4 (unavailable) when any did not.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cluster/fanout.h"
#include "client/cluster/slurm_job.h"
#include "client/kerncapctl/cli_cluster.h"
#include "client/kerncapctl/commands.h"
#include "common/exit_codes.h"
#include "common/json_policy.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace kerncap::ctl {
namespace {

using nlohmann::json;

// The options every fleet command takes.
struct FleetFlags {
  std::string slurm_job;
  std::string nodes;      // hostlist subset of the job's nodes
  std::string endpoints;  // FILE of "NAME HOST:PORT"
  double node_timeout_s = 30;
  size_t fanout = 16;
  std::string node_kerncapctl;  // kerncapctl on the nodes (default: this binary)
  // wait only
  uint64_t wait_captures = 1;
  double wait_total_s = 300;
};

// Option names that take a value (for cutting them out of the forwarded args).
const char* const kFleetValueOptions[] = {"--slurm-job", "--nodes", "--endpoints",
                                          "--node-timeout", "--fanout", "--node-kerncapctl"};

// The state the post-parse hook needs: which command got fleet flags.
struct FleetState {
  FleetFlags flags;
  std::vector<std::pair<CLI::App*, std::vector<CLI::Option*>>> commands;
  CLI::App* wait = nullptr;
  CLI::App* node_captures = nullptr;
  CapturesOptions node_captures_opts;
};

FleetState& State() {
  static FleetState* s = new FleetState();
  return *s;
}

std::string SelfPath() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "kerncapctl";
  return std::string(buf, n);
}

// Global options that take a value (main.cc's list), to find the command word.
bool GlobalTakesValue(const std::string& a) {
  for (const char* o : {"--socket", "--host", "--tls-ca", "--tls-cert", "--tls-key",
                        "--token-file", "--timeout", "-o", "--output", "--context"}) {
    if (a == o) return true;
  }
  return false;
}

// The command's own arguments from argv (after its command word), without the
// fleet options and without global output options (the node answers JSON).
std::vector<std::string> ForwardedArgs(int argc, char** argv, const std::string& command) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == command) break;
    if (GlobalTakesValue(a)) ++i;
  }
  std::vector<std::string> out;
  for (++i; i < argc; ++i) {
    std::string a = argv[i];
    bool skip = false, skip_next = false;
    for (const char* o : kFleetValueOptions) {
      if (a == o) skip = skip_next = true;
      if (absl::StartsWith(a, absl::StrCat(o, "="))) skip = true;
    }
    for (const char* o : {"--wait-captures", "--wait-timeout"}) {
      if (a == o) skip = skip_next = true;
      if (absl::StartsWith(a, absl::StrCat(o, "="))) skip = true;
    }
    // Global options may come after the command too; the node gets its own.
    if (GlobalTakesValue(a)) skip = skip_next = true;
    for (const char* o : {"--socket=", "--host=", "--tls-ca=", "--tls-cert=", "--tls-key=",
                          "--token-file=", "--timeout=", "-o=", "--output=", "--context="}) {
      if (absl::StartsWith(a, o)) skip = true;
    }
    if (a == "--json" || a == "-q" || a == "--quiet" || a == "--no-headers" ||
        a == "--insecure" || absl::StartsWith(a, "-o")) {
      skip = true;
    }
    if (skip) {
      if (skip_next) ++i;
      continue;
    }
    out.push_back(a);
  }
  return out;
}

struct Target {
  std::string node;
  std::string endpoint;  // --endpoints only
};

absl::StatusOr<std::vector<Target>> ReadEndpoints(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--endpoints: cannot read ", path));
  std::vector<Target> out;
  absl::flat_hash_set<std::string> seen;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || l[0] == '#') continue;
    std::vector<std::string> f = absl::StrSplit(l, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.size() != 2 || f[1].rfind(':') == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--endpoints ", path, ":", n, ": want \"NAME HOST:PORT\", got \"", l, "\""));
    }
    if (!seen.insert(f[0]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--endpoints ", path, ":", n, ": node ", f[0], " named twice"));
    }
    out.push_back({f[0], f[1]});
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--endpoints ", path, ": no node"));
  return out;
}

// The nodes to reach and the command for each.
struct Plan {
  std::string job;  // empty for --endpoints
  std::vector<cluster::NodeCommand> commands;
};

absl::StatusOr<Plan> MakePlan(const GlobalOptions& g, const FleetFlags& f,
                              const std::vector<std::string>& node_args) {
  Plan plan;
  const std::string kctl = f.node_kerncapctl.empty() ? SelfPath() : f.node_kerncapctl;
  // The node's own calls end before the node's deadline, so their error
  // comes back instead of a kill.
  const std::string inner_timeout =
      absl::StrCat("--timeout=", f.node_timeout_s > 2 ? f.node_timeout_s - 1 : f.node_timeout_s);
  if (!f.endpoints.empty()) {
    absl::StatusOr<std::vector<Target>> targets = ReadEndpoints(f.endpoints);
    if (!targets.ok()) return targets.status();
    absl::flat_hash_set<std::string> want;
    if (!f.nodes.empty()) {
      for (absl::string_view n : absl::StrSplit(f.nodes, ',', absl::SkipEmpty())) {
        want.insert(std::string(n));
      }
    }
    for (const Target& t : *targets) {
      if (!want.empty() && !want.contains(t.node)) continue;
      std::vector<std::string> argv = {kctl, "--host=" + t.endpoint, inner_timeout, "--json"};
      if (!g.conn.tls_ca.empty()) argv.push_back("--tls-ca=" + g.conn.tls_ca);
      if (!g.conn.tls_cert.empty()) argv.push_back("--tls-cert=" + g.conn.tls_cert);
      if (!g.conn.tls_key.empty()) argv.push_back("--tls-key=" + g.conn.tls_key);
      if (!g.conn.token_file.empty()) argv.push_back("--token-file=" + g.conn.token_file);
      if (g.conn.insecure) argv.push_back("--insecure");
      argv.insert(argv.end(), node_args.begin(), node_args.end());
      plan.commands.push_back({t.node, std::move(argv)});
    }
    if (plan.commands.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--nodes: none of ", f.nodes, " is in ", f.endpoints));
    }
    return plan;
  }
  absl::StatusOr<cluster::SlurmJob> job = cluster::LookupSlurmJob(f.slurm_job);
  if (!job.ok()) return job.status();
  absl::StatusOr<std::vector<std::string>> nodes = cluster::SelectNodes(*job, f.nodes);
  if (!nodes.ok()) return nodes.status();
  plan.job = job->id;
  std::vector<std::string> inner = {kctl, inner_timeout, "--json"};
  inner.insert(inner.end(), node_args.begin(), node_args.end());
  for (const std::string& n : *nodes) {
    plan.commands.push_back({n, cluster::SrunOnNode(job->id, n, inner)});
  }
  return plan;
}

// One node's answer: its JSON document, or why there is none.
struct NodeAnswer {
  std::string node;
  bool ok = false;
  json result;           // the node's document (ok)
  std::string error;     // why not (not ok)
  int exit_code = 0;     // kerncapctl's exit code on the node, or 4 for no answer
  double seconds = 0;
};

NodeAnswer Interpret(const cluster::NodeOutcome& r, double timeout_s) {
  NodeAnswer a;
  a.node = r.node;
  a.seconds = r.seconds;
  if (!r.spawn_error.empty()) {
    a.error = r.spawn_error;
    a.exit_code = exit_code::kUnavailable;
    return a;
  }
  if (r.timed_out) {
    a.error = absl::StrCat("no answer within --node-timeout=", timeout_s, " s (killed)");
    a.exit_code = exit_code::kUnavailable;
    return a;
  }
  // kerncapctl --json writes its document on stdout and an error object on
  // stderr; anything else on stderr is srun's.
  std::string err_text;
  for (absl::string_view line : absl::StrSplit(r.err, '\n', absl::SkipWhitespace())) {
    json e = json::parse(line, nullptr, false);
    if (!e.is_discarded() && e.is_object() && e.contains("error") && e["error"].is_object()) {
      a.error = e["error"].value("message", "");
      a.exit_code = e["error"].value("exit_code", exit_code::kError);
      return a;
    }
    if (!err_text.empty()) err_text += "; ";
    err_text += std::string(absl::StripAsciiWhitespace(line));
  }
  if (r.exit_code != 0) {
    a.error = absl::StrCat("exit ", r.exit_code, err_text.empty() ? "" : ": ", err_text);
    // kerncapctl's own codes stand; anything else (srun could not reach the
    // node, 233 et al.) is "no answer".
    a.exit_code = r.exit_code < 10 ? r.exit_code : exit_code::kUnavailable;
    return a;
  }
  std::string out(absl::StripAsciiWhitespace(r.out));
  if (out.empty()) {
    a.ok = true;
    return a;
  }
  a.result = json::parse(out, nullptr, false);
  if (a.result.is_discarded()) {
    a.result = json();
    a.error = "the node's answer is not JSON (a kerncapctl of another version on the node?)";
    a.exit_code = exit_code::kError;
    return a;
  }
  a.ok = true;
  return a;
}

std::vector<NodeAnswer> RunPlan(const Plan& plan, const FleetFlags& f,
                                const cluster::FanoutOptions* base = nullptr) {
  cluster::FanoutOptions o;
  if (base) o = *base;
  o.concurrency = f.fanout;
  o.timeout_s = f.node_timeout_s;
  std::vector<cluster::NodeOutcome> outcomes = cluster::RunFanout(plan.commands, o);
  std::vector<NodeAnswer> answers;
  for (const cluster::NodeOutcome& r : outcomes) answers.push_back(Interpret(r, f.node_timeout_s));
  return answers;
}

// The exit code of a fleet command: 0 when every node answered; the nodes'
// common code when all failed alike (a bad selector fails everywhere alike);
// else 4 (unavailable: some nodes did not answer).
int FleetExitCode(const std::vector<NodeAnswer>& answers) {
  int common = -1;
  bool any_failed = false, mixed = false;
  for (const NodeAnswer& a : answers) {
    if (a.ok) {
      mixed = true;
      continue;
    }
    any_failed = true;
    if (common == -1) common = a.exit_code;
    if (common != a.exit_code) mixed = true;
  }
  if (!any_failed) return exit_code::kOk;
  return mixed ? exit_code::kUnavailable : common;
}

json NodesJson(const Plan& plan, const std::vector<NodeAnswer>& answers) {
  json doc;
  if (plan.job.empty()) {
    doc["slurm_job"] = nullptr;
  } else {
    doc["slurm_job"] = plan.job;
  }
  json nodes = json::array();
  json missing = json::array();
  size_t answered = 0;
  for (const NodeAnswer& a : answers) {
    json n = {{"node", a.node}, {"ok", a.ok}, {"seconds", a.seconds}};
    if (a.ok) {
      ++answered;
      n["result"] = a.result;
    } else {
      n["error"] = {{"message", a.error}, {"exit_code", a.exit_code}};
      missing.push_back(a.node);
    }
    nodes.push_back(std::move(n));
  }
  doc["nodes_asked"] = answers.size();
  doc["nodes_answered"] = answered;
  doc["nodes_failed"] = missing;
  doc["nodes"] = std::move(nodes);
  return doc;
}

void PrintFailures(const std::vector<NodeAnswer>& answers, std::ostream& err) {
  size_t failed = 0;
  for (const NodeAnswer& a : answers) failed += a.ok ? 0 : 1;
  if (failed == 0) return;
  err << "kerncapctl: " << failed << " of " << answers.size() << " nodes did not answer:\n";
  for (const NodeAnswer& a : answers) {
    if (!a.ok) err << "  " << a.node << ": " << a.error << "\n";
  }
}

std::string Cell(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "-";
  const json& v = j[key];
  if (v.is_string()) return v.get<std::string>().empty() ? "-" : v.get<std::string>();
  return v.dump();
}

// Generic commands: one row per node with the node's summary.
int PrintGeneric(Output o, const std::string& command, const Plan& plan,
                 const std::vector<NodeAnswer>& answers) {
  if (o.structured()) {
    Emit(o, NodesJson(plan, answers));
  } else {
    Table t({"NODE", "STATUS", "ANSWER"});
    for (const NodeAnswer& a : answers) {
      std::string what;
      if (!a.ok) {
        what = a.error;
      } else if (command == "arm") {
        what = absl::StrCat("arm ", Cell(a.result, "arm_id"));
      } else if (command == "agents" || command == "arms") {
        const char* key = command == "agents" ? "agents" : "arms";
        size_t n = a.result.contains(key) && a.result[key].is_array() ? a.result[key].size() : 0;
        what = absl::StrCat(n, " ", key);
        if (command == "agents" && n > 0) {
          std::vector<std::string> ranks;
          for (const json& ag : a.result[key]) {
            int64_t r = ag.value("rank", int64_t{-1});
            ranks.push_back(absl::StrCat("pid ", Cell(ag["process"], "pid"), " rank ",
                                         r < 0 ? std::string("-") : absl::StrCat(r)));
          }
          what += ": " + absl::StrJoin(ranks, ", ");
        }
      } else {
        what = a.result.is_null() ? "ok" : a.result.dump();
        if (what.size() > 100) what = what.substr(0, 97) + "...";
      }
      t.AddRow({a.node, a.ok ? "ok" : "NO ANSWER", what});
    }
    t.Print(o);
  }
  PrintFailures(answers, std::cerr);
  return FleetExitCode(answers);
}

// captures: one row per capture, by node then rank.
struct CaptureRow {
  std::string node;
  int64_t rank = -1;
  json c;
};

std::vector<CaptureRow> CaptureRows(const std::vector<NodeAnswer>& answers) {
  std::vector<CaptureRow> rows;
  for (const NodeAnswer& a : answers) {
    if (!a.ok || !a.result.contains("captures") || !a.result["captures"].is_array()) continue;
    for (const json& c : a.result["captures"]) {
      CaptureRow r;
      r.node = a.node;
      r.rank = c.contains("rank") && c["rank"].is_number_integer() ? c["rank"].get<int64_t>() : -1;
      r.c = c;
      rows.push_back(std::move(r));
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const CaptureRow& x, const CaptureRow& y) {
    if (x.node != y.node) return x.node < y.node;
    return x.rank < y.rank;
  });
  return rows;
}

int PrintCaptures(Output o, const Plan& plan, const std::vector<NodeAnswer>& answers) {
  std::vector<CaptureRow> rows = CaptureRows(answers);
  if (o.structured()) {
    json doc = NodesJson(plan, answers);
    json flat = json::array();
    for (const CaptureRow& r : rows) {
      json c = r.c;
      c["node"] = r.node;
      flat.push_back(std::move(c));
    }
    doc["captures"] = std::move(flat);
    Emit(o, doc);
  } else if (o.ids_only()) {
    std::vector<std::string> ids;
    for (const CaptureRow& r : rows) ids.push_back(Cell(r.c, "capture_id"));
    Ids(o, "capture", ids);
  } else {
    Table t({"NODE", "RANK", "CAPTURE", "KERNEL", "PID", "CREATED", "LOGICAL"});
    t.AlignRight(1);
    t.AlignRight(4);
    for (const CaptureRow& r : rows) {
      uint64_t logical = 0;
      if (r.c.contains("logical_bytes")) {
        const json& v = r.c["logical_bytes"];
        if (v.is_number_unsigned()) logical = v.get<uint64_t>();
        if (v.is_string()) absl::SimpleAtoi(v.get<std::string>(), &logical);
      }
      int64_t created = 0;
      if (r.c.contains("created_unix_ms")) {
        const json& v = r.c["created_unix_ms"];
        if (v.is_number_integer()) created = v.get<int64_t>();
        if (v.is_string()) absl::SimpleAtoi(v.get<std::string>(), &created);
      }
      t.AddRow({r.node, r.rank < 0 ? "-" : absl::StrCat(r.rank), Cell(r.c, "capture_id"),
                Cell(r.c, "kernel"), Cell(r.c, "pid"), FormatTime(created), HumanBytes(logical)});
    }
    if (rows.empty()) {
      o.out << "no captures\n";
    } else {
      t.Print(o);
    }
  }
  PrintFailures(answers, std::cerr);
  return FleetExitCode(answers);
}

// The node side of `captures`: the daemon's list, each capture with the rank
// its manifest records (ListCaptures' summaries carry no rank).
absl::Status CmdNodeCaptures(Connection& c, Output o, const CapturesOptions& opts) {
  std::ostringstream list;
  Output lo{list};
  lo.format = Format::kJson;
  KC_RETURN_IF_ERROR(CmdCaptures(c, lo, opts));
  json doc = json::parse(list.str(), nullptr, false);
  if (doc.is_discarded()) return absl::InternalError("captures: unreadable list");
  json out = {{"captures", json::array()}};
  if (doc.contains("captures") && doc["captures"].is_array()) {
    for (json cap : doc["captures"]) {
      v1::GetCaptureRequest req;
      req.set_capture_id(cap.value("capture_id", ""));
      v1::CaptureDetail d;
      auto ctx = c.NewContext(true);
      grpc::Status s = c.stub().GetCapture(ctx.get(), req, &d);
      if (s.ok() && d.manifest().process().has_rank()) {
        cap["rank"] = d.manifest().process().rank();
      } else {
        cap["rank"] = nullptr;  // deleted meanwhile, or no rank known
      }
      out["captures"].push_back(std::move(cap));
    }
  }
  Emit(o, out);
  return absl::OkStatus();
}

// watch: every node's event stream at once, each line tagged with its node.
int RunWatch(Output o, const Plan& plan, const FleetFlags& f) {
  FleetFlags streaming = f;
  streaming.node_timeout_s = 0;  // streams run until interrupted
  streaming.fanout = std::max<size_t>(plan.commands.size(), 1);
  std::map<std::string, std::string> partial;
  cluster::FanoutOptions base;
  base.max_output = 0;  // nothing kept; lines are printed as they come
  base.on_output = [&](const std::string& node, const std::string& chunk) {
    std::string& buf = partial[node];
    buf += chunk;
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (o.structured()) {
        json e = json::parse(line, nullptr, false);
        json tagged = {{"node", node}, {"event", e.is_discarded() ? json(line) : e}};
        o.out << tagged.dump() << std::endl;
      } else {
        o.out << node << "  " << line << std::endl;
      }
    }
  };
  base.on_done = [&](const cluster::NodeOutcome& r) {
    NodeAnswer a = Interpret(r, 0);
    std::cerr << "kerncapctl: " << r.node << ": stream ended"
              << (a.error.empty() ? "" : ": " + a.error) << std::endl;
  };
  std::vector<NodeAnswer> answers = RunPlan(plan, streaming, &base);
  return FleetExitCode(answers);
}

// wait: polls the fleet's captures until --wait-captures are there (or
// --wait-timeout passes: exit 4, naming what came and which nodes did not
// answer).
int RunWait(Output o, const GlobalOptions& g, const FleetFlags& f,
            const std::vector<std::string>& filter_args) {
  std::vector<std::string> node_args = {"cluster-node-captures"};
  node_args.insert(node_args.end(), filter_args.begin(), filter_args.end());
  absl::StatusOr<Plan> plan = MakePlan(g, f, node_args);
  if (!plan.ok()) {
    json_policy::WriteError(std::cerr, plan.status(), exit_code::ForStatus(plan.status()));
    return exit_code::ForStatus(plan.status());
  }
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::vector<NodeAnswer> answers = RunPlan(*plan, f);
    size_t have = CaptureRows(answers).size();
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (have >= f.wait_captures || waited >= f.wait_total_s) {
      int rc = PrintCaptures(o, *plan, answers);
      if (have < f.wait_captures) {
        std::cerr << "kerncapctl: wait: " << have << " of " << f.wait_captures
                  << " captures after " << f.wait_total_s << " s\n";
        return exit_code::kUnavailable;
      }
      return rc;
    }
    ::usleep(500 * 1000);
  }
}

void AddFleetOptions(CLI::App* sub, FleetFlags& f, std::vector<CLI::Option*>& given) {
  given.push_back(sub->add_option("--slurm-job", f.slurm_job,
                                  "run on every node of this running Slurm job (docs/CLUSTER.md)")
                      ->group("Cluster"));
  given.push_back(sub->add_option("--endpoints", f.endpoints,
                                  "run on the kerncapd of each line \"NAME HOST:PORT\" of FILE "
                                  "(TCP; TLS options as for --host)")
                      ->group("Cluster"));
  sub->add_option("--nodes", f.nodes,
                  "only these nodes (a Slurm hostlist: node[1-4],gpu7; with --endpoints: "
                  "names, comma-separated)")
      ->group("Cluster");
  sub->add_option("--node-timeout", f.node_timeout_s,
                  "seconds each node has to answer (then it is reported, not waited for)")
      ->check(Number(0.1))
      ->capture_default_str()
      ->group("Cluster");
  sub->add_option("--fanout", f.fanout, "nodes asked at once")
      ->check(WholeNumber(1, 1024))
      ->capture_default_str()
      ->group("Cluster");
  sub->add_option("--node-kerncapctl", f.node_kerncapctl,
                  "kerncapctl's path on the nodes (default: this one's)")
      ->group("Cluster");
}

}  // namespace

void AddClusterCommands(Cli& cli) {
  FleetState& st = State();
  for (const char* name : {"arm", "disarm", "arms", "captures", "agents", "status", "watch"}) {
    std::vector<CLI::App*> found =
        cli.app.get_subcommands([name](CLI::App* a) { return a->get_name() == name; });
    if (found.empty()) continue;
    CLI::App* sub = found[0];
    std::vector<CLI::Option*> given;
    AddFleetOptions(sub, st.flags, given);
    st.commands.push_back({sub, given});
  }

  CLI::App* wait = cli.app.add_subcommand(
      "wait", "wait until a cluster job's nodes hold captures (--slurm-job or --endpoints)");
  std::vector<CLI::Option*> wait_given;
  AddFleetOptions(wait, st.flags, wait_given);
  wait->add_option("--wait-captures", st.flags.wait_captures, "captures to wait for, in all")
      ->check(WholeNumber(1, 1000000))
      ->capture_default_str();
  wait->add_option("--wait-timeout", st.flags.wait_total_s, "give up after this many seconds")
      ->check(Number(0))
      ->capture_default_str();
  wait->add_option("--kernel", st.node_captures_opts.kernel, "only captures of this kernel");
  SetCommandHelp(wait, Uses::kDaemon,
                 {"kerncapctl wait --slurm-job=1234 --wait-captures=4 --kernel=matmul"},
                 "Exit 0 once the job's nodes hold --wait-captures captures (listed as by "
                 "`captures --slurm-job`); 4 when --wait-timeout passes first.");
  st.wait = wait;
  wait->callback([&cli, wait_given] {
    if (wait_given[0]->count() == 0 && wait_given[1]->count() == 0) {
      throw CLI::ValidationError("wait", "give --slurm-job=ID or --endpoints=FILE");
    }
  });

  // The node side of `captures --slurm-job` (not for people: hidden).
  CapturesOptions* nco = &st.node_captures_opts;
  CLI::App* nc = cli.app.add_subcommand("cluster-node-captures", "");
  nc->group("");
  nc->add_option("--kernel", nco->kernel);
  nc->add_option("--pid", nco->pid);
  nc->add_option("--tag", nco->tag);
  nc->add_option("--since", nco->since);
  nc->add_option("--until", nco->until);
  nc->add_option("--limit", nco->limit);
  nc->callback([&cli, nco] {
    cli.remote = [nco](Connection& c, Output o) { return CmdNodeCaptures(c, o, *nco); };
  });
  st.node_captures = nc;
}

bool ApplyClusterMode(Cli& cli, int argc, char** argv) {
  FleetState& st = State();
  CLI::App* chosen = nullptr;
  for (auto& [sub, given] : st.commands) {
    if (sub->parsed() && (given[0]->count() > 0 || given[1]->count() > 0)) chosen = sub;
  }
  if (st.wait->parsed()) chosen = st.wait;
  if (chosen == nullptr) return false;
  if (!st.flags.slurm_job.empty() && !st.flags.endpoints.empty()) {
    cli.remote = nullptr;
    cli.local = [](Output) -> absl::StatusOr<int> {
      return absl::InvalidArgumentError("--slurm-job and --endpoints: give one");
    };
    return true;
  }
  const std::string command = chosen->get_name();
  std::vector<std::string> args = ForwardedArgs(argc, argv, command);
  cli.remote = nullptr;
  if (command == "wait") {
    cli.local = [&cli, args](Output o) -> absl::StatusOr<int> {
      return RunWait(o, cli.g, State().flags, args);
    };
    return true;
  }
  std::vector<std::string> node_args = {command == "captures" ? "cluster-node-captures" : command};
  node_args.insert(node_args.end(), args.begin(), args.end());
  cli.local = [&cli, command, node_args](Output o) -> absl::StatusOr<int> {
    absl::StatusOr<Plan> plan = MakePlan(cli.g, State().flags, node_args);
    if (!plan.ok()) return plan.status();
    if (command == "watch") return RunWatch(o, *plan, State().flags);
    std::vector<NodeAnswer> answers = RunPlan(*plan, State().flags);
    if (command == "captures") return PrintCaptures(o, *plan, answers);
    return PrintGeneric(o, command, *plan, answers);
  };
  return true;
}

}  // namespace kerncap::ctl
