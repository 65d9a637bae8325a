// subprocess.h: runs the project's binaries (kerncapd, kerncapctl,
// synthetic_agent) as real processes for end-to-end tests.
#ifndef KERNCAP_TESTS_INTEGRATION_SUBPROCESS_H_
#define KERNCAP_TESTS_INTEGRATION_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kerncap::testing {

// Path of a built binary (KERNCAP_BUILD_DIR/bin/<name>), set by ctest.
std::string BinaryPath(const std::string& name);

// Creates a fresh directory under /tmp; removed by the caller's fixture.
std::string MakeTempDir(const std::string& prefix);
void RemoveTree(const std::string& path);

struct RunResult {
  int exit_code = -1;   // -1 when killed by a signal or timed out
  int signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv to completion (killing it after `timeout`), capturing output.
RunResult RunProcess(const std::vector<std::string>& argv,
              std::chrono::milliseconds timeout = std::chrono::seconds(60),
              const std::map<std::string, std::string>& extra_env = {});

// A process left running in the background; killed (SIGKILL) on destruction
// unless stopped first.
class Background {
 public:
  Background(const std::vector<std::string>& argv,
             const std::map<std::string, std::string>& extra_env = {});
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  pid_t pid() const { return pid_; }
  bool Running();
  // Sends `sig` and waits up to `timeout` for exit; returns the wait status
  // decoded like RunResult (exit_code/signal/timed_out).
  RunResult Stop(int sig, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Output so far (stdout and stderr go to files in a temp dir).
  std::string Stdout() const;
  std::string Stderr() const;

 private:
  static std::string DirName(const std::string& path);

  pid_t pid_ = -1;
  bool reaped_ = false;
  int last_status_ = 0;
  std::string out_path_;
  std::string err_path_;
};

// Polls `predicate` every 20 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& predicate,
             std::chrono::milliseconds timeout = std::chrono::seconds(20));

}  // namespace kerncap::testing

#endif  // KERNCAP_TESTS_INTEGRATION_SUBPROCESS_H_
