// The agent library loaded (LD_PRELOAD) into plain programs on a host
// without a GPU driver changes nothing: same output, same exit status, not a
// word on stderr. With stand-in driver and CUPTI libraries
// (testing/fake_driver_libs.cc) it picks the CUPTI that fits the driver's
// version, from the places cupti_api.h lists, and otherwise says once why it
// stays inactive. The programs run as child processes through sh.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace {

namespace fs = std::filesystem;

struct ProcessResult {
  int status = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

class NoDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kc_no_driver_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `command` with `env` (shell assignments) in front, stdin from a
  // two-line file. The agent's own variables start unset.
  ProcessResult Sh(const std::string& env, const std::string& command) {
    const fs::path in = dir_ / "stdin", out = dir_ / "stdout", err = dir_ / "stderr";
    std::ofstream(in) << "one\ntwo\n";
    const std::string cmd = "env -u KERNCAP_AGENT_LOG -u KERNCAP_AGENT_CUPTI -u LD_PRELOAD " +
                            env + " " + command + " <" + Quote(in) + " >" + Quote(out) + " 2>" +
                            Quote(err);
    ProcessResult r;
    int s = std::system(cmd.c_str());
    r.status = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
    r.out = Slurp(out);
    r.err = Slurp(err);
    return r;
  }

  static bool HostHasDriver() {
    return std::system("ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '") == 0;
  }

  // A folder holding `file` as a copy of `built`, returned.
  fs::path Place(const fs::path& folder, const std::string& file, const std::string& built) {
    fs::create_directories(folder);
    fs::copy_file(built, folder / file, fs::copy_options::overwrite_existing);
    return folder / file;
  }

  fs::path FakeDriverDir() {
    fs::path d = dir_ / "driver";
    Place(d, "libcuda.so.1", KERNCAP_FAKE_LIBCUDA);
    return d;
  }

  const std::string agent_ = Quote(KERNCAP_AGENT_SO);
  const std::string probe_ = Quote(KERNCAP_PRELOAD_PROBE) + " a 'b c'";
  fs::path dir_;
};

TEST_F(NoDriverTest, AgentLibraryNeedsNeitherDriverNorCupti) {
  ProcessResult r = Sh("", "readelf -d " + agent_);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_NE(r.out.find("(NEEDED)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("libcuda"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("libcupti"), std::string::npos) << r.out;
}

TEST_F(NoDriverTest, PlainProgramsRunUnchanged) {
  if (HostHasDriver()) GTEST_SKIP() << "this host has a CUDA driver (libcuda.so.1)";
  ProcessResult t = Sh("LD_PRELOAD=" + agent_, "/bin/true");
  EXPECT_EQ(t.status, 0);
  EXPECT_EQ(t.out, "");
  EXPECT_EQ(t.err, "");

  ProcessResult plain = Sh("", probe_);
  ASSERT_EQ(plain.status, 3) << plain.err;
  ProcessResult preloaded = Sh("LD_PRELOAD=" + agent_, probe_);
  EXPECT_EQ(preloaded.status, plain.status);
  EXPECT_EQ(preloaded.out, plain.out);
  EXPECT_EQ(preloaded.err, plain.err);
  // The same under the injection variable (the driver is what loads it
  // then; without one, nothing does).
  ProcessResult injected = Sh("CUDA_INJECTION64_PATH=" + agent_, probe_);
  EXPECT_EQ(injected.out, plain.out);
  EXPECT_EQ(injected.err, plain.err);
}

TEST_F(NoDriverTest, TheAgentDidLoadAndSaysWhyItIsInactive) {
  // Guards the test above against passing because nothing was preloaded.
  if (HostHasDriver()) GTEST_SKIP() << "this host has a CUDA driver (libcuda.so.1)";
  ProcessResult r = Sh("KERNCAP_AGENT_LOG=info LD_PRELOAD=" + agent_, probe_);
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("inactive: no CUDA driver: dlopen(libcuda.so.1) failed"),
            std::string::npos)
      << r.err;
}

TEST_F(NoDriverTest, FindsTheWheelsCupti12ForACuda12Driver) {
  const fs::path wheel = dir_ / "venv/lib/python3.11/site-packages/nvidia/cuda_cupti/lib";
  const fs::path cupti = Place(wheel, "libcupti.so.12", KERNCAP_FAKE_LIBCUPTI);
  // A CUPTI 13 beside it must not be taken for a CUDA 12 driver.
  Place(dir_ / "venv/lib/python3.11/site-packages/nvidia/cu13/lib", "libcupti.so.13",
        KERNCAP_FAKE_LIBCUPTI);
  ProcessResult plain = Sh("", probe_);
  ProcessResult r = Sh("KERNCAP_AGENT_LOG=info KERNCAP_FAKE_CUDA_VERSION=12080 LD_LIBRARY_PATH=" +
                 Quote(FakeDriverDir()) + " VIRTUAL_ENV=" + Quote(dir_ / "venv") +
                 " LD_PRELOAD=" + agent_,
             probe_);
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, plain.out);
  EXPECT_NE(r.err.find("CUDA 12.8 driver, CUPTI 12 from " + fs::canonical(cupti).string()),
            std::string::npos)
      << r.err;
  // The stand-in CUPTI fails every call: the agent stays out of the way.
  EXPECT_NE(r.err.find("cuptiSubscribe failed"), std::string::npos) << r.err;
}

TEST_F(NoDriverTest, OverrideNewerThanTheDriverIsRefused) {
  const fs::path cupti = Place(dir_ / "cupti13", "libcupti.so.13", KERNCAP_FAKE_LIBCUPTI);
  ProcessResult r = Sh("KERNCAP_FAKE_CUDA_VERSION=12040 LD_LIBRARY_PATH=" + Quote(FakeDriverDir()) +
                 " KERNCAP_AGENT_CUPTI=" + Quote(cupti) + " LD_PRELOAD=" + agent_,
             probe_);
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("is CUPTI 13, newer than the driver (CUDA 12)"), std::string::npos)
      << r.err;
}

TEST_F(NoDriverTest, NoMatchingCuptiIsSaidOnceOnStderr) {
  ProcessResult plain = Sh("", probe_);
  ProcessResult r = Sh("KERNCAP_FAKE_CUDA_VERSION=13000 LD_LIBRARY_PATH=" + Quote(FakeDriverDir()) +
                 " KERNCAP_AGENT_CUPTI=" + Quote(dir_ / "nowhere") + " LD_PRELOAD=" + agent_,
             probe_);
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, plain.out);
  const std::string what = "inactive, no captures from this process: no CUPTI for the CUDA 13 driver";
  const size_t at = r.err.find(what);
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(what, at + 1), std::string::npos) << "said more than once:\n" << r.err;
  EXPECT_NE(r.err.find("KERNCAP_AGENT_CUPTI=" + (dir_ / "nowhere").string()), std::string::npos)
      << r.err;
  // Everything else on stderr is the program's own.
  EXPECT_NE(r.err.find(plain.err), std::string::npos);
}

}  // namespace
