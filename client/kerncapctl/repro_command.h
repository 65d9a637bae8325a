// repro_command.h: `kerncapctl repro CAPTURE --out DIR [--source-dir=DIR]
// [--compile-commands=FILE] [--force] [--binary | --triton | --native]
// [--json]`, a reproducer project (reproducer/generator/generator.h).
//
// A capture carrying the Triton shim's metadata gets the Python (Triton)
// project unless --native or --binary; --triton insists on it (an error
// when the capture has no Triton metadata).
//
//   CAPTURE an existing file (.kcap): generated here, no daemon involved;
//           the source hint and compile database are paths on this host.
//   CAPTURE a capture id (or prefix): kerncapd generates the project
//           (GenerateReproducer) and streams it back; kerncapctl writes it to
//           --out. The hint and database are paths on the daemon's host
//           (this host for a Unix socket).
// In both cases --out appears only once complete; a non-empty --out is
// refused unless --force.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_REPRO_COMMAND_H_
#define KERNCAP_CLIENT_KERNCAPCTL_REPRO_COMMAND_H_

#include <string>

#include "absl/status/status.h"
#include "client/kerncapctl/commands.h"
#include "client/kerncapctl/connection.h"

namespace kerncap::ctl {

struct ReproOptions {
  std::string capture;
  std::string out_dir;
  std::string source_dir;
  std::string compile_commands;
  bool force = false;
  bool binary = false;  // do not look for sources
  bool triton = false;  // the Triton project (fails without Triton metadata)
  bool native = false;  // the CUDA/HIP project even for a Triton capture
};

// True when CAPTURE names an existing regular file (generated locally).
bool IsLocalCapture(const std::string& capture);

absl::Status CmdReproLocal(Output o, const ReproOptions& options);
absl::Status CmdRepro(Connection& c, Output o, const ReproOptions& options);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_REPRO_COMMAND_H_
