#include "client/kerncapctl/substitute_command.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/kerncapctl/args.h"
#include "client/kerncapctl/commands.h"
#include "client/kerncapctl/output.h"
#include "client/kerncapctl/replay_commands.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/status_macros.h"

extern char** environ;

namespace kerncap::ctl {
namespace {


// Runs `kerncap-replay validate --code-object=FILE CAPTURE` with its output
// on stderr (stdout stays the command's own, JSON included); what was
// checked, or why the variant may not go live.
absl::StatusOr<std::string> Preflight(const SubstituteOptions& opts,
                                      const ConnectionOptions& conn) {
  KC_ASSIGN_OR_RETURN(std::string binary, FindReplayBinary(ReplayLookupFromProcess()));
  std::string endpoint;
  if (!std::filesystem::is_regular_file(opts.preflight)) {
    if (!conn.host.empty()) {
      return absl::InvalidArgumentError(
          "with --host, --preflight takes a .kcap file (kerncapctl export CAPTURE --out F)");
    }
    endpoint = absl::StrCat("unix:", conn.socket);
  }
  ReplayRequest req;
  req.mode = "validate";
  req.capture = opts.preflight;
  req.flags = {"--code-object=" + opts.code_object};
  std::vector<std::string> argv = ReplayArgs(req, endpoint);
  argv.insert(argv.begin(), binary);
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("preflight: running ", binary, " failed: ", std::strerror(rc)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string what = absl::StrCat("kerncap-replay validate --code-object=", opts.code_object,
                                        " ", opts.preflight);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    return absl::StrCat(what, ": pass (the variant reproduced the capture's outputs)");
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const char* meaning = code == exit_code::kMismatch   ? "the variant's outputs differ from the capture's"
                        : code == exit_code::kNoDevice ? "no CUDA driver or device here to run it"
                        : code == exit_code::kRefused  ? "the replay refused to give a verdict"
                                                       : "the replay failed";
  // The command exits with the validation's own outcome (8 outputs differ,
  // 77 no device); any other failure means the variant was refused.
  const int exit = code == exit_code::kMismatch || code == exit_code::kNoDevice
                       ? code
                       : exit_code::kRefused;
  return exit_code::WithExitCode(
      absl::FailedPreconditionError(absl::StrCat(
          "preflight failed (", what, " exited ", code, ": ", meaning,
          "); nothing was substituted. Fix the variant, or pass --no-preflight to go live "
          "unchecked")),
      exit);
}

std::string Us(double v) { return absl::StrFormat("%.2f", v); }

void PrintInfo(Output o, const v1::SubstitutionInfo& info) {
  o.out << info.substitution_id() << ": " << SelectorText(info.selector()) << " <- "
        << info.name() << " (" << info.format() << ", " << HumanBytes(info.code_object_bytes())
        << ")" << (info.ab() ? ", A/B" : "")
        << (info.count() ? absl::StrCat(", count ", info.count()) : "")
        << (info.ttl_ms() ? absl::StrCat(", ttl ", info.ttl_ms(), " ms") : "") << ", "
        << (info.state() == v1::SUBSTITUTION_ENDED ? "ended" : "active") << "\n";
  o.out << "  preflight: " << (info.preflight().empty() ? "-" : info.preflight()) << "\n";
  for (const v1::SubstitutionAgentResult& a : info.agents()) {
    o.out << "  agent " << a.agent_id() << " (pid " << a.pid() << ", " << a.process_name()
          << "): " << a.state();
    if (!a.reason().empty()) o.out << ": " << a.reason();
    o.out << "\n";
    if (!a.kernel().empty()) o.out << "    kernel " << a.kernel() << "\n";
    for (const std::string& c : a.checks()) o.out << "    checked: " << c << "\n";
    o.out << "    dispatches: " << a.variant_launches() << " variant, " << a.original_launches()
          << " original";
    if (a.launch_rate_hz() > 0) o.out << absl::StrFormat(", %.1f/s", a.launch_rate_hz());
    o.out << "\n";
    if (info.ab()) {
      Table t({"SIDE", "SAMPLES", "MEAN_US", "STDDEV_US", "MIN_US", "MAX_US"});
      for (size_t i = 1; i < 6; ++i) t.AlignRight(i);
      auto row = [&](const char* side, const v1::DeviceTiming& d) {
        t.AddRow({side, absl::StrCat(d.samples()), Us(d.mean_us()), Us(d.stddev_us()),
                  Us(d.min_us()), Us(d.max_us())});
      };
      row("original", a.original());
      row("variant", a.variant());
      std::ostringstream table;
      t.Print(table);
      for (absl::string_view line : absl::StrSplit(table.str(), '\n')) {
        if (!line.empty()) o.out << "    " << line << "\n";
      }
      if (a.variant().samples() > 0 && a.original().samples() > 0 && a.original().mean_us() > 0) {
        o.out << absl::StrFormat("    variant/original device time: %.3f\n",
                                 a.variant().mean_us() / a.original().mean_us());
      }
      if (a.timing_failures() > 0) {
        o.out << "    " << a.timing_failures() << " dispatches could not be timed\n";
      }
    }
  }
}

absl::StatusOr<v1::SubstitutionInfo> Get(Connection& c, const std::string& id) {
  v1::ListSubstitutionsRequest req;
  req.set_substitution_id(id);
  req.set_include_finished(true);
  v1::ListSubstitutionsResponse resp;
  auto ctx = c.NewContext(true);
  KC_RETURN_IF_ERROR(c.Check(c.stub().ListSubstitutions(ctx.get(), req, &resp)));
  if (resp.substitutions().empty()) return absl::NotFoundError("no substitution " + id);
  return resp.substitutions(0);
}

// One substitution as the output mode asks: its document, its id, or the
// text. True for the text (the caller may add lines to it).
bool ShowSubstitution(Output o, const v1::SubstitutionInfo& info) {
  if (o.structured()) {
    Emit(o, info);
    return false;
  }
  if (o.ids_only()) {
    Ids(o, "substitution", {info.substitution_id()});
    return false;
  }
  PrintInfo(o, info);
  return true;
}

}  // namespace

absl::Status CmdSubstitute(Connection& c, Output o, const SubstituteOptions& opts,
                           const ConnectionOptions& conn) {
  KC_ASSIGN_OR_RETURN(std::string bytes, ReadFile(opts.code_object));
  std::string format = opts.format;
  if (format.empty()) {
    KC_ASSIGN_OR_RETURN(format, DetectCodeObjectFormat(bytes, opts.code_object));
  }
  v1::SubstituteRequest req;
  KC_ASSIGN_OR_RETURN(*req.mutable_selector(),
                      SelectorFromFlags({opts.kernel, opts.match, opts.pid, opts.process,
                                         opts.device, /*rank=*/-1}));
  if (!opts.ttl.empty()) {
    KC_ASSIGN_OR_RETURN(absl::Duration ttl, ParseDuration(opts.ttl));
    req.set_ttl_ms(static_cast<uint64_t>(absl::ToInt64Milliseconds(ttl)));
  }
  req.set_count(opts.count);
  req.set_ab(opts.ab);
  req.set_format(format);
  req.set_name(std::filesystem::path(opts.code_object).filename().string());
  if (opts.no_preflight) {
    req.set_preflight("none (--no-preflight): the variant was not validated before going live");
  } else {
    KC_ASSIGN_OR_RETURN(std::string checked, Preflight(opts, conn));
    req.set_preflight(checked);
  }
  *req.mutable_code_object() = std::move(bytes);
  v1::SubstitutionInfo info;
  {
    auto ctx = c.NewContext(true);
    KC_RETURN_IF_ERROR(c.Check(c.stub().Substitute(ctx.get(), req, &info)));
  }
  if (opts.wait) {
    if (!o.structured()) {
      std::cerr << "substituting as " << info.substitution_id()
                << "; waiting for it to end (kerncapctl unsubstitute " << info.substitution_id()
                << " ends it)\n";
    }
    while (info.state() != v1::SUBSTITUTION_ENDED) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      KC_ASSIGN_OR_RETURN(info, Get(c, info.substitution_id()));
    }
  }
  if (!ShowSubstitution(o, info)) return absl::OkStatus();
  // A wrong answer is worse than a refusal: say plainly when nothing ran.
  for (const auto& a : info.agents()) {
    if (a.state() == "refused") {
      o.out << "agent " << a.agent_id() << " refused the variant: nothing was substituted there\n";
    }
  }
  return absl::OkStatus();
}

absl::Status CmdUnsubstitute(Connection& c, Output o, const std::string& id) {
  v1::UnsubstituteRequest req;
  req.set_substitution_id(id);
  v1::SubstitutionInfo info;
  auto ctx = c.NewContext(true);
  KC_RETURN_IF_ERROR(c.Check(c.stub().Unsubstitute(ctx.get(), req, &info)));
  ShowSubstitution(o, info);
  return absl::OkStatus();
}

absl::Status CmdSubstitutions(Connection& c, Output o, const std::string& id, bool all) {
  v1::ListSubstitutionsRequest req;
  req.set_substitution_id(id);
  req.set_include_finished(all);
  v1::ListSubstitutionsResponse resp;
  auto ctx = c.NewContext(true);
  KC_RETURN_IF_ERROR(c.Check(c.stub().ListSubstitutions(ctx.get(), req, &resp)));
  KC_RETURN_IF_ERROR(SortBy(o, resp.mutable_substitutions()));
  if (o.structured()) {
    Emit(o, resp);
    return absl::OkStatus();
  }
  if (o.ids_only()) {
    std::vector<std::string> ids;
    for (const auto& info : resp.substitutions()) ids.push_back(info.substitution_id());
    Ids(o, "substitution", ids);
    return absl::OkStatus();
  }
  if (resp.substitutions().empty()) {
    o.out << (all ? "no substitutions\n" : "no active substitutions (--all shows ended ones)\n");
  }
  for (const auto& info : resp.substitutions()) PrintInfo(o, info);
  return absl::OkStatus();
}

absl::StatusOr<std::string> DetectCodeObjectFormat(const std::string& bytes,
                                                   const std::string& path) {
  if (bytes.size() >= 4 && bytes.compare(0, 4, "\x7f" "ELF") == 0) return std::string("cubin");
  // The fatbin wrapper's magic, 0xBA55ED50 little-endian.
  if (bytes.size() >= 4 && static_cast<unsigned char>(bytes[0]) == 0x50 &&
      static_cast<unsigned char>(bytes[1]) == 0xED && static_cast<unsigned char>(bytes[2]) == 0x55 &&
      static_cast<unsigned char>(bytes[3]) == 0xBA) {
    return std::string("fatbin");
  }
  if (bytes.find(".target") != std::string::npos && bytes.find(".version") != std::string::npos) {
    return std::string("ptx");
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, " is neither a cubin (ELF), a fatbin nor PTX text; give --format"));
}

}  // namespace kerncap::ctl
