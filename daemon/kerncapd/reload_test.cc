#include "daemon/kerncapd/reload.h"

#include <unistd.h>

#include <sstream>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "gtest/gtest.h"

namespace kerncap::kerncapd {
namespace {

ParseOutcome ParseWith(const std::string& config_text, std::string* err_text) {
  const std::string path =
      ::testing::TempDir() + "/reload-" + std::to_string(::getpid()) + ".toml";
  EXPECT_TRUE(WriteFileAtomic(path, config_text).ok());
  std::ostringstream out, err;
  ParseOutcome p = ParseDaemonConfig({"kerncapd", "--config=" + path}, out, err);
  *err_text = err.str();
  ::unlink(path.c_str());
  return p;
}

TokenReader Tokens(absl::StatusOr<std::string> answer) {
  return [answer](const std::string&) { return answer; };
}

ReloadPlan Plan(const std::string& config_text, const std::string& running_token,
                const TokenReader& reader) {
  std::string err;
  ParseOutcome p = ParseWith(config_text, &err);
  DaemonConfig running;
  if (p.run) running = p.config;
  return PlanReload(running, running_token, p, err, reader);
}

TEST(ReloadTest, AConfigThatNamesNoTokenNeverTurnsTheTokenOff) {
  ReloadPlan p = Plan("log-level = \"debug\"\n", "sekrit-token-1", Tokens(std::string("x")));
  EXPECT_TRUE(p.refused);
  EXPECT_TRUE(absl::StrContains(p.reason, "names no token file")) << p.reason;
  EXPECT_FALSE(p.token.has_value());
  // Without a token in force the same config applies.
  p = Plan("log-level = \"debug\"\n", "", Tokens(std::string("x")));
  EXPECT_FALSE(p.refused) << p.reason;
  EXPECT_EQ(p.log_level, log::Level::kDebug);
  EXPECT_EQ(p.token_state, "none");
}

TEST(ReloadTest, AnUnreadableOrEmptyTokenFileRefusesTheWholeReload) {
  ReloadPlan p = Plan("log-level = \"debug\"\ntoken-file = \"/t\"\n", "sekrit-token-1",
                      Tokens(absl::InvalidArgumentError("token file /t is empty")));
  EXPECT_TRUE(p.refused);
  EXPECT_TRUE(absl::StrContains(p.reason, "is empty")) << p.reason;
  EXPECT_FALSE(p.token.has_value());
}

TEST(ReloadTest, ATruncatedCopyOfTheRunningTokenIsRefused) {
  ReloadPlan p = Plan("token-file = \"/t\"\n", "sekrit-token-1", Tokens(std::string("sekrit")));
  EXPECT_TRUE(p.refused);
  EXPECT_TRUE(absl::StrContains(p.reason, "truncated")) << p.reason;
  // A new token, or the same one, is applied.
  p = Plan("token-file = \"/t\"\n", "sekrit-token-1", Tokens(std::string("other-token")));
  EXPECT_FALSE(p.refused) << p.reason;
  ASSERT_TRUE(p.token.has_value());
  EXPECT_EQ(*p.token, "other-token");
  EXPECT_EQ(p.token_state, "replaced");
  p = Plan("token-file = \"/t\"\n", "sekrit-token-1", Tokens(std::string("sekrit-token-1")));
  EXPECT_EQ(p.token_state, "unchanged");
  p = Plan("token-file = \"/t\"\n", "", Tokens(std::string("sekrit-token-1")));
  EXPECT_EQ(p.token_state, "added");
}

TEST(ReloadTest, AConfigThatDoesNotParseIsRefusedAsAWhole) {
  for (const char* text : {"log-level = \"debug\"\ntoken-file = \"/t\"\nthis is garbage\n",
                           "log-level = \"debug\"\ntokne-file = \"/t\"\n",
                           "log-level = \"loud\"\ntoken-file = \"/t\"\n",
                           "[section]\ntoken-file = \"/t\"\n"}) {
    ReloadPlan p = Plan(text, "sekrit-token-1", Tokens(std::string("new-token")));
    EXPECT_TRUE(p.refused) << text;
    EXPECT_TRUE(absl::StrContains(p.reason, "does not parse")) << p.reason;
    EXPECT_FALSE(p.token.has_value()) << text;
  }
}

TEST(ReloadTest, SettingsThatNeedARestartAreNamed) {
  std::string err;
  ParseOutcome before = ParseWith("workers = 2\n", &err);
  ParseOutcome after = ParseWith("workers = 3\nlog-level = \"warn\"\n", &err);
  ASSERT_TRUE(before.run && after.run) << err;
  ReloadPlan p = PlanReload(before.config, "", after, "", Tokens(std::string("x")));
  EXPECT_FALSE(p.refused);
  EXPECT_EQ(p.restart_needed, std::vector<std::string>{"workers"});
  EXPECT_EQ(p.log_level, log::Level::kWarn);
}

}  // namespace
}  // namespace kerncap::kerncapd
