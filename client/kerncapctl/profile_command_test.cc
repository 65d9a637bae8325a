// kerncapctl profile (cli_replay.cc): the real kerncapctl binary with a fake kerncap-replay
// script: the flags it passes on, the capture source, and the replayer's
// exit code (77: profiling skipped) coming back unchanged. CPU only.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kerncap::ctl {
namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string output;
};

Result Shell(const std::string& cmd) {
  Result r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(ProfileCommandTest, PassesTheCaptureAndFlagsToKerncapReplayProfile) {
  char tmpl[] = "/tmp/kc_profile_cmd_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string fake = dir + "/fake-replay";
  std::ofstream(fake) << "#!/bin/sh\nfor a in \"$@\"; do echo \"ARG[$a]\"; done\nexit 77\n";
  fs::permissions(fake, fs::perms::owner_all);
  const std::string sock = dir + "/kerncapd.sock";
  Result r = Shell(absl::StrCat("env KERNCAP_REPLAY=", fake, " ", KERNCAP_KERNCAPCTL,
                              " --socket=", sock,
                              " profile cap-12 --code-object=v.cubin --block 128 --json"
                              " --ncu=/opt/ncu -- --future-flag"));
  EXPECT_EQ(r.exit_code, 77) << r.output;  // "skipped" comes back unchanged
  EXPECT_EQ(r.output, "ARG[profile]\nARG[--daemon=unix:" + sock +
                          "]\nARG[cap-12]\nARG[--code-object=v.cubin]\nARG[--ncu=/opt/ncu]\n"
                          "ARG[--block=128]\nARG[--future-flag]\nARG[--json]\n");
  // kerncapctl's global --json is passed on; a file capture goes as is.
  const std::string kcap = dir + "/x.kcap";
  std::ofstream(kcap) << "not read by the fake";
  Result f = Shell(absl::StrCat("env KERNCAP_REPLAY=", fake, " ", KERNCAP_KERNCAPCTL,
                              " --json profile ", kcap));
  EXPECT_EQ(f.output, "ARG[profile]\nARG[" + kcap + "]\nARG[--json]\n");
  // Without CAPTURE: a usage error from kerncapctl itself.
  EXPECT_EQ(Shell(absl::StrCat("env KERNCAP_REPLAY=", fake, " ", KERNCAP_KERNCAPCTL, " profile"))
                .exit_code,
            2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kerncap::ctl
