// kerncapctl_test_util.h: real kerncapd processes on temp stores and
// sockets, and a shell runner for the real kerncapctl binary (tests only).
#ifndef KERNCAP_TESTS_INTEGRATION_KERNCAPCTL_TEST_UTIL_H_
#define KERNCAP_TESTS_INTEGRATION_KERNCAPCTL_TEST_UTIL_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/store/store_test_util.h"
#include "gtest/gtest.h"

namespace kerncap::ctl::testing {

using store::testing::TempDir;

inline std::string BinDir() {
  const char* b = std::getenv("KERNCAP_BUILD_DIR");
  return b == nullptr ? std::string("build/bin") : absl::StrCat(b, "/bin");
}

struct Result {
  int rc = -1;
  std::string out;
};

inline Result Sh(const std::string& cmd) {
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class Daemon {
 public:
  // Store tmp/NAME-store, log tmp/NAME.log; sockets in `socket_dir` (tmp
  // when empty; kerncapd creates it when missing).
  Daemon(const TempDir& tmp, const std::string& name, std::vector<std::string> extra = {},
         const std::string& socket_dir = "") {
    const std::string sockets = socket_dir.empty() ? tmp.path() : socket_dir;
    socket_ = sockets + "/" + name + ".sock";
    std::string store = tmp.Sub(name + "-store");
    std::string agent = sockets + "/" + name + "-agent.sock";
    std::string log = tmp.Sub(name + ".log");
    log_ = log;
    pid_ = ::fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log.c_str(), "w", stderr);
      (void)f;
      std::vector<std::string> args = {BinDir() + "/kerncapd", "--store=" + store,
                                       "--socket=" + socket_,  "--agent-socket=" + agent,
                                       "--chunk-size=64KiB",   "--drain-timeout=2"};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
    for (int i = 0; i < 200 && !std::filesystem::exists(socket_); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Daemon() {
    if (pid_ > 0) Stop();
  }
  // SIGTERM and the exit code.
  int Stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string Ctl(const std::string& args) const {
    return absl::StrCat(BinDir(), "/kerncapctl --socket=", socket_, " ", args);
  }
  const std::string& socket() const { return socket_; }
  const std::string& log() const { return log_; }
  void Signal(int signo) const { ::kill(pid_, signo); }

 private:
  std::string socket_;
  std::string log_;
  pid_t pid_ = -1;
};

// Two captures with the same bytes in store `dir` (created before any daemon).
inline std::vector<std::string> SeedStore(const std::string& dir) {
  auto opts = store::testing::SmallOptions(dir);
  auto s = store::Store::Open(opts);
  EXPECT_TRUE(s.ok()) << s.status();
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    v1::CaptureManifest m;
    m.mutable_kernel()->set_demangled_name("matmul(float*, float*)");
    (*m.mutable_tags())["run"] = absl::StrCat("r", i);
    if (i == 0) {  // a texture object over the first region, handle 5 at offset 8
      m.set_argument_blob(std::string("\0\0\0\0\0\0\0\0\x05\0\0\0\0\0\0\0", 16));
      v1::TextureObject* t = m.add_texture_objects();
      t->set_type(v1::TextureObject::TEXTURE_OBJECT);
      t->set_handle(5);
      t->add_argument_offsets(8);
      t->mutable_resource()->set_type(v1::TextureResource::RESOURCE_LINEAR);
      t->mutable_resource()->set_device_ptr(0x7f0000000000);
      t->mutable_resource()->set_size_bytes(4096);
      t->mutable_resource()->set_format(0x20);
      t->mutable_resource()->set_num_channels(1);
      // How the agent read the memory (kerncapctl show's "memory read").
      v1::CaptureTiming* timing = m.mutable_agent_timing();
      timing->set_path("host");
      timing->set_path_reason("free device memory too small");
      timing->set_held_seconds(0.25);
      timing->set_pcie_bytes(3ull << 20);
      timing->set_known_bytes(300ull << 10);
      timing->set_fingerprint_seconds(0.004);
    }
    auto id = store::testing::IngestCapture(
        **s,
        {{0x7f0000000000, store::testing::TextBytes(300 << 10, 1)},
         {0x7f0000100000, std::string(64 << 10, '\0')}},
        {{0x7f0000000000, store::testing::TextBytes(300 << 10, 2)}}, m);
    EXPECT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  return ids;
}

}  // namespace kerncap::ctl::testing

#endif  // KERNCAP_TESTS_INTEGRATION_KERNCAPCTL_TEST_UTIL_H_
