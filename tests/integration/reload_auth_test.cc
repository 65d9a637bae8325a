// SIGHUP never weakens authentication (issue 28 item 4): a real kerncapd on
// TCP+TLS with a bearer token, reloaded with each config or token file that
// used to weaken or drop the token, still refuses an RPC without the token
// (exit 6, UNAUTHENTICATED) and serves one with it, and logs why it kept its
// settings. A good reload still takes effect (the positive control).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/kerncapctl_test_util.h"

namespace kerncap::ctl {
namespace {

using testing::BinDir;
using testing::Daemon;
using testing::Result;
using testing::Sh;
using testing::TempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The log lines of `event` in kerncapd's log.
std::vector<nlohmann::json> Events(const std::string& log, const std::string& event) {
  std::vector<nlohmann::json> out;
  for (absl::string_view line : absl::StrSplit(ReadAll(log), '\n', absl::SkipEmpty())) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == event) out.push_back(j);
  }
  return out;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

TEST(ReloadAuthTest, NoReloadWeakensTheTokenOnTcpTls) {
  if (Sh("openssl version >/dev/null 2>&1").rc != 0) GTEST_SKIP() << "no openssl binary";
  TempDir tmp;
  const std::string cert = tmp.Sub("cert.pem");
  const std::string key = tmp.Sub("key.pem");
  Result gen = Sh(absl::StrCat(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost ",
      "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout ", key, " -out ", cert, " 2>&1"));
  ASSERT_EQ(gen.rc, 0) << gen.out;
  const std::string token = tmp.Sub("token");
  const std::string good = tmp.Sub("good");  // what clients send
  const std::string config = tmp.Sub("kerncapd.toml");
  const std::string token_line = absl::StrCat("token-file = \"", token, "\"\n");
  Write(token, "first-token-0123456789\n");
  Write(good, "first-token-0123456789\n");
  Write(config, "log-level = \"info\"\n" + token_line);
  const int port = 20000 + (::getpid() + 7919) % 20000;
  Daemon d(tmp, "reload",
           {"--config=" + config, absl::StrCat("--listen=127.0.0.1:", port), "--tls-cert=" + cert,
            "--tls-key=" + key});
  const std::string base = absl::StrCat(BinDir(), "/kerncapctl --host=localhost:", port,
                                        " --tls-ca=", cert, " --timeout=5");
  auto with_token = [&](const std::string& file) {
    return Sh(base + " --token-file=" + file + " status >/dev/null 2>&1").rc;
  };
  auto without_token = [&] { return Sh(base + " status >/dev/null 2>&1").rc; };
  int rc = -1;
  for (int i = 0; i < 100 && rc != 0; ++i) {
    rc = with_token(good);
    if (rc != 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(rc, 0) << ReadAll(d.log());
  ASSERT_EQ(without_token(), 6);

  // Each weakening reload: refused as a whole, logged with why, and the
  // listener keeps authenticating with the running token.
  struct Case {
    const char* what;
    std::string config_text;
    std::string token_text;
    const char* reason;  // in the refusal's log line
  };
  const std::vector<Case> cases = {
      {"a config that names no token", "log-level = \"debug\"\n", "first-token-0123456789\n",
       "does not parse"},
      {"an empty token file", "log-level = \"debug\"\n" + token_line, "", "is empty"},
      {"a whitespace-only token file", token_line, " \n\n", "is empty"},
      {"a truncated token file", token_line, "first-tok", "truncated"},
      {"a token file of NULs", token_line, std::string(16, '\0'), "non-printable"},
      {"garbage lines in the config", token_line + "log-level = \"debug\"\n}}garbage{{\n",
       "other-token-9876543210\n", "does not parse"},
      {"a misspelt token key", "tokenfile = \"/nonexistent\"\n", "other-token-9876543210\n",
       "does not parse"},
      {"a token file that went away", "token-file = \"/nonexistent/kerncap-token\"\n",
       "first-token-0123456789\n", "token file"},
  };
  size_t refused = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Write(config, c.config_text);
    Write(token, c.token_text);
    d.Signal(SIGHUP);
    bool logged = false;
    for (int i = 0; i < 100 && !logged; ++i) {
      logged = Events(d.log(), "kerncapd.reload_refused").size() > refused;
      if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(logged) << ReadAll(d.log());
    const nlohmann::json line = Events(d.log(), "kerncapd.reload_refused").back();
    ++refused;
    EXPECT_EQ(line.value("level", ""), "error") << line.dump();
    EXPECT_TRUE(absl::StrContains(line.value("reason", ""), c.reason)) << line.dump();
    EXPECT_EQ(line.value("token", ""), "in force") << line.dump();
    EXPECT_EQ(without_token(), 6);
    EXPECT_EQ(with_token(good), 0);
    // Nothing of a refused config applied: the level stays info.
    EXPECT_TRUE(Events(d.log(), "kerncapd.reloaded").empty());
  }

  // The positive control: a whole new token takes effect, the old one stops.
  Write(config, token_line);
  Write(token, "second-token-0123456789\n");
  d.Signal(SIGHUP);
  bool reloaded = false;
  for (int i = 0; i < 100 && !reloaded; ++i) {
    reloaded = !Events(d.log(), "kerncapd.reloaded").empty();
    if (!reloaded) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(reloaded) << ReadAll(d.log());
  EXPECT_EQ(Events(d.log(), "kerncapd.reloaded").back().value("token", ""), "replaced");
  EXPECT_EQ(with_token(good), 6);
  EXPECT_EQ(with_token(token), 0);
  EXPECT_EQ(without_token(), 6);
  EXPECT_EQ(d.Stop(), 0);
}

}  // namespace
}  // namespace kerncap::ctl
