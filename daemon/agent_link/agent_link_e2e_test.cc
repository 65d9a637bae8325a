// Multi-process tests of the agent link: a forked child of an agent process,
// and the synthetic_agent binary against a real AgentLinkServer.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "agent/link/agent_link_client.h"
#include "agent/testing/synthetic_content.h"
#include "daemon/agent_link/agent_link_server.h"
#include "daemon/agent_link/agent_link_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kerncap::link::testing {
namespace {

TEST_F(AgentLinkTest, ForkedChildReconnectsAsNewAgent) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected());
  ArmKernel("k");
  ASSERT_TRUE(client.WaitArms(1, 5000));
  std::string parent_id = client.agent_id();
  std::fflush(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: the inherited state is reset; it reconnects with its own pid and
    // receives the active arm again.
    int rc = 0;
    if (client.connected()) rc |= 1;
    if (client.armed()) rc |= 2;
    if (!client.WaitConnected(0, 10000)) rc |= 4;
    if (client.agent_id() == parent_id) rc |= 8;
    if (!client.WaitArms(1, 10000)) rc |= 16;
    client.Stop();
    ::_exit(rc);
  }
  ASSERT_TRUE(WaitEvent([&](const v1::Event& e) {
    return e.has_agent_joined() && e.agent_joined().process().pid() == static_cast<uint32_t>(pid);
  }));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's link is untouched.
  EXPECT_TRUE(client.connected());
  EXPECT_EQ(client.agent_id(), parent_id);
  EXPECT_TRUE(client.ShouldCapture("k", "", 0).has_value());
}

TEST_F(AgentLinkTest, SyntheticAgentBinaryEndToEnd) {
  const char* build = std::getenv("KERNCAP_BUILD_DIR");
  if (build == nullptr) GTEST_SKIP() << "KERNCAP_BUILD_DIR not set (run through ctest)";
  std::string bin = std::string(build) + "/bin/synthetic_agent";
  if (::access(bin.c_str(), X_OK) != 0) GTEST_SKIP() << "synthetic_agent not built: " << bin;
  StartServer();
  v1::ArmRequest req;
  req.mutable_selector()->set_kernel("matmul");
  req.mutable_selector()->set_skip(1);
  req.mutable_selector()->set_count(2);
  ASSERT_TRUE(server_->Arm(req, RootCaller()).ok());
  std::string cmd = bin + " --socket=" + socket_ +
                    " --kernels=softmax,matmul --dispatches=8 --region-mib=0.5,0.1 --seed=11"
                    " --mutate --wait-arm-ms=5000";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::vector<nlohmann::json> lines;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), p) != nullptr) {
    lines.push_back(nlohmann::json::parse(buf, nullptr, false));
  }
  ASSERT_EQ(::pclose(p), 0);
  // matmul runs at dispatches 1,3,5,7: skip 1 -> captures at 3 and 5.
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["dispatch"], 3);
  EXPECT_EQ(lines[1]["dispatch"], 5);
  std::vector<RecordedCapture> caps = sink_.captures();
  ASSERT_EQ(caps.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(lines[i].contains("capture_id")) << lines[i].dump();
    const RecordedCapture& c = caps[i];
    ASSERT_TRUE(c.committed);
    EXPECT_EQ(c.manifest.capture_id(), lines[i]["capture_id"]);
    uint64_t d = lines[i]["dispatch"];
    ASSERT_EQ(c.regions.size(), 4u);
    uint64_t sizes[2] = {524288, 104858};
    for (uint32_t r = 0; r < 2; ++r) {
      EXPECT_TRUE(c.regions[r].bytes == agent::testing::SyntheticBytes(11, r, d, sizes[r]));
      EXPECT_TRUE(c.regions[2 + r].bytes ==
                  agent::testing::SyntheticBytes(11, r, d + 1, sizes[r]));
    }
    // --mutate changed some but not all of the pre image.
    EXPECT_FALSE(c.regions[0].bytes == c.regions[2].bytes);
  }
}

}  // namespace
}  // namespace kerncap::link::testing
