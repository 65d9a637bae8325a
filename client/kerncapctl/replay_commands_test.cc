// kerncapctl replay|validate|bench: finding kerncap-replay, building its
// arguments, and (through the real kerncapctl binary and a fake replayer
// script) forwarding flags and exit codes. CPU only.
#include "client/kerncapctl/replay_commands.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kerncap::ctl {
namespace {

namespace fs = std::filesystem;

class ReplayCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kc_replay_cmd_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A fake kerncap-replay: prints each argument as ARG[...] and exits `code`.
  std::string WriteFakeReplay(const std::string& path, int code) {
    std::ofstream(path) << "#!/bin/sh\nfor a in \"$@\"; do echo \"ARG[$a]\"; done\nexit " << code
                        << "\n";
    fs::permissions(path, fs::perms::owner_all);
    return path;
  }

  struct Result {
    int exit_code = -1;
    std::string output;  // stdout and stderr
  };
  // Runs `env ENV... KERNCTL ARGS` through the shell.
  Result Run(const std::string& env, const std::string& kerncapctl, const std::string& args) {
    std::string cmd = absl::StrCat("env ", env, " ", kerncapctl, " ", args, " 2>&1");
    Result r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
    int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  }

  std::string dir_;
};

TEST_F(ReplayCommandsTest, ArgsWithDaemonAndWithFile) {
  ReplayRequest r{"validate", "cap-7f3a", {"--rtol=1e-5", "--json"}};
  EXPECT_EQ(ReplayArgs(r, "unix:/run/k.sock"),
            (std::vector<std::string>{"validate", "--daemon=unix:/run/k.sock", "cap-7f3a",
                                      "--rtol=1e-5", "--json"}));
  ReplayRequest f{"run", "/tmp/x.kcap", {}};
  EXPECT_EQ(ReplayArgs(f, ""), (std::vector<std::string>{"run", "/tmp/x.kcap"}));
}

TEST_F(ReplayCommandsTest, FindsOverrideThenSiblingThenPath) {
  const std::string bin_dir = dir_ + "/bin", path_dir = dir_ + "/path";
  fs::create_directories(bin_dir);
  fs::create_directories(path_dir);
  const std::string on_path = WriteFakeReplay(path_dir + "/kerncap-replay", 0);

  ReplayLookup l;
  l.self_exe = bin_dir + "/kerncapctl";
  l.path_env = "/nonexistent:" + path_dir;
  auto found = FindReplayBinary(l);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, on_path);

  const std::string sibling = WriteFakeReplay(bin_dir + "/kerncap-replay", 0);
  found = FindReplayBinary(l);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, sibling);

  const std::string custom = WriteFakeReplay(dir_ + "/my-replay", 0);
  l.env_override = custom;
  found = FindReplayBinary(l);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, custom);
}

TEST_F(ReplayCommandsTest, ClearErrorWhenMissing) {
  ReplayLookup l;
  l.self_exe = dir_ + "/kerncapctl";
  l.path_env = dir_ + "/empty";
  auto found = FindReplayBinary(l);
  ASSERT_FALSE(found.ok());
  EXPECT_TRUE(absl::StrContains(found.status().message(), "kerncap-replay not found"))
      << found.status();
  EXPECT_TRUE(absl::StrContains(found.status().message(), dir_ + "/kerncap-replay"));
  EXPECT_TRUE(absl::StrContains(found.status().message(), "KERNCAP_REPLAY="));

  l.env_override = dir_ + "/does-not-exist";
  found = FindReplayBinary(l);
  ASSERT_FALSE(found.ok());
  EXPECT_TRUE(absl::StrContains(found.status().message(),
                                absl::StrCat("KERNCAP_REPLAY=", dir_, "/does-not-exist")))
      << found.status();
}

TEST_F(ReplayCommandsTest, KerncapctlForwardsFlagsAndExitCode) {
  const std::string fake = WriteFakeReplay(dir_ + "/fake-replay", 3);
  const std::string env = "KERNCAP_REPLAY=" + fake;
  const std::string sock = dir_ + "/kerncapd.sock";

  Result v = Run(env, KERNCAP_KERNCAPCTL,
                 "--socket=" + sock +
                     " validate --rtol 1e-5 cap-12 --region-dtype=0x10:f32 --region-dtype 0x20:i32"
                     " --atol=0 --json -- --future-flag");
  EXPECT_EQ(v.exit_code, 3) << v.output;  // the replayer's code, unchanged
  EXPECT_EQ(v.output, "ARG[validate]\nARG[--daemon=unix:" + sock +
                          "]\nARG[cap-12]\nARG[--region-dtype=0x10:f32]\n"
                          "ARG[--region-dtype=0x20:i32]\nARG[--atol=0]\nARG[--rtol=1e-5]\n"
                          "ARG[--future-flag]\nARG[--json]\n");

  // kerncapctl's own --json is passed on; replay is kerncap-replay's "run".
  Result b = Run(env, KERNCAP_KERNCAPCTL,
                 "--json --socket=" + sock + " bench cap-1 --iterations 5 --cold-l2");
  EXPECT_EQ(b.exit_code, 3) << b.output;
  EXPECT_EQ(b.output, "ARG[bench]\nARG[--daemon=unix:" + sock +
                          "]\nARG[cap-1]\nARG[--iterations=5]\nARG[--cold-l2]\nARG[--json]\n");
  Result r = Run(env, KERNCAP_KERNCAPCTL, "--socket=" + sock + " replay cap-2 --device=1");
  EXPECT_EQ(r.output, "ARG[run]\nARG[--daemon=unix:" + sock + "]\nARG[cap-2]\nARG[--device=1]\n");

  // A capture that is a file goes to the replayer as is, without --daemon.
  const std::string kcap = dir_ + "/x.kcap";
  std::ofstream(kcap) << "not read by the fake";
  Result f = Run(env, KERNCAP_KERNCAPCTL, "validate " + kcap);
  EXPECT_EQ(f.output, "ARG[validate]\nARG[" + kcap + "]\n");

  // Exit code 0 and 8 (validation ran, outputs differ) come through too.
  const std::string pass = WriteFakeReplay(dir_ + "/pass-replay", 0);
  EXPECT_EQ(Run("KERNCAP_REPLAY=" + pass, KERNCAP_KERNCAPCTL, "validate cap").exit_code, 0);
  const std::string fail = WriteFakeReplay(dir_ + "/fail-replay", 8);
  EXPECT_EQ(Run("KERNCAP_REPLAY=" + fail, KERNCAP_KERNCAPCTL, "validate cap").exit_code, 8);

  // Values of the replayer's flags are checked here, with what was expected.
  Result t = Run(env, KERNCAP_KERNCAPCTL, "bench cap --iterations=abc");
  EXPECT_EQ(t.exit_code, 2) << t.output;
  EXPECT_TRUE(absl::StrContains(t.output, "--iterations: expected a whole number")) << t.output;
  Result n = Run(env, KERNCAP_KERNCAPCTL, "validate cap --atol=-1");
  EXPECT_EQ(n.exit_code, 2) << n.output;
  EXPECT_TRUE(absl::StrContains(n.output, "--atol: must be 0 or more, got -1")) << n.output;
  EXPECT_FALSE(absl::StrContains(n.output, "ARG[")) << n.output;

  // Other commands still reject unknown arguments.
  Result s = Run(env, KERNCAP_KERNCAPCTL, "status --bogus");
  EXPECT_EQ(s.exit_code, 2) << s.output;
  EXPECT_TRUE(absl::StrContains(s.output, "--bogus")) << s.output;
}

TEST_F(ReplayCommandsTest, KerncapctlSaysWhenReplayerIsMissing) {
  // A copy of kerncapctl alone in a directory, nothing on PATH.
  const std::string ctl = dir_ + "/kerncapctl";
  fs::copy_file(KERNCAP_KERNCAPCTL, ctl);
  fs::permissions(ctl, fs::perms::owner_all);
  Result r = Run("-u KERNCAP_REPLAY PATH=" + dir_ + "/empty", ctl, "validate cap-1 --rtol=1e-3");
  EXPECT_EQ(r.exit_code, 3) << r.output;  // not found
  EXPECT_TRUE(absl::StrContains(r.output, "kerncap-replay not found")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "KERNCAP_REPLAY=/path/to/kerncap-replay")) << r.output;

  Result j = Run("-u KERNCAP_REPLAY PATH=" + dir_ + "/empty", ctl, "--json bench cap-1");
  EXPECT_EQ(j.exit_code, 3) << j.output;
  EXPECT_TRUE(absl::StrContains(j.output, "\"code\":\"not_found\"")) << j.output;

  const std::string bad = dir_ + "/not-executable";
  std::ofstream(bad) << "x";
  Result e = Run("KERNCAP_REPLAY=" + bad, ctl, "replay cap-1");
  EXPECT_EQ(e.exit_code, 1) << e.output;
  EXPECT_TRUE(absl::StrContains(e.output, "KERNCAP_REPLAY=" + bad + " is not an executable"))
      << e.output;
}

TEST_F(ReplayCommandsTest, TcpDaemonUnreachableFailsBeforeRunningReplayer) {
  // With --host, kerncapctl exports the capture itself first; an unreachable
  // daemon is kerncapctl's error (exit 4), and the replayer never runs.
  const std::string fake = WriteFakeReplay(dir_ + "/fake-replay", 0);
  Result r = Run("KERNCAP_REPLAY=" + fake, KERNCAP_KERNCAPCTL,
                 "--host=127.0.0.1:1 --insecure --timeout=5 validate cap-1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "ARG[")) << r.output;
}

}  // namespace
}  // namespace kerncap::ctl
