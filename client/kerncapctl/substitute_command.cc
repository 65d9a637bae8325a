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

absl::Status CmdSubstitute(Connection& c, Output o, const SubstituteOptions& opts) {
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
    req.set_no_preflight(true);
  } else if (std::filesystem::is_regular_file(opts.preflight)) {
    // A .kcap: the daemon validates against captures it holds.
    KC_ASSIGN_OR_RETURN(std::string id, ImportKcap(c, opts.preflight));
    req.set_preflight_capture(id);
  } else {
    req.set_preflight_capture(opts.preflight);
  }
  req.set_all_processes(opts.all_processes);
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
