// serve_cli.h: the `serve` and `submit` subcommands of kerncap-replay
// (main.cc registers them; protocol.h documents what goes over the socket).
//
//   kerncap-replay serve CAPTURE.kcap --socket=PATH [--device=N]
//       Restores the capture once, keeps pristine and golden copies on the
//       GPU, and evaluates candidate code objects sent to PATH until a
//       "shutdown" request or SIGTERM/SIGINT (exit 0). When it is ready it
//       prints one JSON line on stdout ({"serving":PATH,...}); the socket
//       exists only from then on. Exit 3 on errors, including a candidate
//       that faulted and took the CUDA context with it; 77 without a GPU.
//
//   kerncap-replay submit --socket=PATH CANDIDATE.cubin [--iterations=N] [--json]
//       Sends one evaluate request and prints the answer. Exit 0 when it
//       passed validation (or none was asked for), 1 when it failed, 3 on
//       an error (the server's or reaching it), 2 on usage errors.
//       `submit --socket=PATH --info` / `--shutdown` send those requests.
#ifndef KERNCAP_REPRODUCER_REPLAY_SERVE_SERVE_CLI_H_
#define KERNCAP_REPRODUCER_REPLAY_SERVE_SERVE_CLI_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace kerncap::replay::serve {

class ServeCommands {
 public:
  // Adds both subcommands to `app`.
  explicit ServeCommands(CLI::App* app);
  // After parsing: the exit code when `serve` or `submit` was chosen.
  std::optional<int> Run();

 private:
  int Serve();
  int Submit();

  CLI::App* serve_ = nullptr;
  CLI::App* submit_ = nullptr;

  struct ServeArgs {
    std::string source;
    std::string socket;
    std::string daemon;
    int device = -1;
    bool no_relocate = false;
    bool force_relocate = false;
  } serve_args_;

  struct SubmitArgs {
    std::string socket;
    std::string code_object;
    std::string kernel;
    int iterations = 10;
    int warmup = 2;
    bool no_validate = false;
    bool inline_code = false;
    bool restore_each = false;
    bool no_restore_each = false;
    bool compare_original = false;
    bool cold_l2 = false;
    std::string launch_json;  // --launch='{"grid":[64],"block":[128]}'
    std::string dtype;
    std::vector<std::string> region_dtypes;
    double atol = -1;
    double rtol = -1;
    int64_t ulp = -1;
    bool nan_unequal = false;
    bool json = false;
    bool info = false;
    bool shutdown = false;
    int timeout = 0;
  } submit_args_;
};

}  // namespace kerncap::replay::serve

#endif  // KERNCAP_REPRODUCER_REPLAY_SERVE_SERVE_CLI_H_
