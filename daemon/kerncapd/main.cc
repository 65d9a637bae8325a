// kerncapd: the per-node kerncap daemon (see daemon.h and --help).
#include <iostream>
#include <string>
#include <vector>

#include "common/log.h"
#include "daemon/kerncapd/daemon.h"
#include "daemon/kerncapd/daemon_config.h"
#include "daemon/kerncapd/signals.h"

int main(int argc, char** argv) {
  using namespace kerncap::kerncapd;
  BlockDaemonSignals();  // before any thread exists
  std::vector<std::string> args(argv, argv + argc);
  ParseOutcome parsed = ParseDaemonConfig(args, std::cout, std::cerr);
  if (!parsed.run) return parsed.exit_code;
  kerncap::log::SetMinLevel(parsed.config.log_level);

  Daemon daemon(parsed.config, args);
  if (int rc = daemon.Start(); rc != kExitOk) return rc;
  SignalThread signals([&daemon](int signo) { daemon.RequestStop(signo); },
                       [&daemon] { daemon.Reload(); });
  daemon.Run();
  return kExitOk;
}
