#include "client/kerncapctl/commands.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/kerncapctl/args.h"
#include "common/control/api_json.h"
#include "common/control/api_names.h"
#include "common/control/api_selector.h"
#include "common/control/limits.h"
#include "client/kerncapctl/output.h"
#include "client/kerncapctl/progress.h"
#include "common/digest.h"
#include "common/exit_codes.h"
#include "common/json_policy.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "format/manifest_util.h"

namespace kerncap::ctl {
namespace {

std::string Tags(const google::protobuf::Map<std::string, std::string>& tags) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : tags) parts.push_back(absl::StrCat(k, "=", v));
  std::sort(parts.begin(), parts.end());
  return parts.empty() ? "-" : absl::StrJoin(parts, ",");
}

std::string Or(const std::string& s, const char* fallback = "-") {
  return s.empty() ? fallback : s;
}

// Enum names come from the one table (common/control/api_names.h).
std::string N(absl::string_view name) { return name.empty() ? "-" : std::string(name); }
template <typename E>
std::string Name(E value) {
  return N(api::Name(value));
}

std::string Dims(const google::protobuf::RepeatedField<uint32_t>& d) {
  if (d.empty()) return "-";
  return absl::StrJoin(d, "x");
}


std::string ArgValue(const v1::Argument& a, const std::string& blob) {
  if (a.size() == 0 || static_cast<uint64_t>(a.offset()) + a.size() > blob.size()) return "-";
  const unsigned char* p = reinterpret_cast<const unsigned char*>(blob.data()) + a.offset();
  if (a.size() <= 8) {
    uint64_t v = 0;
    for (int i = static_cast<int>(a.size()) - 1; i >= 0; --i) v = (v << 8) | p[i];
    if (a.kind() == v1::ARG_POINTER) return Hex(v);
    return absl::StrCat(v, " (", Hex(v), ")");
  }
  std::string hex;
  for (uint32_t i = 0; i < std::min<uint32_t>(a.size(), 16); ++i) {
    absl::StrAppend(&hex, absl::Hex(p[i], absl::kZeroPad2));
  }
  if (a.size() > 16) absl::StrAppend(&hex, "...");
  return hex;
}


}  // namespace

std::string SelectorText(const v1::Selector& s) {
  std::string text = absl::StrCat(Name(s.match()), " \"", s.kernel(), "\"");
  if (s.pid() != 0) absl::StrAppend(&text, " pid=", s.pid());
  if (!s.process_name().empty()) absl::StrAppend(&text, " process=", s.process_name());
  if (s.has_device()) absl::StrAppend(&text, " device=", s.device());
  if (s.has_rank()) absl::StrAppend(&text, " rank=", s.rank());
  if (s.skip() != 0) absl::StrAppend(&text, " skip=", s.skip());
  if (s.nth() != 0) absl::StrAppend(&text, " nth=", s.nth());
  if (s.per_shape() != v1::PER_SHAPE_OFF) absl::StrAppend(&text, " per-shape=", Name(s.per_shape()));
  return text;
}

absl::Status CmdStatus(Connection& c, Output o) {
  v1::DaemonStatus st;
  auto ctx = c.NewContext(true);
  KC_RETURN_IF_ERROR(c.Check(c.stub().GetStatus(ctx.get(), v1::GetStatusRequest(), &st)));
  if (o.structured()) {
    Emit(o, st);
    return absl::OkStatus();
  }
  // Nothing to name: -q is a liveness check (`kerncapctl status -q && ...`).
  if (o.ids_only()) return absl::OkStatus();
  const v1::StoreStats& s = st.store();
  absl::Duration up = absl::Now() - absl::FromUnixMillis(st.started_unix_ms());
  o.out << "kerncapd " << st.version() << "  pid " << st.pid() << " on " << st.hostname() << ", up "
        << absl::FormatDuration(absl::Trunc(up, absl::Seconds(1))) << "\n";
  Table t({"", ""});
  t.AddRow({"control socket", Or(st.unix_socket())});
  t.AddRow({"tcp listen", Or(st.tcp_listen())});
  t.AddRow({"agent socket", Or(st.agent_socket())});
  t.AddRow({"store", s.path()});
  t.AddRow({"captures", absl::StrCat(s.captures())});
  t.AddRow({"unique chunks",
            absl::StrCat(s.unique_chunks(), " (", HumanBytes(s.chunk_size()), " each)")});
  t.AddRow({"logical size", HumanBytes(s.logical_bytes())});
  t.AddRow({"raw unique", HumanBytes(s.raw_bytes())});
  t.AddRow({"stored",
            absl::StrCat(HumanBytes(s.stored_bytes()), " in ", s.pack_files(), " pack files")});
  if (s.stored_bytes() > 0) {
    t.AddRow(
        {"saved", absl::StrCat(absl::StrFormat("%.2fx", static_cast<double>(s.logical_bytes()) /
                                                            static_cast<double>(s.stored_bytes())),
                               " (logical / stored)")});
  }
  t.AddRow({"agents", absl::StrCat(st.agents())});
  t.AddRow({"active arms", absl::StrCat(st.active_arms())});
  t.AddRow({"ingests in flight", absl::StrCat(st.ingests_in_flight())});
  // The header row of a two-column key/value table is empty: skip it.
  std::ostringstream tmp;
  t.Print(tmp);
  std::string text = tmp.str();
  o.out << text.substr(text.find('\n') + 1);
  return absl::OkStatus();
}

absl::Status CmdAgents(Connection& c, Output o) {
  v1::ListAgentsResponse resp;
  auto ctx = c.NewContext(true);
  KC_RETURN_IF_ERROR(c.Check(c.stub().ListAgents(ctx.get(), v1::ListAgentsRequest(), &resp)));
  KC_RETURN_IF_ERROR(SortBy(o, resp.mutable_agents()));
  if (o.structured()) {
    Emit(o, resp);
    return absl::OkStatus();
  }
  if (o.ids_only()) {
    std::vector<std::string> ids;
    for (const v1::AgentInfo& a : resp.agents()) ids.push_back(a.agent_id());
    Ids(o, "agent", ids);
    return absl::OkStatus();
  }
  if (resp.agents().empty()) {
    o.out << "no agents connected (start an application with the kerncap agent loaded)\n";
    return absl::OkStatus();
  }
  std::vector<std::string> header = {"AGENT", "PID",  "PROCESS",   "HOST",
                                     "PLATFORM", "DEVICES", "CONNECTED", "CAPTURES"};
  if (o.wide()) header.push_back("RANK");
  Table t(header);
  t.AlignRight(1);
  t.AlignRight(7);
  for (const v1::AgentInfo& a : resp.agents()) {
    std::vector<std::string> devs;
    for (const auto& d : a.devices()) devs.push_back(absl::StrCat(d.ordinal(), ":", d.name()));
    std::vector<std::string> row = {a.agent_id(), absl::StrCat(a.process().pid()),
                                    Or(a.process().process_name()), Or(a.process().hostname()),
                                    Name(a.platform()),
                                    devs.empty() ? "-" : absl::StrJoin(devs, ","),
                                    FormatTime(a.connected_unix_ms()), absl::StrCat(a.captures())};
    if (o.wide()) {
      // rank/world_size (source), as the agent read it from its launcher.
      row.push_back(a.rank() < 0 ? "-"
                                 : absl::StrCat(a.rank(), "/", a.world_size(), " (",
                                                a.rank_source(), ")"));
    }
    t.AddRow(std::move(row));
  }
  t.Print(o);
  return absl::OkStatus();
}

namespace {

// The kernel census of the agents `request` names, or the RPC's failure.
absl::StatusOr<v1::ListKernelsResponse> FetchKernels(Connection& c,
                                                     const v1::ListKernelsRequest& request) {
  v1::ListKernelsResponse resp;
  auto ctx = c.NewContext(request.sample_ms() == 0);
  if (request.sample_ms() > 0 && c.timeout_s() > 0) {
    // The daemon holds the call for the sample, then takes the census.
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(request.sample_ms()) +
                      std::chrono::milliseconds(static_cast<int64_t>(c.timeout_s() * 1000)));
  }
  KC_RETURN_IF_ERROR(c.Check(c.stub().ListKernels(ctx.get(), request, &resp)));
  return resp;
}

// "grid 64x1x1 block 256x1x1 smem 0" (and the cluster when there is one).
std::string ConfigText(const v1::LaunchConfigCount& c) {
  auto dims = [](const google::protobuf::RepeatedField<uint32_t>& v) {
    return absl::StrJoin(v, "x");
  };
  std::string out = absl::StrCat("grid ", dims(c.grid()), " block ", dims(c.block()), " smem ",
                                 c.shared_mem_bytes());
  bool cluster = false;
  for (uint32_t v : c.cluster()) cluster = cluster || v != 0;
  if (cluster) absl::StrAppend(&out, " cluster ", dims(c.cluster()));
  return out;
}

// The matcher an arm with this selector would use (the agents' own selector
// code, so the census filter and the preview agree with captures).
absl::StatusOr<link::NameMatcher> CompileMatcher(const link::Selector& sel) {
  link::LinkResult<link::NameMatcher> m = link::NameMatcher::Compile(sel.kernel, sel.match);
  if (!m.ok()) return absl::InvalidArgumentError("--kernel: " + m.error());
  return std::move(m).value();
}

// The name people read: demangled, or the mangled one when there is none.
const std::string& KernelName(const v1::LoadedKernel& k) {
  return k.demangled_name().empty() ? k.mangled_name() : k.demangled_name();
}

bool KernelMatches(link::NameMatcher& m, const v1::LoadedKernel& k) {
  return m.Matches(KernelName(k), k.mangled_name());
}

}  // namespace

absl::Status CmdKernels(Connection& c, Output o, const KernelsOptions& opts) {
  v1::ListKernelsRequest req;
  req.set_pid(opts.pid);
  req.set_process_name(opts.process);
  req.set_agent_id(opts.agent);
  const bool sampling = !opts.sample.empty();
  if (sampling) {
    absl::StatusOr<absl::Duration> d = ParseDuration(opts.sample);
    if (!d.ok()) return absl::InvalidArgumentError("--sample: " + std::string(d.status().message()));
    if (*d < absl::Milliseconds(1) || *d > absl::Milliseconds(service::kMaxKernelSampleMs)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--sample: ", opts.sample, " is outside 1ms..", service::kMaxKernelSampleMs / 1000,
          "s"));
    }
    req.set_sample_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(*d)));
    if (!o.structured() && !o.ids_only()) {
      std::cerr << "sampling launches for " << absl::FormatDuration(*d) << "...\n";
    }
  }
  KC_ASSIGN_OR_RETURN(v1::ListKernelsResponse resp, FetchKernels(c, req));
  if (sampling) {
    // The most launched first (the census order otherwise).
    for (v1::AgentKernels& a : *resp.mutable_agents()) {
      std::stable_sort(a.mutable_kernels()->begin(), a.mutable_kernels()->end(),
                       [](const v1::LoadedKernel& x, const v1::LoadedKernel& y) {
                         return x.launches() > y.launches();
                       });
    }
  }
  if (!opts.kernel.empty()) {
    SelectorFlags flags;
    flags.kernel = opts.kernel;
    flags.match = opts.match;
    KC_ASSIGN_OR_RETURN(v1::Selector s, SelectorFromFlags(flags));
    KC_ASSIGN_OR_RETURN(link::NameMatcher m, CompileMatcher(link::SelectorFromProto(s, 0)));
    for (v1::AgentKernels& a : *resp.mutable_agents()) {
      auto* ks = a.mutable_kernels();
      ks->erase(std::remove_if(ks->begin(), ks->end(),
                               [&](const v1::LoadedKernel& k) { return !KernelMatches(m, k); }),
                ks->end());
    }
  }
  if (o.structured()) {
    Emit(o, resp);
    return absl::OkStatus();
  }
  if (o.ids_only()) {
    std::vector<std::string> names;
    for (const v1::AgentKernels& a : resp.agents()) {
      for (const v1::LoadedKernel& k : a.kernels()) names.push_back(k.mangled_name());
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    Ids(o, "kernel", names);
    return absl::OkStatus();
  }
  if (resp.agents().empty()) {
    o.out << "no agents connected"
          << (opts.pid != 0 || !opts.process.empty() || !opts.agent.empty() ? " that match" : "")
          << " (start an application with the kerncap agent loaded)\n";
    return absl::OkStatus();
  }
  std::vector<std::string> header = {"PID", "PROCESS", "KERNEL", "MODULE"};
  // While sampling: launches, distinct launch configurations and argument
  // shapes ("+": more than were told apart).
  if (sampling) header.insert(header.begin() + 3, {"LAUNCHES", "CONFIGS", "ARG SHAPES"});
  if (o.wide()) header.insert(header.end(), {"MANGLED", "AGENT"});
  if (o.wide() && sampling) header.push_back("MOST LAUNCHED CONFIG");
  Table t(header);
  t.AlignRight(0);
  if (sampling) {
    t.AlignRight(3);
    t.AlignRight(4);
    t.AlignRight(5);
  }
  for (const v1::AgentKernels& a : resp.agents()) {
    for (const v1::LoadedKernel& k : a.kernels()) {
      std::vector<std::string> row = {absl::StrCat(a.agent().process().pid()),
                                      Or(a.agent().process().process_name()),
                                      Or(KernelName(k)), Or(k.module())};
      if (sampling) {
        const bool counted = a.sampled();
        row.insert(row.begin() + 3,
                   {counted ? absl::StrCat(k.launches()) : "-",
                    counted ? absl::StrCat(k.launch_configs_size(),
                                           k.other_config_launches() > 0 ? "+" : "")
                            : "-",
                    counted ? absl::StrCat(k.argument_shapes(),
                                           k.argument_shapes_capped() ? "+" : "")
                            : "-"});
      }
      if (o.wide()) row.insert(row.end(), {k.mangled_name(), a.agent().agent_id()});
      if (o.wide() && sampling) {
        row.push_back(k.launch_configs().empty()
                          ? "-"
                          : absl::StrCat(ConfigText(k.launch_configs(0)), " (",
                                         k.launch_configs(0).launches(), ")"));
      }
      t.AddRow(std::move(row));
    }
  }
  if (t.rows() > 0) t.Print(o);
  for (const v1::AgentKernels& a : resp.agents()) {
    const std::string who = absl::StrCat("pid ", a.agent().process().pid(), " (",
                                         Or(a.agent().process().process_name()), ")");
    if (sampling && !a.sampled()) {
      o.out << "note: " << who << ": launches not counted: " << Or(a.sample_error()) << "\n";
    } else if (sampling) {
      uint64_t launches = a.unattributed_launches();
      for (const v1::LoadedKernel& k : a.kernels()) launches += k.launches();
      o.out << "note: " << who << ": " << launches << " launches in "
            << absl::StrFormat("%.1f", a.sample_seconds()) << " s";
      if (a.graph_launches() > 0) o.out << " (" << a.graph_launches() << " graph launches, their kernel nodes counted)";
      o.out << "\n";
      if (a.unattributed_launches() > 0) {
        o.out << "note: " << who << ": " << a.unattributed_launches()
              << " launches of kernels whose name could not be read\n";
      }
      if (a.sampled_kernels_left_out() > 0) {
        o.out << "note: " << who << ": " << a.sampled_kernels_left_out()
              << " launched kernels left out of the sample (past its bounds)\n";
      }
    }
    if (!a.error().empty()) {
      o.out << "note: " << who << ": no census: " << a.error() << "\n";
    } else if (a.kernels().empty()) {
      o.out << "note: " << who << ": no "
            << (opts.kernel.empty() ? "kernels loaded yet" : "loaded kernel matches")
            << " (CUDA loads a module when one of its kernels first runs)\n";
    }
    if (a.left_out() > 0) {
      o.out << "note: " << who << ": " << a.left_out()
            << " kernels left out (names over the link's bounds, or past "
            << resp.max_kernels_per_agent() << " per agent)\n";
    }
    if (!a.truncated().empty()) {
      o.out << "note: " << who << ": census truncated by kerncapd: " << a.truncated() << "\n";
    }
  }
  return absl::OkStatus();
}

namespace {

// After `kerncapctl arm`: what the selector matches among the kernels the
// live agents it applies to have loaded, with a warning when a pattern takes
// several distinct kernels (a short --kernel=x can select an unrelated one).
// Human output only; nothing when the daemon cannot give a census.
void PrintArmPreview(Connection& c, Output o, const v1::Selector& s) {
  v1::ListKernelsRequest req;
  req.set_pid(s.pid());
  req.set_process_name(s.process_name());
  absl::StatusOr<v1::ListKernelsResponse> resp = FetchKernels(c, req);
  if (!resp.ok()) return;
  // The census request narrows by pid and process name; the rest of the
  // process selection (the rank) is the agents' own check, applied here.
  const link::Selector sel = link::SelectorFromProto(s, 0);
  absl::StatusOr<link::NameMatcher> m = CompileMatcher(sel);
  if (!m.ok()) return;
  std::set<std::string> names;
  size_t agents_applying = 0;
  size_t agents_asked = 0;
  for (const v1::AgentKernels& a : resp->agents()) {
    const v1::ProcessIdentity& p = a.agent().process();
    if (!link::MatchesProcess(sel, p.pid(), p.process_name(), a.agent().rank())) continue;
    ++agents_applying;
    if (!a.error().empty()) continue;
    ++agents_asked;
    for (const v1::LoadedKernel& k : a.kernels()) {
      if (KernelMatches(*m, k)) names.insert(KernelName(k));
    }
  }
  if (agents_applying == 0) {
    o.out << "  no live agent it applies to yet (it waits for one)\n";
    return;
  }
  if (agents_asked == 0) return;  // none gave a census: nothing to preview
  if (names.empty()) {
    o.out << "  no kernel loaded by the " << agents_asked
          << " agent(s) it applies to matches yet (see `kerncapctl kernels`)\n";
    return;
  }
  constexpr size_t kShown = 5;
  o.out << "  matches " << names.size() << " distinct loaded kernel"
        << (names.size() == 1 ? "" : "s") << ":";
  size_t shown = 0;
  for (const std::string& n : names) {
    if (shown++ == kShown) break;
    o.out << "\n    " << (n.size() > 120 ? n.substr(0, 117) + "..." : n);
  }
  if (names.size() > kShown) o.out << "\n    ... and " << names.size() - kShown << " more";
  o.out << "\n";
  if (names.size() > 1) {
    o.out << "warning: the pattern matches " << names.size()
          << " distinct kernels; the arm takes whichever runs first (use a longer pattern, "
             "--match=regex with anchors, or --match=mangled)\n";
  }
}

}  // namespace

absl::Status CmdArm(Connection& c, Output o, const ArmOptions& opts) {
  v1::ArmRequest req;
  KC_ASSIGN_OR_RETURN(
      *req.mutable_selector(),
      SelectorFromFlags({opts.kernel, opts.match, opts.pid, opts.process, opts.device, opts.rank}));
  v1::Selector* s = req.mutable_selector();
  s->set_skip(opts.skip);
  s->set_nth(opts.nth);
  s->set_count(opts.count);
  if (!opts.per_shape.empty()) {
    std::optional<v1::PerShape> mode = api::Parse<v1::PerShape>(opts.per_shape);
    if (!mode || *mode == v1::PER_SHAPE_OFF) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--per-shape: expected scalars (launch configuration and scalar arguments, the "
          "default) or launch (launch configuration only); got \"",
          opts.per_shape, "\""));
    }
    s->set_per_shape(*mode);
    if (!opts.count_given) s->set_count(0);  // kerncapd's per-shape default
  }
  if (!opts.ttl.empty()) {
    KC_ASSIGN_OR_RETURN(absl::Duration ttl, ParseDuration(opts.ttl));
    req.set_ttl_ms(static_cast<uint64_t>(absl::ToInt64Milliseconds(ttl)));
  }
  for (const std::string& tag : opts.tags) {
    KC_ASSIGN_OR_RETURN(auto kv, ParseTag(tag));
    (*req.mutable_tags())[kv.first] = kv.second;
  }
  v1::ArmInfo info;
  auto ctx = c.NewContext(true);
  KC_RETURN_IF_ERROR(c.Check(c.stub().Arm(ctx.get(), req, &info)));
  if (o.structured()) {
    Emit(o, info);
    return absl::OkStatus();
  }
  if (o.ids_only()) {
    Ids(o, "arm", {info.arm_id()});
    return absl::OkStatus();
  }
  o.out << "armed " << info.arm_id() << ": " << SelectorText(info.selector()) << ", count "
        << std::max<uint32_t>(1, info.selector().count());
  if (info.selector().per_shape() != v1::PER_SHAPE_OFF) o.out << " (at most one per shape)";
  if (info.expires_unix_ms() != 0) o.out << ", expires " << FormatTime(info.expires_unix_ms());
  o.out << "\n";
  PrintArmPreview(c, o, info.selector());
  return absl::OkStatus();
}

absl::Status CmdDisarm(Connection& c, Output o, const std::string& arm_id, bool all) {
  v1::DisarmRequest req;
  req.set_arm_id(arm_id);
  req.set_all(all);
  v1::DisarmResponse resp;
  auto ctx = c.NewContext(true);
  KC_RETURN_IF_ERROR(c.Check(c.stub().Disarm(ctx.get(), req, &resp)));
  if (o.structured()) {
    Emit(o, resp);
    return absl::OkStatus();
  }
  if (o.ids_only()) {
    std::vector<std::string> ids;
    for (const auto& a : resp.disarmed()) ids.push_back(a.arm_id());
    Ids(o, "arm", ids);
    return absl::OkStatus();
  }
  if (resp.disarmed().empty()) o.out << "no active arms\n";
  for (const auto& a : resp.disarmed()) o.out << "disarmed " << a.arm_id() << "\n";
  return absl::OkStatus();
}

absl::Status CmdArms(Connection& c, Output o, bool all) {
  v1::ListArmsRequest req;
  req.set_include_finished(all);
  v1::ListArmsResponse resp;
  auto ctx = c.NewContext(true);
  KC_RETURN_IF_ERROR(c.Check(c.stub().ListArms(ctx.get(), req, &resp)));
  KC_RETURN_IF_ERROR(SortBy(o, resp.mutable_arms()));
  if (o.structured()) {
    Emit(o, resp);
    return absl::OkStatus();
  }
  if (o.ids_only()) {
    std::vector<std::string> ids;
    for (const v1::ArmInfo& a : resp.arms()) ids.push_back(a.arm_id());
    Ids(o, "arm", ids);
    return absl::OkStatus();
  }
  if (resp.arms().empty()) {
    o.out << (all ? "no arms\n" : "no active arms (--all shows finished ones)\n");
    return absl::OkStatus();
  }
  Table t({"ARM", "STATE", "SELECTOR", "CAPTURED", "SKIPPED", "CREATED", "EXPIRES", "TAGS",
           "CAPTURES"});
  t.AlignRight(3);
  t.AlignRight(4);
  for (const v1::ArmInfo& a : resp.arms()) {
    t.AddRow({a.arm_id(), Name(a.state()), SelectorText(a.selector()),
              absl::StrCat(a.captured(), "/", std::max<uint32_t>(1, a.selector().count())),
              absl::StrCat(a.skipped_count()), FormatTime(a.created_unix_ms()),
              FormatTime(a.expires_unix_ms()), Tags(a.tags()),
              a.capture_ids().empty() ? "-" : absl::StrJoin(a.capture_ids(), ",")});
  }
  t.Print(o);
  // Why selected dispatches were not captured: the user looks here when an
  // arm stays at 0 captures.
  for (const v1::ArmInfo& a : resp.arms()) {
    for (const v1::SkippedDispatch& sd : a.skipped()) {
      o.out << a.arm_id() << ": dispatch " << sd.dispatch_index() << " of " << sd.kernel()
            << " (pid " << sd.pid() << ") not captured"
            << (sd.retried() ? " (a later dispatch is taken)" : "") << ": " << sd.reason()
            << "\n";
    }
  }
  return absl::OkStatus();
}

absl::Status CmdCaptures(Connection& c, Output o, const CapturesOptions& opts) {
  v1::ListCapturesRequest req;
  req.set_kernel_contains(opts.kernel);
  req.set_pid(opts.pid);
  req.set_tag(opts.tag);
  req.set_limit(opts.limit);
  if (!opts.tag.empty() && opts.tag[0] == '=') {
    return absl::InvalidArgumentError(
        absl::StrCat("--tag \"", opts.tag, "\": expected KEY=VALUE, or KEY for any value"));
  }
  const absl::Time now = absl::Now();
  if (!opts.since.empty()) {
    KC_ASSIGN_OR_RETURN(absl::Time t, ParseTimePoint(opts.since, now, "--since"));
    req.set_since_unix_ms(absl::ToUnixMillis(t));
  }
  if (!opts.until.empty()) {
    KC_ASSIGN_OR_RETURN(absl::Time t, ParseTimePoint(opts.until, now, "--until"));
    req.set_until_unix_ms(absl::ToUnixMillis(t));
  }
  if (req.until_unix_ms() != 0 && req.since_unix_ms() >= req.until_unix_ms()) {
    return absl::InvalidArgumentError("--until must be later than --since");
  }
  v1::ListCapturesResponse resp;
  auto ctx = c.NewContext(true);
  KC_RETURN_IF_ERROR(c.Check(c.stub().ListCaptures(ctx.get(), req, &resp)));
  KC_RETURN_IF_ERROR(SortBy(o, resp.mutable_captures()));
  if (o.structured()) {
    Emit(o, resp);
    return absl::OkStatus();
  }
  if (o.ids_only()) {
    std::vector<std::string> ids;
    for (const v1::CaptureSummary& s : resp.captures()) ids.push_back(s.capture_id());
    Ids(o, "capture", ids);
    return absl::OkStatus();
  }
  if (resp.captures().empty()) {
    o.out << "no captures\n";
    return absl::OkStatus();
  }
  std::vector<std::string> header = {"CAPTURE", "CREATED", "KERNEL", "PID", "PROCESS", "DEVICE",
                                     "REGIONS", "LOGICAL", "NEW STORED", "SOURCE", "TAGS"};
  // -o wide: the whole kernel name, the platform and the host.
  if (o.wide()) {
    header.push_back("PLATFORM");
    header.push_back("HOST");
  }
  Table t(header);
  for (size_t col : {3, 6, 7, 8}) t.AlignRight(col);
  for (const v1::CaptureSummary& s : resp.captures()) {
    std::string kernel = s.kernel();
    if (!o.wide() && kernel.size() > 48) kernel = kernel.substr(0, 45) + "...";
    std::vector<std::string> row = {
        s.capture_id(), FormatTime(s.created_unix_ms()), Or(kernel),
        s.pid() == 0 ? "-" : absl::StrCat(s.pid()), Or(s.process_name()), Or(s.device()),
        absl::StrCat(s.regions()), HumanBytes(s.logical_bytes()),
        HumanBytes(s.new_stored_bytes()), Name(s.source()), Tags(s.tags())};
    if (o.wide()) {
      row.push_back(Name(s.platform()));
      row.push_back(Or(s.hostname()));
    }
    t.AddRow(std::move(row));
  }
  t.Print(o);
  return absl::OkStatus();
}

absl::Status CmdShow(Connection& c, Output o, const std::string& capture) {
  v1::GetCaptureRequest req;
  req.set_capture_id(capture);
  v1::CaptureDetail d;
  auto ctx = c.NewContext(true);
  KC_RETURN_IF_ERROR(c.Check(c.stub().GetCapture(ctx.get(), req, &d)));
  if (o.structured()) {
    Emit(o, d);
    return absl::OkStatus();
  }
  if (o.ids_only()) {  // the whole id of a prefix
    Ids(o, "capture", {d.manifest().capture_id()});
    return absl::OkStatus();
  }
  const v1::CaptureManifest& m = d.manifest();
  std::ostream& out = o.out;
  Table head({"", ""});
  head.AddRow({"capture", m.capture_id()});
  head.AddRow(
      {"created", absl::StrCat(FormatTime(m.created_unix_ms()), "  source ", Name(m.source()),
                               "  arm ", Or(m.arm_id()), "  dispatch #", m.dispatch_index(),
                               m.launch_shape().empty() ? "" : "  shape ",
                               m.launch_shape())});
  head.AddRow({"kernel", Or(m.kernel().demangled_name())});
  head.AddRow({"mangled", Or(m.kernel().mangled_name())});
  head.AddRow({"platform", absl::StrCat(Name(m.kernel().platform()), "  arch ",
                                        Or(m.kernel().arch()))});
  head.AddRow(
      {"process", absl::StrCat("pid ", m.process().pid(), "  ", Or(m.process().process_name()),
                               "  on ", Or(m.process().hostname()),
                               m.process().has_rank() ? absl::StrCat("  rank ", m.process().rank())
                                                      : std::string())});
  if (!m.process().cmdline().empty()) {
    head.AddRow({"cmdline", absl::StrJoin(m.process().cmdline(), " ")});
  }
  head.AddRow(
      {"device", absl::StrCat("#", m.device().ordinal(), " ", Or(m.device().name()), " (",
                              Or(m.device().arch()), ")  driver ", Or(m.driver().driver_version()),
                              "  runtime ", Or(m.driver().runtime_version()))});
  const v1::LaunchConfig& l = m.launch();
  head.AddRow({"launch",
               absl::StrCat("grid ", Dims(l.grid()), "  block ", Dims(l.block()), "  shared ",
                            HumanBytes(l.shared_mem_bytes()), "  private ",
                            HumanBytes(l.private_mem_bytes()), "  cluster ", Dims(l.cluster()),
                            l.cooperative() ? "  cooperative" : "", "  stream ", Hex(l.stream()))});
  if (m.has_graph()) {
    const v1::GraphOrigin& g = m.graph();
    head.AddRow({"graph", absl::StrCat("node ", g.node_path(), " (", g.node_index() + 1, " of ",
                                       g.node_count(), " in order) of exec ", Hex(g.graph_exec()),
                                       " (#", g.exec_serial(), ", graph ", Hex(g.graph()),
                                       "), launch ", g.graph_launch())});
  }
  head.AddRow({"tags", Tags(m.tags())});
  std::ostringstream tmp;
  head.Print(tmp);
  out << tmp.str().substr(tmp.str().find('\n') + 1);

  out << "\narguments (" << m.arguments_size() << ", blob " << HumanBytes(m.argument_blob().size())
      << ")\n";
  if (m.arguments_size() > 0) {
    Table args({"  OFFSET", "SIZE", "KIND", "NAME", "TYPE", "VALUE"});
    args.AlignRight(0);
    args.AlignRight(1);
    for (const v1::Argument& a : m.arguments()) {
      std::string kind = Name(a.kind());
      args.AddRow({absl::StrCat(a.offset()), absl::StrCat(a.size()), kind, Or(a.name()),
                   Or(a.type_name().empty() ? a.value_kind() : a.type_name()),
                   ArgValue(a, m.argument_blob())});
    }
    args.Print(out);
  }
  if (m.texture_objects_size() > 0) {
    // Handles the replay recreates from these descriptors.
    out << "\ntexture/surface objects (" << m.texture_objects_size()
        << ", recreated at replay)\n";
    for (const v1::TextureObject& t : m.texture_objects()) {
      const v1::TextureResource& r = t.resource();
      out << "  " << Name(t.type()) << " "
          << Hex(t.handle()) << " at argument offset(s) "
          << absl::StrJoin(t.argument_offsets(), ",") << ": "
          << (r.type() == v1::TextureResource::RESOURCE_PITCH2D
                  ? absl::StrCat("pitch2d ", r.width(), "x", r.height(), " pitch ", r.pitch_bytes())
                  : absl::StrCat("linear ", r.size_bytes(), " bytes"))
          << " at " << Hex(r.device_ptr()) << ", format " << Hex(r.format()) << " x"
          << r.num_channels() << "\n";
    }
  }

  std::vector<const v1::Region*> pre;
  for (const auto& r : m.pre().regions()) pre.push_back(&r);
  std::sort(pre.begin(), pre.end(), [](auto* a, auto* b) { return a->va() < b->va(); });
  uint64_t pre_bytes = 0;
  for (auto* r : pre) pre_bytes += r->data().size();
  out << "\nmemory map, pre-dispatch (" << pre.size() << " regions, " << HumanBytes(pre_bytes)
      << ")\n";
  if (!pre.empty()) {
    Table map({"  VA START", "VA END", "KIND", "DEV", "SIZE", "ZERO", "NAME"});
    map.AlignRight(4);
    map.AlignRight(5);
    for (auto* r : pre) {
      map.AddRow({"  " + Hex(r->va()), Hex(r->va() + r->data().size()), Name(r->kind()),
                  absl::StrCat(r->device()), HumanBytes(r->data().size()),
                  Percent(service::ZeroBytes(*r), r->data().size()), Or(r->name())});
    }
    map.Print(out);
  }
  std::vector<const v1::Region*> post;
  for (const auto& r : m.post().regions()) post.push_back(&r);
  std::sort(post.begin(), post.end(), [](auto* a, auto* b) { return a->va() < b->va(); });
  out << "\npost-dispatch (" << (m.post_complete() ? "complete" : "not taken or partial") << ", "
      << post.size() << " regions)\n";
  if (!post.empty()) {
    Table map({"  VA START", "KIND", "SIZE", "CHANGED CHUNKS", "NAME"});
    map.AlignRight(2);
    for (auto* r : post) {
      const uint32_t cs = r->data().chunk_size();
      const uint64_t n = cs == 0 ? 0 : (r->data().size() + cs - 1) / cs;
      std::string changed =
          r->diff() ? absl::StrCat(r->changed_chunks_size(), " of ", n) : absl::StrCat("all ", n);
      map.AddRow({"  " + Hex(r->va()), Name(r->kind()), HumanBytes(r->data().size()),
                  changed, Or(r->name())});
    }
    map.Print(out);
  }
  if (m.code_objects_size() > 0) {
    out << "\ncode objects\n";
    Table co({"  NAME", "FORMAT", "SIZE", "DIGEST"});
    co.AlignRight(2);
    for (const auto& obj : m.code_objects()) {
      auto dg = Digest::FromBytes(obj.digest());
      co.AddRow({"  " + Or(obj.name()), Name(obj.format()),
                 HumanBytes(obj.data().size()), dg.ok() ? dg->ToHex().substr(0, 16) : "-"});
    }
    co.Print(out);
  }
  if (m.has_agent_timing() && !m.agent_timing().path().empty()) {
    // How the agent read the memory (the agent's own figures, except
    // known_bytes, which kerncapd counted).
    const v1::CaptureTiming& t = m.agent_timing();
    out << "\nmemory read\n";
    Table rd({"", "", ""});
    rd.AlignRight(1);
    rd.AddRow({"  path", t.path(), Or(t.path_reason())});
    rd.AddRow({"  held", absl::StrFormat("%.3f s", t.held_seconds()),
               absl::StrFormat("the application's pause (pre %.3f s, post %.3f s)",
                               t.pre_seconds(), t.post_seconds())});
    if (t.drain_seconds() > 0) {
      rd.AddRow({"  drain", absl::StrFormat("%.3f s", t.drain_seconds()),
                 "device snapshot -> kerncapd after the release"});
    }
    rd.AddRow({"  over PCIe", HumanBytes(t.pcie_bytes()), "device -> host"});
    rd.AddRow({"  unchanged post", HumanBytes(t.unchanged_post_bytes()),
               "taken from the pre image, not sent again"});
    if (t.known_bytes() > 0 || t.fingerprint_seconds() > 0) {
      rd.AddRow({"  by fingerprint", HumanBytes(t.known_bytes()),
                 absl::StrFormat("zero or held from earlier captures, not sent (fingerprints %.3f s)",
                                 t.fingerprint_seconds())});
    }
    std::ostringstream tmp;
    rd.Print(tmp);
    out << tmp.str().substr(tmp.str().find('\n') + 1);
  }
  const v1::CaptureStats& s = m.stats();
  out << "\nsizes\n";
  Table sz({"", "", ""});
  sz.AlignRight(1);
  sz.AddRow({"  logical", HumanBytes(s.logical_bytes()), "pre + post diff"});
  sz.AddRow({"  zero", HumanBytes(s.zero_bytes()),
             absl::StrCat(Percent(s.zero_bytes(), s.logical_bytes()), " never stored")});
  sz.AddRow({"  dedup", HumanBytes(s.dedup_bytes()),
             absl::StrCat(Percent(s.dedup_bytes(), s.logical_bytes()), " already in the store")});
  sz.AddRow({"  new raw", HumanBytes(s.new_raw_bytes()), "chunks this capture added"});
  sz.AddRow({"  new stored", HumanBytes(s.new_stored_bytes()),
             s.new_stored_bytes() == 0
                 ? std::string("after zstd")
                 : absl::StrFormat("after zstd (%.2fx compression)",
                                   static_cast<double>(s.new_raw_bytes()) /
                                       static_cast<double>(s.new_stored_bytes()))});
  sz.AddRow({"  chunks", absl::StrCat(s.chunk_count()),
             absl::StrFormat("ingest %.2f s", s.ingest_seconds())});
  sz.AddRow({"  footprint",
             d.exclusive_pending() ? std::string("?") : HumanBytes(d.exclusive_raw_bytes()),
             d.exclusive_pending()
                 ? std::string("not known yet: kerncapd is still counting references")
                 : std::string("raw bytes only this capture references (freed by rm + gc)")});
  sz.AddRow({"  stored", HumanBytes(d.stored_bytes()), "stored size of all its chunks"});
  std::ostringstream tmp2;
  sz.Print(tmp2);
  out << tmp2.str().substr(tmp2.str().find('\n') + 1);
  return absl::OkStatus();
}

absl::Status CmdRm(Connection& c, Output o, const std::vector<std::string>& captures) {
  // Every id is tried; the first failure is the command's result, and the
  // others are said on stderr as they happen.
  absl::Status first = absl::OkStatus();
  nlohmann::json deleted = nlohmann::json::array();
  nlohmann::json failed = nlohmann::json::array();
  std::vector<std::string> ids;
  for (const std::string& capture : captures) {
    v1::DeleteCaptureRequest req;
    req.set_capture_id(capture);
    v1::DeleteCaptureResponse resp;
    auto ctx = c.NewContext(true);
    absl::Status st = c.Check(c.stub().DeleteCapture(ctx.get(), req, &resp));
    if (!st.ok()) {
      if (first.ok()) first = st;
      failed.push_back({{"capture_id", capture},
                        {"code", exit_code::ExitCodeName(exit_code::ForStatus(st))},
                        {"message", std::string(st.message())}});
      if (!o.structured() && captures.size() > 1) {
        std::cerr << "kerncapctl: rm " << capture << ": " << st.message() << "\n";
      }
      continue;
    }
    deleted.push_back(resp.capture_id());
    ids.push_back(resp.capture_id());
    if (!o.structured() && !o.ids_only()) o.out << "deleted " << resp.capture_id() << "\n";
  }
  if (o.structured()) {
    Emit(o, nlohmann::json{{"deleted", deleted}, {"failed", failed}});
  } else if (o.ids_only()) {
    Ids(o, "capture", ids);
  } else if (!ids.empty()) {
    o.out << "run `kerncapctl gc` to reclaim their space\n";
  }
  return first;
}

absl::Status CmdGc(Connection& c, Output o, bool dry_run) {
  v1::RunGcRequest req;
  req.set_dry_run(dry_run);
  v1::GcReport r;
  auto ctx = c.NewContext(false);  // GC of a large store can take a while
  KC_RETURN_IF_ERROR(c.Check(c.stub().RunGc(ctx.get(), req, &r)));
  if (o.structured()) {
    Emit(o, r);
    return absl::OkStatus();
  }
  if (o.ids_only()) return absl::OkStatus();  // nothing to name
  o.out << (r.dry_run() ? "gc (dry run): would reclaim " : "gc: reclaimed ")
        << HumanBytes(r.reclaimed_bytes()) << "\n";
  Table t({"", ""});
  t.AlignRight(1);
  t.AddRow({"  live chunks", absl::StrCat(r.live_chunks())});
  t.AddRow({"  dead chunks", absl::StrCat(r.dead_chunks())});
  t.AddRow({"  packs deleted", absl::StrCat(r.packs_deleted())});
  t.AddRow({"  packs rewritten", absl::StrCat(r.packs_rewritten())});
  t.AddRow({"  seconds", absl::StrFormat("%.2f", r.seconds())});
  std::ostringstream tmp;
  t.Print(tmp);
  o.out << tmp.str().substr(tmp.str().find('\n') + 1);
  return absl::OkStatus();
}

absl::Status CmdVerify(Connection& c, Output o, const std::string& capture, bool rehash) {
  v1::VerifyStoreRequest req;
  req.set_capture_id(capture);
  req.set_rehash(rehash);
  auto ctx = c.NewContext(false);
  auto reader = c.stub().VerifyStore(ctx.get(), req);
  ProgressBar bar("verify", 0, /*bytes=*/false);
  v1::VerifyProgress p;
  uint64_t checked = 0;
  uint64_t total = 0;
  std::vector<v1::VerifyProblem> problems;
  while (reader->Read(&p)) {
    checked = p.chunks_checked();
    total = p.chunks_total();
    bar.SetTotal(total);
    bar.Update(checked);
    for (const auto& pr : p.problems()) problems.push_back(pr);
  }
  KC_RETURN_IF_ERROR(c.Check(reader->Finish()));
  bar.Finish();
  if (o.structured()) {
    nlohmann::json j = {{"chunks_checked", checked},
                        {"chunks_total", total},
                        {"problems", nlohmann::json::array()}};
    for (const auto& pr : problems) j["problems"].push_back(api::ToJson(pr));
    Emit(o, j);
  } else if (o.ids_only()) {
    // The captures with problems (none: nothing printed; the exit code says).
    std::vector<std::string> ids;
    for (const auto& pr : problems) {
      if (!pr.capture_id().empty() &&
          std::find(ids.begin(), ids.end(), pr.capture_id()) == ids.end()) {
        ids.push_back(pr.capture_id());
      }
    }
    Ids(o, "capture", ids);
  } else {
    o.out << "verified " << checked << " chunks" << (rehash ? " (rehashed)" : "") << ": "
          << (problems.empty() ? "no problems" : absl::StrCat(problems.size(), " problems"))
          << "\n";
    if (!problems.empty()) {
      Table t({"  CAPTURE", "CHUNK", "PACK", "PROBLEM"});
      for (const auto& pr : problems) {
        auto dg = Digest::FromBytes(pr.chunk_digest());
        t.AddRow({"  " + Or(pr.capture_id()), dg.ok() ? dg->ToHex().substr(0, 16) : "-",
                  Or(pr.pack()), pr.what()});
      }
      t.Print(o.out);
    }
  }
  if (!problems.empty()) {
    return absl::DataLossError(absl::StrCat("verify found ", problems.size(), " problems"));
  }
  return absl::OkStatus();
}

absl::Status CmdWatch(Connection& c, Output o) {
  auto ctx = c.NewContext(false);
  auto reader = c.stub().WatchEvents(ctx.get(), v1::WatchEventsRequest());
  v1::Event e;
  while (reader->Read(&e)) {
    if (o.structured()) {
      Emit(o, e);
      o.out.flush();  // one event per line, as it happens
      continue;
    }
    if (o.ids_only()) {  // the id each event is about
      std::string id;
      std::string kind;
      switch (e.kind_case()) {
        case v1::Event::kAgentJoined: kind = "agent"; id = e.agent_joined().agent_id(); break;
        case v1::Event::kAgentLeft: kind = "agent"; id = e.agent_left().agent_id(); break;
        case v1::Event::kCaptureCommitted:
          kind = "capture";
          id = e.capture_committed().capture_id();
          break;
        case v1::Event::kArmChanged: kind = "arm"; id = e.arm_changed().arm_id(); break;
        default: break;
      }
      if (!id.empty()) {
        Ids(o, kind, {id});
        o.out.flush();
      }
      continue;
    }
    std::string when = FormatTime(e.unix_ms());
    std::string line;
    switch (e.kind_case()) {
      case v1::Event::kAgentJoined:
        line = absl::StrCat("agent.joined     ", e.agent_joined().agent_id(), " pid ",
                            e.agent_joined().process().pid(), " ",
                            e.agent_joined().process().process_name());
        break;
      case v1::Event::kAgentLeft:
        line = absl::StrCat("agent.left       ", e.agent_left().agent_id(), " pid ",
                            e.agent_left().process().pid());
        break;
      case v1::Event::kCaptureStarted:
        line = absl::StrCat("capture.started  ", e.capture_started().capture_id(), " ",
                            e.capture_started().kernel(), " (",
                            HumanBytes(e.capture_started().total_bytes()), ")");
        break;
      case v1::Event::kCaptureProgress:
        line = absl::StrCat("capture.progress ", e.capture_progress().capture_id(), " ",
                            HumanBytes(e.capture_progress().done_bytes()), "/",
                            HumanBytes(e.capture_progress().total_bytes()));
        break;
      case v1::Event::kCaptureCommitted:
        line = absl::StrCat("capture.committed ", e.capture_committed().capture_id(), " ",
                            e.capture_committed().kernel(), " ",
                            HumanBytes(e.capture_committed().logical_bytes()));
        break;
      case v1::Event::kCaptureFailed:
        line = absl::StrCat("capture.failed   ", e.capture_failed().capture_id(), ": ",
                            e.capture_failed().reason());
        break;
      case v1::Event::kArmChanged:
        line = absl::StrCat("arm.changed      ", e.arm_changed().arm_id(), " ",
                            Name(e.arm_changed().state()), " captured ",
                            e.arm_changed().captured());
        break;
      default:
        line = "unknown event";
    }
    o.out << when << "  " << line << std::endl;
  }
  return c.Check(reader->Finish());
}

}  // namespace kerncap::ctl

namespace kerncap::ctl {

absl::Status CmdVersion(const ConnectionOptions& options, Output o) {
  nlohmann::json doc = {{"client", {{"version", ::kerncap::kVersion},
                                    {"api_version", api::kApiVersion}}}};
  // The daemon part is best effort: `version` answers even with no daemon,
  // and says why the daemon's versions are missing.
  ConnectionOptions quick = options;
  if (quick.timeout_s == 0 || quick.timeout_s > 5) quick.timeout_s = 5;
  absl::Status why = absl::OkStatus();
  v1::DaemonStatus st;
  auto conn = Connection::Open(quick);
  if (conn.ok()) {
    auto ctx = (*conn)->NewContext(true);
    why = (*conn)->Check((*conn)->stub().GetStatus(ctx.get(), v1::GetStatusRequest(), &st));
  } else {
    why = conn.status();
  }
  if (why.ok()) {
    doc["daemon"] = {{"version", st.version()},
                     {"api_version", st.api_version()},
                     {"store_format", st.store_format()},
                     {"where", (*conn)->where()}};
  } else {
    doc["daemon"] = nullptr;
    doc["daemon_error"] = std::string(why.message());
  }
  if (o.structured()) {
    Emit(o, doc);
    return absl::OkStatus();
  }
  if (o.ids_only()) return absl::OkStatus();  // nothing to name
  o.out << "client   kerncapctl " << ::kerncap::kVersion << " (API " << api::kApiVersion << ")\n";
  if (why.ok()) {
    o.out << "daemon   kerncapd " << st.version() << " (API "
          << (st.api_version().empty() ? "?" : st.api_version()) << ", store format "
          << st.store_format() << ") at " << (*conn)->where() << "\n";
    if (!st.api_version().empty() && st.api_version() != api::kApiVersion) {
      o.out << "warning: the daemon serves " << st.api_version() << ", this client speaks "
            << api::kApiVersion << "\n";
    }
  } else {
    o.out << "daemon   not reached: " << why.message() << "\n";
  }
  return absl::OkStatus();
}

}  // namespace kerncap::ctl
