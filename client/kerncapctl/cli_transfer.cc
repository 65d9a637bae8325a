// Command group: moving captures and making reproducers (import, export,
// pull, repro).
#include <memory>
#include <string>

#include "client/kerncapctl/cli.h"
#include "client/kerncapctl/commands.h"
#include "client/kerncapctl/repro_command.h"
#include "common/exit_codes.h"

namespace kerncap::ctl {

void AddTransferCommands(Cli& cli) {
  auto path = std::make_shared<std::string>();
  CLI::App* imp =
      cli.app.add_subcommand("import", "import a .kcap file, or a reference-Kerncap capture folder");
  imp->add_option("PATH", *path, "FILE.kcap or capture folder")->required();
  SetCommandHelp(imp, Uses::kDaemon,
                 {"kerncapctl import matmul.kcap", "kerncapctl import ./ref_capture_dir -q"});
  imp->callback([&cli, path] {
    cli.remote = [path](Connection& c, Output o) { return CmdImport(c, o, *path); };
  });

  auto exp_id = std::make_shared<std::string>();
  auto exp_out = std::make_shared<std::string>();
  CLI::App* exp = cli.app.add_subcommand("export", "write a capture to a portable .kcap file");
  exp->add_option("CAPTURE", *exp_id, "capture id or unique prefix")->required();
  exp->add_option("--out", *exp_out, "output FILE.kcap")->required();
  SetCommandHelp(exp, Uses::kDaemon,
                 {"kerncapctl export cap-7f3a --out matmul.kcap",
                  "kerncapctl --context=node17 export cap-7f3a --out matmul.kcap"});
  exp->callback([&cli, exp_id, exp_out] {
    cli.remote = [exp_id, exp_out](Connection& c, Output o) {
      return CmdExport(c, o, *exp_id, *exp_out);
    };
  });

  auto pull_id = std::make_shared<std::string>();
  auto from = std::make_shared<std::string>();
  CLI::App* pull = cli.app.add_subcommand(
      "pull", "copy a capture from another kerncapd, sending only chunks this one lacks");
  pull->add_option("CAPTURE", *pull_id, "capture id or unique prefix on the source")->required();
  pull->add_option("--from", *from, "source kerncapd: HOST:PORT or unix:PATH")->required();
  SetCommandHelp(pull, Uses::kDaemon,
                 {"kerncapctl pull cap-7f3a --from node17:7443 --tls-ca ca.pem --token-file tok"},
                 "The TLS and token options apply to both daemons.");
  pull->callback([&cli, pull_id, from] {
    cli.remote = [&cli, pull_id, from](Connection& dest, Output o) -> absl::Status {
      auto source = Connection::Open(cli.g.conn, *from);
      if (!source.ok()) return source.status();
      return CmdPull(**source, dest, o, *pull_id);
    };
  });

  auto ro = std::make_shared<ReproOptions>();
  CLI::App* repro = cli.app.add_subcommand(
      "repro", "generate a self-contained reproducer project (sources, Makefile, capture)");
  repro->add_option("CAPTURE", ro->capture, "capture id or unique prefix, or a .kcap file")
      ->required();
  repro->add_option("--out", ro->out_dir, "project folder to create")->required();
  repro->add_option("--source-dir", ro->source_dir,
                    "where the application's sources are, when not at the paths the code "
                    "object records (on the daemon's host for a capture id)");
  repro->add_option("--compile-commands", ro->compile_commands,
                    "compile_commands.json to take the kernel's compile command from");
  repro->add_flag("--force", ro->force, "replace an earlier reproducer at --out");
  CLI::Option* binary = repro->add_flag(
      "--binary", ro->binary, "do not look for sources (run/validate/bench/asm only)");
  CLI::Option* triton = repro->add_flag(
      "--triton", ro->triton,
      "the Triton (Python) project; an error when the capture has no Triton metadata (the "
      "default already picks it when there is)");
  CLI::Option* native =
      repro->add_flag("--native", ro->native, "the CUDA/HIP project even for a Triton capture");
  triton->excludes(binary)->excludes(native);
  native->excludes(binary);
  SetCommandHelp(
      repro, Uses::kDaemon,
      {"kerncapctl repro cap-7f3a --out ./matmul        # then: make -C matmul help",
       "kerncapctl repro matmul.kcap --out ./matmul --source-dir=~/src/app   # no daemon needed",
       "kerncapctl repro cap-91bc --out ./tmm           # Triton: cd tmm && python3 run.py"},
      "The project: kerncap.json (kernel, launch, arguments, compile command, provenance, "
      "source-finding outcome), capture.kcap, code/ (code object and disassembly), src/ (the "
      "kernel's translation unit and application headers) and a Makefile (make help). Every "
      "path in it is relative: the folder can be moved.\n"
      "A Triton capture (recorded with the kerncap Triton shim) gets a Python project instead: "
      "kernel.py (editable), run.py (restores the capture through kerncap_replay.py, launches "
      "kernel.py with the captured configuration, validates per buffer; --bench, --config, "
      "--grid, --dry-run), a Makefile and README.md. run.py needs libkerncap_replay.so: "
      "KERNCAP_REPLAY_LIB=/path/to/it, or kerncap-replay's folder on PATH.");
  repro->callback([&cli, ro] {
    if (IsLocalCapture(ro->capture)) {
      cli.local = [ro](Output o) -> absl::StatusOr<int> {
        absl::Status s = CmdReproLocal(o, *ro);
        if (!s.ok()) return s;
        return exit_code::kOk;
      };
    } else {
      cli.remote = [ro](Connection& c, Output o) { return CmdRepro(c, o, *ro); };
    }
  });
}

}  // namespace kerncap::ctl
