// local_daemon.h: a kerncapd of the test's own (store, control socket and
// agent socket under one folder, 64 KiB chunks) and kerncapctl against it,
// for the end-to-end tests that drive the real binaries.
#ifndef KERNCAP_TESTS_INTEGRATION_LOCAL_DAEMON_H_
#define KERNCAP_TESTS_INTEGRATION_LOCAL_DAEMON_H_

#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/subprocess.h"

namespace kerncap::testing {

class LocalDaemon {
 public:
  // Starts kerncapd in `dir` and waits until `kerncapctl status` answers
  // (up() says whether it did).
  explicit LocalDaemon(const std::string& dir,
                       const std::map<std::string, std::string>& env = {})
      : dir_(dir) {
    proc_ = std::make_unique<Background>(
        std::vector<std::string>{BinaryPath("kerncapd"), "--store=" + dir_ + "/store",
                                 "--socket=" + socket(), "--agent-socket=" + agent_socket(),
                                 "--chunk-size=64KiB", "--drain-timeout=2"},
        env);
    up_ = WaitFor([&] { return Ctl({"status"}).exit_code == 0; });
  }
  bool up() const { return up_; }
  std::string Stderr() const { return proc_->Stderr(); }
  std::string socket() const { return dir_ + "/ctl.sock"; }
  std::string agent_socket() const { return dir_ + "/agent.sock"; }
  // kerncapctl ARGS... against this daemon (60 s at most).
  RunResult Ctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {BinaryPath("kerncapctl"), "--socket=" + socket()});
    return RunProcess(args, std::chrono::seconds(60));
  }
  RunResult Stop(int sig) { return proc_->Stop(sig); }
  // Sends `sig` without waiting (SIGHUP: reload).
  void Signal(int sig) const { ::kill(proc_->pid(), sig); }

 private:
  std::string dir_;
  std::unique_ptr<Background> proc_;
  bool up_ = false;
};

}  // namespace kerncap::testing

#endif  // KERNCAP_TESTS_INTEGRATION_LOCAL_DAEMON_H_
