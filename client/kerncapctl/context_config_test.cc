#include "client/kerncapctl/context_config.h"

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace kerncap::ctl {
namespace {

TEST(ContextConfigTest, ParsesTheDocumentedForm) {
  auto cfg = ParseContextConfig(R"(# contexts
current-context = "node17"

[contexts.node17]
host = "node17:7443"   # the TLS endpoint
tls-ca = "ca.pem"
token-file = "/secrets/node17.token"
insecure = false

[contexts."lab box"]
socket = "/run/kerncap/kerncapd.sock"
)",
                                "config.toml", "/home/ann/.config/kerncap");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->current, "node17");
  ASSERT_EQ(cfg->contexts.size(), 2u);
  const Context* n = cfg->Find("node17");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->host, "node17:7443");
  EXPECT_EQ(n->tls_ca, "/home/ann/.config/kerncap/ca.pem");  // relative to the file
  EXPECT_EQ(n->token_file, "/secrets/node17.token");
  EXPECT_FALSE(n->insecure);
  EXPECT_EQ(cfg->Find("lab box")->socket, "/run/kerncap/kerncapd.sock");
}

TEST(ContextConfigTest, RoundTrips) {
  ContextConfig cfg;
  cfg.current = "b";
  cfg.contexts.push_back({"a", "h:1", "", "/ca \"x\".pem", "", "", "", true});
  cfg.contexts.push_back({"b", "", "/s.sock", "", "", "", "/t", false});
  auto back = ParseContextConfig(FormatContextConfig(cfg), "f", "/");
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << FormatContextConfig(cfg);
  EXPECT_EQ(back->current, "b");
  EXPECT_EQ(back->Find("a")->tls_ca, "/ca \"x\".pem");
  EXPECT_TRUE(back->Find("a")->insecure);
  EXPECT_EQ(back->Find("b")->token_file, "/t");
}

// Each error names the file and line, and what was expected.
TEST(ContextConfigTest, StrictErrors) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"[contexts.a]\nhots = \"x\"\n", "f:2: unknown key \"hots\" (context keys:"},
           {"host = \"x\"\n", "f:1: unknown key \"host\" at the top level"},
           {"[server]\n", "f:1: unknown table [server]"},
           {"[contexts.a]\nhost = x:1\n", "f:2: value of host: expected a \"quoted string\""},
           {"[contexts.a]\nhost = \"x:1\n", "f:2: string without its closing \""},
           {"[contexts.a]\ninsecure = \"yes\"\n", "f:2: insecure: expected true or false"},
           {"[contexts.a]\n[contexts.a]\n", "f:2: context \"a\" defined twice"},
           {"[contexts.a]\nhost = \"h:1\" extra\n", "f:2: unexpected text after the value"},
           {"current-context = \"gone\"\n", "f: current-context \"gone\" is not defined"},
           {"[contexts.a]\nhost = \"h:1\"\nsocket = \"/s\"\n", "has both host and socket"},
           {"[contexts.a b]\n", "f:1: context name \"a b\""},
       }) {
    auto cfg = ParseContextConfig(c.text, "f", "/");
    ASSERT_FALSE(cfg.ok()) << c.text;
    EXPECT_NE(cfg.status().message().find(c.message), std::string::npos)
        << cfg.status().message() << " vs " << c.message;
  }
}

TEST(ContextConfigTest, MissingFileIsEmptySavedFileIsPrivate) {
  std::string dir = ::testing::TempDir() + "/ctx_cfg_test";
  std::filesystem::remove_all(dir);
  auto empty = LoadContextConfig(dir + "/kerncap/config.toml");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->contexts.empty());
  ContextConfig cfg;
  cfg.contexts.push_back({"a", "h:1", "", "", "", "", "/tok", false});
  ASSERT_TRUE(SaveContextConfig(dir + "/kerncap/config.toml", cfg).ok());
  struct stat st;
  ASSERT_EQ(::stat((dir + "/kerncap/config.toml").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  auto back = LoadContextConfig(dir + "/kerncap/config.toml");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->Find("a")->token_file, "/tok");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kerncap::ctl
