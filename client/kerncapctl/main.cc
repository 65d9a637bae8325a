// kerncapctl: command-line client of kerncapd (see --help).
#include <unistd.h>

#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/kerncapctl/commands.h"
#include "client/kerncapctl/connection.h"
#include "client/kerncapctl/profile_command.h"
#include "client/kerncapctl/replay_commands.h"
#include "client/kerncapctl/repro_command.h"
#include "common/version.h"
#include "common/control/default_paths.h"
#include "nlohmann/json.hpp"

namespace kerncap::ctl {
namespace {

constexpr char kFooter[] = R"(
Examples:
  kerncapctl status                               daemon, store and agent summary
  kerncapctl arm --kernel=matmul --count=1        capture the next matmul dispatch
  kerncapctl arm --kernel='gemm_*' --match=glob --pid=4242 --ttl=10m --tag run=base
  kerncapctl captures --kernel=matmul --limit=20  list captures (newest first)
  kerncapctl show cap-7f3a                        details, memory map, sizes, dedup
  kerncapctl export cap-7f3a --out matmul.kcap    a portable single-file copy
  kerncapctl import matmul.kcap                   ...and back into any store
  kerncapctl import ./ref_capture_dir             a reference-Kerncap capture folder
  kerncapctl pull cap-7f3a --from node17:7443 --tls-ca ca.pem --token-file tok
  kerncapctl watch --json | jq .                  live events as JSON lines
  kerncapctl replay cap-7f3a                      restore and launch once on this machine's GPU
  kerncapctl validate cap-7f3a                    ...and compare with the captured outputs (exact)
  kerncapctl validate cap-7f3a --dtype=f32 --rtol=1e-5 --atol=1e-6 --json
  kerncapctl validate matmul.kcap --region-dtype=0x7f2a00000000:bf16 --ulp=2
  kerncapctl bench cap-7f3a --warmup=10 --iterations=200 --cold-l2 --json
  kerncapctl repro cap-7f3a --out ./matmul        reproducer project; then: make -C matmul help
  kerncapctl repro matmul.kcap --out ./matmul --source-dir=~/src/app   (no daemon needed)
  kerncapctl repro cap-91bc --out ./tmm           a Triton capture: then cd tmm && python3 run.py
  kerncapctl --host node17:7443 --tls-ca ca.pem status

Connection: --socket (default $KERNCAP_SOCKET, else $XDG_RUNTIME_DIR/kerncap/kerncapd.sock,
/tmp/kerncap-$UID/kerncapd.sock without XDG_RUNTIME_DIR, /run/kerncap/kerncapd.sock for root),
or --host HOST:PORT with TLS (--tls-ca; --tls-cert/--tls-key for mutual TLS; --token-file
for daemons started with --token-file; --insecure only for daemons with --insecure-tcp).

replay, validate and bench run kerncap-replay (found via $KERNCAP_REPLAY, next to kerncapctl,
or on PATH) on this machine's GPU with --daemon=unix:<the socket above> CAPTURE; with --host,
kerncapctl first exports the capture to a temporary .kcap; a CAPTURE that is an existing file
is replayed as is. Other flags are passed through (kerncap-replay MODE --help lists them) and
kerncapctl exits with kerncap-replay's code: 0 ok/pass, 1 validation failed, 2 usage,
3 replay error, 77 no CUDA driver or device.

Exit codes:
  0 ok   1 error   2 usage or invalid argument   3 not found
  4 daemon unavailable or not answering   5 data loss / verify found problems
  6 permission denied or authentication failed
)";

int Fail(const absl::Status& status, bool json) {
  int code = ExitCodeFor(status);
  if (json) {
    nlohmann::json j = {{"error",
                         {{"code", absl::StatusCodeToString(status.code())},
                          {"message", std::string(status.message())},
                          {"exit_code", code}}}};
    std::cerr << j.dump() << std::endl;
  } else {
    std::cerr << "kerncapctl: " << status.message() << std::endl;
  }
  return code;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "kerncapctl: control kerncapd — arm kernel captures, list and inspect them, "
      "move them between stores."};
  app.footer(kFooter);
  app.require_subcommand(1);
  app.fallthrough();
  app.allow_extras();  // for replay/validate/bench only; checked after parsing
  app.set_version_flag("--version", std::string("kerncapctl ") + ::kerncap::kVersion);

  service::PathEnv env = service::PathEnv::FromProcess();
  ConnectionOptions conn;
  conn.socket = service::DefaultClientSocketPath(env);
  bool json = false;
  app.add_option("--socket", conn.socket, "kerncapd Unix socket")->capture_default_str();
  app.add_option("--host", conn.host, "kerncapd TCP endpoint HOST:PORT (TLS)");
  app.add_option("--tls-ca", conn.tls_ca, "PEM CA bundle to verify the daemon (TCP)");
  app.add_option("--tls-cert", conn.tls_cert, "client certificate PEM (mutual TLS)");
  app.add_option("--tls-key", conn.tls_key, "client key PEM (mutual TLS)");
  app.add_option("--token-file", conn.token_file, "file holding the bearer token (TCP)");
  app.add_flag("--insecure", conn.insecure, "plaintext TCP (daemon started with --insecure-tcp)");
  app.add_flag("--json", json, "machine-readable JSON output (stable snake_case field names)");
  app.add_option("--timeout", conn.timeout_s, "seconds to wait for unary calls (0: forever)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);

  // The chosen command, run once the connection is open.
  std::function<absl::Status(Connection&, Output)> action;
  std::string from;  // pull's source

  app.add_subcommand("status", "daemon version, sockets, store size, agents, arms")->callback([&] {
    action = [](Connection& c, Output o) { return CmdStatus(c, o); };
  });
  app.add_subcommand("agents", "list connected agents (applications with the agent loaded)")
      ->callback([&] { action = [](Connection& c, Output o) { return CmdAgents(c, o); }; });

  auto arm_opts = std::make_shared<ArmOptions>();
  CLI::App* arm = app.add_subcommand("arm", "capture the next dispatch(es) of a kernel");
  arm->add_option("--kernel", arm_opts->kernel, "kernel name (matched per --match)")->required();
  arm->add_option("--match", arm_opts->match,
                  "substring | glob (fnmatch) | regex (RE2-style, no backreferences) | mangled")
      ->capture_default_str();
  arm->add_option("--pid", arm_opts->pid, "only this process");
  arm->add_option("--process", arm_opts->process, "only processes whose name contains this");
  arm->add_option("--device", arm_opts->device, "only this device ordinal")
      ->check(CLI::NonNegativeNumber);
  arm->add_option("--skip", arm_opts->skip,
                  "let this many matching dispatches (per process) pass first, then take --count");
  arm->add_option("--nth", arm_opts->nth,
                  "capture only the nth matching dispatch (1-based) of each process; not with "
                  "--skip. Dispatches an older arm takes are not counted by younger ones");
  arm->add_option("--count", arm_opts->count, "captures to take before the arm is done")
      ->capture_default_str();
  arm->add_option("--ttl", arm_opts->ttl, "expire after this long (30s, 5m, 2h, 1d)");
  arm->add_option("--tag", arm_opts->tags, "k=v tag copied to every capture (repeatable)");
  arm->callback(
      [&] { action = [arm_opts](Connection& c, Output o) { return CmdArm(c, o, *arm_opts); }; });

  auto disarm_id = std::make_shared<std::string>();
  auto disarm_all = std::make_shared<bool>(false);
  CLI::App* disarm = app.add_subcommand("disarm", "cancel an arm (or all of them)");
  disarm->add_option("ARM", *disarm_id, "arm id");
  disarm->add_flag("--all", *disarm_all, "disarm every active arm");
  disarm->callback([&] {
    if (disarm_id->empty() == !*disarm_all) {
      throw CLI::ValidationError("disarm", "give an ARM id or --all (not both)");
    }
    action = [disarm_id, disarm_all](Connection& c, Output o) {
      return CmdDisarm(c, o, *disarm_id, *disarm_all);
    };
  });

  auto arms_all = std::make_shared<bool>(false);
  CLI::App* arms = app.add_subcommand("arms", "list arms");
  arms->add_flag("--all", *arms_all, "include done, expired and disarmed arms");
  arms->callback(
      [&] { action = [arms_all](Connection& c, Output o) { return CmdArms(c, o, *arms_all); }; });

  auto cap_opts = std::make_shared<CapturesOptions>();
  CLI::App* caps = app.add_subcommand("captures", "list captures in the store");
  caps->add_option("--kernel", cap_opts->kernel, "kernel name contains");
  caps->add_option("--pid", cap_opts->pid, "captured from this process id");
  caps->add_option("--tag", cap_opts->tag, "has tag k=v");
  caps->add_option("--limit", cap_opts->limit, "at most this many (0: all)");
  caps->callback([&] {
    action = [cap_opts](Connection& c, Output o) { return CmdCaptures(c, o, *cap_opts); };
  });

  auto cap_id = std::make_shared<std::string>();
  CLI::App* show = app.add_subcommand(
      "show", "one capture: kernel, launch, arguments, memory map, sizes, dedup, footprint");
  show->add_option("CAPTURE", *cap_id, "capture id or unique prefix")->required();
  show->callback(
      [&] { action = [cap_id](Connection& c, Output o) { return CmdShow(c, o, *cap_id); }; });

  CLI::App* rm = app.add_subcommand("rm", "delete a capture (space is reclaimed by gc)");
  rm->add_option("CAPTURE", *cap_id, "capture id or unique prefix")->required();
  rm->callback(
      [&] { action = [cap_id](Connection& c, Output o) { return CmdRm(c, o, *cap_id); }; });

  auto gc_dry = std::make_shared<bool>(false);
  CLI::App* gc = app.add_subcommand("gc", "garbage-collect chunks no capture references");
  gc->add_flag("--dry-run", *gc_dry, "report only");
  gc->callback(
      [&] { action = [gc_dry](Connection& c, Output o) { return CmdGc(c, o, *gc_dry); }; });

  auto rehash = std::make_shared<bool>(false);
  CLI::App* verify = app.add_subcommand(
      "verify", "check stored chunks (one capture or the whole store); exit 5 on problems");
  verify->add_option("CAPTURE", *cap_id, "capture id (default: whole store)");
  verify->add_flag("--rehash", *rehash, "recompute SHA-256 of every chunk (slow, thorough)");
  verify->callback([&] {
    action = [cap_id, rehash](Connection& c, Output o) {
      return CmdVerify(c, o, *cap_id, *rehash);
    };
  });

  auto path = std::make_shared<std::string>();
  CLI::App* imp =
      app.add_subcommand("import", "import a .kcap file, or a reference-Kerncap capture folder");
  imp->add_option("PATH", *path, "FILE.kcap or capture folder")->required();
  imp->callback(
      [&] { action = [path](Connection& c, Output o) { return CmdImport(c, o, *path); }; });

  CLI::App* exp = app.add_subcommand("export", "write a capture to a portable .kcap file");
  exp->add_option("CAPTURE", *cap_id, "capture id or unique prefix")->required();
  exp->add_option("--out,-o", *path, "output FILE.kcap")->required();
  exp->callback([&] {
    action = [cap_id, path](Connection& c, Output o) { return CmdExport(c, o, *cap_id, *path); };
  });

  CLI::App* pull = app.add_subcommand(
      "pull", "copy a capture from another kerncapd, sending only chunks this one lacks");
  pull->add_option("CAPTURE", *cap_id, "capture id or unique prefix on the source")->required();
  pull->add_option("--from", from, "source kerncapd: HOST:PORT or unix:PATH")->required();
  pull->callback([&] {
    action = [&, cap_id](Connection& dest, Output o) -> absl::Status {
      auto source = Connection::Open(conn, from);
      if (!source.ok()) return source.status();
      return CmdPull(**source, dest, o, *cap_id);
    };
  });

  app.add_subcommand("watch", "stream daemon events until interrupted")->callback([&] {
    action = [](Connection& c, Output o) { return CmdWatch(c, o); };
  });

  auto repro_opts = std::make_shared<ReproOptions>();
  bool repro_local = false;  // CAPTURE is a .kcap file: no daemon needed
  CLI::App* repro = app.add_subcommand(
      "repro", "generate a self-contained reproducer project (sources, Makefile, capture)");
  repro->add_option("CAPTURE", repro_opts->capture, "capture id or unique prefix, or a .kcap file")
      ->required();
  repro->add_option("--out,-o", repro_opts->out_dir, "project folder to create (here)")
      ->required();
  repro->add_option("--source-dir", repro_opts->source_dir,
                    "where the application's sources are, when not at the paths the code "
                    "object records (on the daemon's host for a capture id)");
  repro->add_option("--compile-commands", repro_opts->compile_commands,
                    "compile_commands.json to take the kernel's compile command from");
  repro->add_flag("--force", repro_opts->force, "replace an earlier reproducer at --out");
  CLI::Option* repro_binary = repro->add_flag(
      "--binary", repro_opts->binary, "do not look for sources (run/validate/bench/asm only)");
  CLI::Option* repro_triton = repro->add_flag(
      "--triton", repro_opts->triton,
      "the Triton (Python) project; an error when the capture has no Triton metadata (the "
      "default already picks it when there is)");
  CLI::Option* repro_native = repro->add_flag(
      "--native", repro_opts->native, "the CUDA/HIP project even for a Triton capture");
  repro_triton->excludes(repro_binary)->excludes(repro_native);
  repro_native->excludes(repro_binary);
  repro->footer(
      "The project: kerncap.json (kernel, launch, arguments, compile command, provenance, "
      "source-finding outcome), capture.kcap, code/ (code object and disassembly), src/ (the "
      "kernel's translation unit and application headers) and a Makefile (make help). Every "
      "path in it is relative: the folder can be moved.\n"
      "A Triton capture (recorded with the kerncap Triton shim) gets a Python project instead: "
      "kernel.py (the kernel's source, editable), run.py (restores the capture through "
      "kerncap_replay.py, launches kernel.py with the captured configuration, checks the "
      "binary, validates per buffer; --bench, --config, --grid, --dry-run), a Makefile and "
      "README.md. run.py needs libkerncap_replay.so: KERNCAP_REPLAY_LIB=/path/to/it, or "
      "kerncap-replay's folder on PATH.");
  repro->callback([&] {
    repro_local = IsLocalCapture(repro_opts->capture);
    action = [repro_opts](Connection& c, Output o) { return CmdRepro(c, o, *repro_opts); };
  });

  // replay / validate / bench: kerncap-replay does the work (replay_commands.h).
  // Its flags are declared here too (for --help and exact parsing) and passed
  // through verbatim; anything else unrecognised is passed through as well.
  auto replay_req = std::make_shared<ReplayRequest>();
  enum class Pass { kFlag, kValue, kRepeated };
  struct PassThrough {
    std::string name;
    Pass kind = Pass::kFlag;
    bool set = false;                 // kFlag
    std::string value;                // kValue
    std::vector<std::string> values;  // kRepeated
    CLI::Option* option = nullptr;
  };
  auto add_replay = [&](const std::string& name, const std::string& mode,
                        const std::string& help) {
    CLI::App* sub = app.add_subcommand(name, help);
    auto pass = std::make_shared<std::vector<std::unique_ptr<PassThrough>>>();
    sub->add_option("CAPTURE", replay_req->capture, "capture id or unique prefix, or a .kcap file")
        ->required();
    sub->allow_extras();
    auto add = [&](const std::string& opt, Pass kind, const std::string& desc) {
      pass->push_back(std::make_unique<PassThrough>());
      PassThrough* p = pass->back().get();
      p->name = opt;
      p->kind = kind;
      if (kind == Pass::kFlag) {
        p->option = sub->add_flag(opt, p->set, desc);
      } else if (kind == Pass::kValue) {
        p->option = sub->add_option(opt, p->value, desc);
      } else {
        // One value per occurrence, so a value can never swallow CAPTURE.
        p->option = sub->add_option(opt, p->values, desc)
                        ->allow_extra_args(false)
                        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
      }
    };
    add("--json", Pass::kFlag, "one JSON document on stdout (kerncap-replay's)");
    add("--device", Pass::kValue, "GPU ordinal (default: the captured one)");
    add("--no-relocate", Pass::kFlag, "fail instead of relocating when an address cannot be had");
    add("--force-relocate", Pass::kFlag, "map everything at new addresses and patch pointers");
    if (mode == "validate") {
      add("--dtype", Pass::kValue, "element type of every region (f32, f16, bf16, f64, i32, ...)");
      add("--region-dtype", Pass::kRepeated, "SEL:DTYPE for one region (repeatable)");
      add("--atol", Pass::kValue, "absolute tolerance");
      add("--rtol", Pass::kValue, "relative tolerance");
      add("--ulp", Pass::kValue, "tolerance in units in the last place (floats)");
      add("--nan-unequal", Pass::kFlag, "a NaN never matches");
    }
    if (mode == "bench") {
      add("--warmup", Pass::kValue, "untimed launches first");
      add("--iterations", Pass::kValue, "timed launches");
      add("--cold-l2", Pass::kFlag, "flush L2 before each launch");
      add("--restore-each", Pass::kFlag, "restore written regions before each launch");
      add("--no-restore-each", Pass::kFlag, "never restore between launches");
      add("--samples", Pass::kFlag, "include every sample in the JSON");
    }
    sub->callback([&json, sub, mode, pass, replay_req] {
      replay_req->mode = mode;
      replay_req->flags.clear();
      bool has_json = false;
      for (const std::unique_ptr<PassThrough>& pt : *pass) {
        const PassThrough& p = *pt;
        if (p.option->count() == 0) continue;
        if (p.kind == Pass::kFlag) {
          if (p.name == "--json") has_json = true;
          replay_req->flags.push_back(p.name);
        } else if (p.kind == Pass::kValue) {
          replay_req->flags.push_back(p.name + "=" + p.value);
        } else {
          for (const std::string& v : p.values) replay_req->flags.push_back(p.name + "=" + v);
        }
      }
      if (json && !has_json) replay_req->flags.push_back("--json");
      for (const std::string& extra : sub->remaining()) replay_req->flags.push_back(extra);
    });
  };
  add_replay("replay", "run", "restore a capture on this machine's GPU and launch it once");
  add_replay("validate", "validate",
             "replay and compare with the captured outputs (tolerances: --dtype --atol --rtol "
             "--ulp)");
  add_replay("bench", "bench",
             "time the captured kernel (--warmup --iterations --cold-l2; --json for figures)");
  AddProfileCommand(&app, replay_req.get(), &json);  // profile_command.h

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  // Unrecognised arguments are kept (app.allow_extras) only for the replay
  // commands, which pass them through; everywhere else they are an error.
  std::vector<std::string> extras = app.remaining();
  if (!replay_req->mode.empty()) {
    replay_req->flags.insert(replay_req->flags.end(), extras.begin(), extras.end());
    auto rc = RunReplayCommand(*replay_req, conn);
    if (!rc.ok()) return Fail(rc.status(), json);
    return *rc;
  }
  if (!extras.empty()) {
    std::cerr << "The following argument" << (extras.size() > 1 ? "s were" : " was")
              << " not expected: " << absl::StrJoin(extras, " ")
              << "\nRun with --help for more information." << std::endl;
    return kExitUsage;
  }
  if (!action) return kExitUsage;
  if (repro_local) {
    absl::Status status = CmdReproLocal(Output{std::cout, json}, *repro_opts);
    std::cout.flush();
    return status.ok() ? kExitOk : Fail(status, json);
  }

  auto connection = Connection::Open(conn);
  if (!connection.ok()) return Fail(connection.status(), json);
  absl::Status status = action(**connection, Output{std::cout, json});
  std::cout.flush();
  if (!status.ok()) return Fail(status, json);
  return kExitOk;
}

}  // namespace
}  // namespace kerncap::ctl

int main(int argc, char** argv) { return kerncap::ctl::Main(argc, argv); }
