// Live substitution end to end on CPU: a real kerncapd, the real kerncapctl
// (substitute / substitutions / unsubstitute) and the synthetic agent with
// --substitution standing in for an application (the agent-link client and
// the agent's SubstitutionTable are the real ones; only the "launch" and its
// device time are synthetic: the variant takes 1 us, the original 2 us).
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/local_daemon.h"
#include "tests/integration/subprocess.h"

namespace kerncap::testing {
namespace {

std::string WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

uint64_t U64(const nlohmann::json& v) {
  return v.is_string() ? std::stoull(v.get<std::string>()) : v.get<uint64_t>();
}

class SubstituteE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("kc_subst"); }
  void TearDown() override { RemoveTree(dir_); }

  std::unique_ptr<Background> StartAgent(const LocalDaemon& d, int dispatches) {
    auto agent = std::make_unique<Background>(std::vector<std::string>{
        BinaryPath("synthetic_agent"), "--socket=" + d.agent_socket(), "--kernels=matmul",
        absl::StrCat("--dispatches=", dispatches), "--substitution",
        "--wait-substitution-ms=10000", "--dispatch-interval-ms=2"});
    EXPECT_TRUE(WaitFor([&] {
      RunResult r = d.Ctl({"--json", "agents"});
      return absl::StrContains(r.out, "synthetic_agent");
    })) << "the synthetic agent did not connect";
    return agent;
  }

  std::string dir_;
};

TEST_F(SubstituteE2eTest, AbRunReportsBothDeviceTimesAndCounts) {
  LocalDaemon d(dir_);
  ASSERT_TRUE(d.up()) << "kerncapd did not come up:\n" << d.Stderr();
  auto agent = StartAgent(d, 200);
  const std::string variant = WriteFile(dir_ + "/variant.cubin", "SYNTHETIC-VARIANT bytes");
  RunResult r = d.Ctl({"--json", "substitute", "--kernel=matmul", "--code-object=" + variant,
                       "--format=cubin", "--no-preflight", "--process=synthetic_agent", "--ab", "--count=5", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto info = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(info.is_discarded()) << r.out;
  EXPECT_EQ(info["state"], "ended");
  EXPECT_TRUE(absl::StrContains(info["preflight"].get<std::string>(), "no_preflight"));
  ASSERT_EQ(info["agents"].size(), 1u);
  const auto& a = info["agents"][0];
  EXPECT_EQ(a["state"], "ended") << a.dump();
  EXPECT_TRUE(absl::StrContains(a["reason"].get<std::string>(), "count of 5")) << a.dump();
  EXPECT_EQ(U64(a["variant_launches"]), 5u);
  EXPECT_EQ(U64(a["original_launches"]), 5u);
  EXPECT_EQ(U64(a["variant"]["samples"]), 5u);
  EXPECT_EQ(U64(a["original"]["samples"]), 5u);
  EXPECT_DOUBLE_EQ(a["variant"]["mean_us"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(a["original"]["mean_us"].get<double>(), 2.0);
  EXPECT_GT(a["launch_rate_hz"].get<double>(), 0.0);
  EXPECT_EQ(a["kernel"], "_Z6matmulv") << a.dump();

  // The text form, and the listing.
  r = d.Ctl({"substitutions", "--all"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "variant/original device time: 0.500")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "5 variant, 5 original")) << r.out;
  EXPECT_EQ(agent->Stop(0, std::chrono::seconds(30)).exit_code, 0);
}

TEST_F(SubstituteE2eTest, RefusedVariantAndUsageErrors) {
  LocalDaemon d(dir_);
  ASSERT_TRUE(d.up()) << "kerncapd did not come up:\n" << d.Stderr();
  const std::string bad = WriteFile(dir_ + "/bad.cubin", "\x7f" "ELF not really");
  // Neither --preflight nor --no-preflight: refused before anything is sent.
  RunResult r = d.Ctl({"substitute", "--kernel=matmul", "--code-object=" + bad});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err + r.out, "--preflight")) << r.err;
  // No agent offers substitution.
  r = d.Ctl({"substitute", "--kernel=matmul", "--code-object=" + bad, "--no-preflight",
             "--all-processes"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "offers substitution")) << r.err;
  // A selector that names no process goes into every process only when
  // asked.
  r = d.Ctl({"substitute", "--kernel=matmul", "--code-object=" + bad, "--no-preflight"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "--all-processes")) << r.err;

  auto agent = StartAgent(d, 50);
  r = d.Ctl({"--json", "substitute", "--kernel=matmul", "--code-object=" + bad,
             "--no-preflight", "--all-processes", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto info = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(info.is_discarded()) << r.out;
  EXPECT_EQ(info["agents"][0]["state"], "refused");
  EXPECT_TRUE(absl::StrContains(info["agents"][0]["reason"].get<std::string>(),
                                "not a synthetic variant"));
  EXPECT_EQ(U64(info["agents"][0].value("variant_launches", nlohmann::json(0))), 0u);
  EXPECT_EQ(d.Ctl({"unsubstitute", "sub-unknown"}).exit_code, 3);
  EXPECT_EQ(agent->Stop(0, std::chrono::seconds(30)).exit_code, 0);
}

TEST_F(SubstituteE2eTest, UnsubstituteAndAgentExitEndIt) {
  LocalDaemon d(dir_);
  ASSERT_TRUE(d.up()) << "kerncapd did not come up:\n" << d.Stderr();
  auto agent = StartAgent(d, 100000);  // runs until stopped
  const std::string variant = WriteFile(dir_ + "/variant.cubin", "SYNTHETIC-VARIANT");
  RunResult r = d.Ctl({"--json", "substitute", "--kernel=matmul", "--code-object=" + variant,
                       "--format=cubin", "--no-preflight", "--all-processes"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string id = nlohmann::json::parse(r.out)["substitution_id"];
  ASSERT_TRUE(WaitFor([&] {
    RunResult l = d.Ctl({"--json", "substitutions", id});
    auto j = nlohmann::json::parse(l.out, nullptr, false);
    return !j.is_discarded() && j["substitutions"][0]["agents"][0]["state"] == "active";
  }));
  r = d.Ctl({"--json", "unsubstitute", id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["state"], "ended");

  // A second one, ended by the agent's process going away.
  r = d.Ctl({"--json", "substitute", "--kernel=matmul", "--code-object=" + variant,
             "--format=cubin", "--no-preflight", "--all-processes"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id2 = nlohmann::json::parse(r.out)["substitution_id"];
  agent->Stop(SIGKILL);
  ASSERT_TRUE(WaitFor([&] {
    RunResult l = d.Ctl({"--json", "substitutions", id2});
    auto j = nlohmann::json::parse(l.out, nullptr, false);
    return !j.is_discarded() && j["substitutions"][0]["state"] == "ended";
  }));
  EXPECT_EQ(d.Stop(SIGTERM).exit_code, 0);
}

// The preflight is kerncapd's: it validates the variant against a capture it
// holds, with kerncap-replay on its own node ($KERNCAP_REPLAY here: a
// stand-in that records its arguments and exits as told), and goes live only
// on a pass; the result records what kerncapd ran, not what a client says.
TEST_F(SubstituteE2eTest, KerncapdRunsThePreflightAndGoesLiveOnlyOnAPass) {
  const std::string replay = dir_ + "/fake-replay.sh";
  WriteFile(replay, "#!/bin/sh\necho \"$@\" > " + dir_ +
                        "/replay-args\necho 'outputs differ' >&2\nexit $(cat " + dir_ +
                        "/replay-exit)\n");
  ASSERT_EQ(::chmod(replay.c_str(), 0755), 0);
  WriteFile(dir_ + "/replay-exit", "0");
  LocalDaemon d(dir_, {{"KERNCAP_REPLAY", replay}});
  ASSERT_TRUE(d.up()) << "kerncapd did not come up:\n" << d.Stderr();
  // A capture of matmul to validate against.
  ASSERT_EQ(d.Ctl({"arm", "--kernel=matmul", "--count=1"}).exit_code, 0);
  Background capturing({BinaryPath("synthetic_agent"), "--socket=" + d.agent_socket(),
                        "--kernels=matmul", "--dispatches=1", "--region-mib=1",
                        "--wait-arm-ms=10000"});
  std::string capture;
  ASSERT_TRUE(WaitFor([&] {
    RunResult l = d.Ctl({"captures", "-q"});
    capture = l.out.substr(0, l.out.find('\n'));
    return !capture.empty();
  }, std::chrono::seconds(30)));
  auto agent = StartAgent(d, 100000);
  const std::string variant = WriteFile(dir_ + "/variant.cubin", "SYNTHETIC-VARIANT");

  // Fails: exit 8, nothing substituted.
  WriteFile(dir_ + "/replay-exit", "8");
  RunResult r = d.Ctl({"substitute", "--kernel=matmul", "--code-object=" + variant,
                       "--format=cubin", "--preflight=" + capture, "--all-processes"});
  EXPECT_EQ(r.exit_code, 8) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "preflight failed")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "outputs differ")) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(d.Ctl({"--json", "substitutions", "--all"}).out)
                  ["substitutions"].empty());
  std::ifstream args_in(dir_ + "/replay-args");
  std::string args((std::istreambuf_iterator<char>(args_in)), {});
  EXPECT_TRUE(absl::StrContains(args, "validate")) << args;
  EXPECT_TRUE(absl::StrContains(args, capture)) << args;
  EXPECT_TRUE(absl::StrContains(args, "--code-object=")) << args;
  // A capture of another kernel proves nothing: refused before any replay.
  r = d.Ctl({"substitute", "--kernel=softmax", "--code-object=" + variant, "--format=cubin",
             "--preflight=" + capture, "--all-processes"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "does not match")) << r.err;

  // Passes: live, with kerncapd's own account of the check.
  WriteFile(dir_ + "/replay-exit", "0");
  r = d.Ctl({"--json", "substitute", "--kernel=matmul", "--code-object=" + variant,
             "--format=cubin", "--preflight=" + capture, "--all-processes", "--count=2",
             "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto info = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(info.is_discarded()) << r.out;
  EXPECT_TRUE(absl::StrContains(info["preflight"].get<std::string>(), ": pass")) << r.out;
  EXPECT_TRUE(absl::StrContains(info["preflight"].get<std::string>(), capture)) << r.out;
  EXPECT_EQ(info["agents"][0]["state"], "ended") << r.out;
}

}  // namespace
}  // namespace kerncap::testing
