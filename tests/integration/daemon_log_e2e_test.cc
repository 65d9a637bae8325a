// kerncapd's log lines follow the one JSON policy (docs/JSON.md): a real
// kerncapd goes through start-up, an arm, a capture from the synthetic agent,
// a refused request, gc, rm, SIGHUP and SIGTERM, and every line it wrote on
// stderr is checked: one flat JSON object per line, "ts" an RFC 3339 UTC
// string, a known level, a dotted event name, snake_case keys, integers as
// numbers (never strings of digits) and enum values by their short names
// (never a protobuf name such as REGION_DEVICE).
#include <signal.h>

#include <chrono>
#include <memory>
#include <regex>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/local_daemon.h"
#include "tests/integration/subprocess.h"

namespace kerncap::testing {
namespace {

// What is wrong with one log line by the policy ("" when nothing).
std::string PolicyProblem(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "not one JSON object";
  static const std::regex kTs(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  static const std::regex kEvent(R"([a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+)");
  static const std::regex kKey(R"([a-z][a-z0-9_]*)");
  static const std::regex kDigits(R"(-?\d+)");
  static const std::regex kProtoEnum(R"([A-Z][A-Z0-9]*(_[A-Z0-9]+)+)");
  static const std::set<std::string> kLevels = {"debug", "info", "warn", "error"};
  if (!j.contains("ts") || !j["ts"].is_string() ||
      !std::regex_match(j["ts"].get<std::string>(), kTs)) {
    return "ts is not an RFC 3339 UTC string with milliseconds";
  }
  if (!j.contains("level") || !j["level"].is_string() ||
      kLevels.count(j["level"].get<std::string>()) == 0) {
    return "level is not one of debug, info, warn, error";
  }
  if (!j.contains("event") || !j["event"].is_string() ||
      !std::regex_match(j["event"].get<std::string>(), kEvent)) {
    return "event is not a dotted lowercase name";
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (!std::regex_match(key, kKey)) return "key " + key + " is not snake_case";
    if (it->is_object()) return "field " + key + " is nested (log fields are flat)";
    if (key == "ts" || !it->is_string()) continue;
    const std::string v = it->get<std::string>();
    if (std::regex_match(v, kDigits)) return "field " + key + " is an integer written as a string";
    if (std::regex_match(v, kProtoEnum)) return "field " + key + " is a protobuf enum name";
  }
  return "";
}

TEST(DaemonLogPolicyTest, PolicyProblemCatchesWhatThePolicyForbids) {
  const std::string ok = R"({"ts":"2026-11-29T18:01:02.123Z","level":"info","event":"a.b")";
  EXPECT_EQ(PolicyProblem(ok + "}"), "");
  EXPECT_EQ(PolicyProblem(ok + R"(,"bytes":1048576,"capture":"cap-1a2b"})"), "");
  EXPECT_NE(PolicyProblem(ok + R"(,"bytes":"1048576"})"), "");
  EXPECT_NE(PolicyProblem(ok + R"(,"kind":"REGION_DEVICE_VMM"})"), "");
  EXPECT_NE(PolicyProblem(ok + R"(,"Bytes":1})"), "");
  EXPECT_NE(PolicyProblem(ok + R"(,"x":{"y":1}})"), "");
  EXPECT_NE(PolicyProblem(R"({"ts":"yesterday","level":"info","event":"a.b"})"), "");
  EXPECT_NE(PolicyProblem(R"({"ts":"2026-11-29T18:01:02.123Z","level":"loud","event":"a.b"})"),
            "");
  EXPECT_NE(PolicyProblem(R"({"ts":"2026-11-29T18:01:02.123Z","level":"info","event":"ab"})"),
            "");
  EXPECT_NE(PolicyProblem("capture committed"), "");
}

TEST(DaemonLogPolicyTest, EveryLineKerncapdWritesFollowsThePolicy) {
  const std::string dir = MakeTempDir("kc_daemon_log");
  auto daemon = std::make_unique<LocalDaemon>(dir);
  ASSERT_TRUE(daemon->up()) << daemon->Stderr();

  RunResult r = daemon->Ctl({"-q", "arm", "--kernel=log_probe", "--ttl=5m"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  RunResult agent = RunProcess({BinaryPath("synthetic_agent"), "--socket=" + daemon->agent_socket(),
                                "--kernels=log_probe", "--region-mib=0.25", "--wait-arm-ms=5000"},
                               std::chrono::seconds(60));
  ASSERT_EQ(agent.exit_code, 0) << agent.out << agent.err;
  r = daemon->Ctl({"-q", "captures"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id(absl::StripAsciiWhitespace(r.out));
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(daemon->Ctl({"rm", "cap-000000000000"}).exit_code, 3);  // a refused request
  EXPECT_EQ(daemon->Ctl({"rm", id}).exit_code, 0);
  EXPECT_EQ(daemon->Ctl({"gc"}).exit_code, 0);
  daemon->Signal(SIGHUP);  // reloads
  EXPECT_TRUE(WaitFor([&] {
    return daemon->Stderr().find("\"kerncapd.reloaded\"") != std::string::npos;
  })) << daemon->Stderr();
  RunResult stopped = daemon->Stop(SIGTERM);
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;

  std::set<std::string> events;
  std::map<std::string, int> occurrences;
  const std::string daemon_stderr = daemon->Stderr();
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(daemon->Stderr(), '\n', absl::SkipEmpty())) {
    ++lines;
    const std::string text(line);
    EXPECT_EQ(PolicyProblem(text), "") << text;
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("event")) continue;
    events.insert(j["event"].get<std::string>());
    ++occurrences[j["event"].get<std::string>()];
    if (j["event"] == "capture.committed" && j.contains("logical_bytes")) {
      EXPECT_TRUE(j["logical_bytes"].is_number_integer()) << text;
      EXPECT_EQ(j["logical_bytes"], 256 * 1024) << text;
      EXPECT_EQ(j["manifest"].get<std::string>().size(), 64u) << text;  // hex digest
    }
  }
  EXPECT_GT(lines, 5);
  // The run went through what it meant to.
  for (const char* e : {"kerncapd.ready", "arm.created", "arm.pushed", "capture.committed",
                        "capture.deleted", "store.gc", "kerncapd.reloaded"}) {
    EXPECT_EQ(events.count(e), 1u) << e << " not logged; logged: " << events.size() << " kinds";
  }
  // One line per fact: an arm and a delete are each logged once.
  EXPECT_EQ(occurrences["arm.created"], 1) << daemon_stderr;
  EXPECT_EQ(occurrences["capture.deleted"], 1) << daemon_stderr;
  daemon.reset();
  RemoveTree(dir);
}

}  // namespace
}  // namespace kerncap::testing
