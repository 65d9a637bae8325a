#include "common/control/default_paths.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace kerncap::service {
namespace {

PathEnv User() {
  PathEnv env;
  env.euid = 1000;
  env.home = "/home/ada";
  return env;
}

TEST(DefaultPathsTest, RootUsesSystemLocations) {
  PathEnv env = User();
  env.euid = 0;
  env.xdg_runtime_dir = "/run/user/0";
  env.xdg_data_home = "/root/.data";
  EXPECT_EQ(DefaultSocketPath(env), "/run/kerncap/kerncapd.sock");
  EXPECT_EQ(DefaultStoreDir(env), "/var/lib/kerncap/store");
}

TEST(DefaultPathsTest, UserWithXdgDirs) {
  PathEnv env = User();
  env.xdg_runtime_dir = "/run/user/1000";
  env.xdg_data_home = "/data/ada";
  EXPECT_EQ(DefaultSocketPath(env), "/run/user/1000/kerncap/kerncapd.sock");
  EXPECT_EQ(DefaultStoreDir(env), "/data/ada/kerncap/store");
}

TEST(DefaultPathsTest, UserWithoutXdgFallsBack) {
  PathEnv env = User();
  EXPECT_EQ(DefaultSocketPath(env), "/tmp/kerncap-1000/kerncapd.sock");
  EXPECT_EQ(DefaultStoreDir(env), "/home/ada/.local/share/kerncap/store");
}

TEST(DefaultPathsTest, RelativeXdgValuesAreIgnored) {
  PathEnv env = User();
  env.xdg_runtime_dir = "run";
  env.xdg_data_home = "data";
  EXPECT_EQ(DefaultSocketPath(env), "/tmp/kerncap-1000/kerncapd.sock");
  EXPECT_EQ(DefaultStoreDir(env), "/home/ada/.local/share/kerncap/store");
}

TEST(DefaultPathsTest, ClientHonoursKerncapSocket) {
  PathEnv env = User();
  EXPECT_EQ(DefaultClientSocketPath(env), DefaultSocketPath(env));
  env.kerncap_socket = "/srv/k.sock";
  EXPECT_EQ(DefaultClientSocketPath(env), "/srv/k.sock");
}

// Which sockets "exist" in the next test.
std::set<std::string>* g_sockets = new std::set<std::string>;
bool FakeExists(const std::string& path) { return g_sockets->count(path) > 0; }

TEST(DefaultPathsTest, ClientFindsTheSystemDaemonWhenNoPerUserOneRuns) {
  PathEnv env = User();
  env.exists = &FakeExists;
  const std::string own = DefaultSocketPath(env);
  g_sockets->clear();
  EXPECT_EQ(DefaultClientSocketPath(env), own);  // neither runs: name the per-user one
  g_sockets->insert(kSystemSocketPath);
  EXPECT_EQ(DefaultClientSocketPath(env), kSystemSocketPath);
  g_sockets->insert(own);
  EXPECT_EQ(DefaultClientSocketPath(env), own);  // a per-user daemon wins
  env.kerncap_socket = "/srv/k.sock";
  EXPECT_EQ(DefaultClientSocketPath(env), "/srv/k.sock");  // and $KERNCAP_SOCKET beats both
  g_sockets->clear();
  g_sockets->insert(kSystemSocketPath);
  EXPECT_EQ(SocketAccessHint(kSystemSocketPath).find("group kerncap") != std::string::npos, true);
  EXPECT_EQ(SocketAccessHint(own), "");
}

TEST(DefaultPathsTest, ClientConfigFollowsXdg) {
  PathEnv env = User();
  env.home = "/home/ann";
  EXPECT_EQ(DefaultClientConfigPath(env), "/home/ann/.config/kerncap/config.toml");
  env.xdg_config_home = "relative/ignored";
  EXPECT_EQ(DefaultClientConfigPath(env), "/home/ann/.config/kerncap/config.toml");
  env.xdg_config_home = "/cfg";
  EXPECT_EQ(DefaultClientConfigPath(env), "/cfg/kerncap/config.toml");
  env.kerncap_config = "/etc/k.toml";
  EXPECT_EQ(DefaultClientConfigPath(env), "/etc/k.toml");
}

}  // namespace
}  // namespace kerncap::service
