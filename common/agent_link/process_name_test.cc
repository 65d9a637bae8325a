#include "common/agent_link/process_name.h"

#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kerncap::link {
namespace {

// The kernel cuts task names to 15 bytes: completed from the executable's
// or argv[0]'s file name when it starts with them.
TEST(ProcessNameTest, ATruncatedCommIsCompletedFromTheProgramsFileName) {
  EXPECT_EQ(CompleteProcessName("graph_decode_lo\n", {"/opt/app/bin/graph_decode_loop"}),
            "graph_decode_loop");
  // argv[0] when the executable is an interpreter or a loader.
  EXPECT_EQ(CompleteProcessName("inference_serve", {"/usr/bin/python3.12", "inference_server_main"}),
            "inference_server_main");
  // Short names and names set by the program itself are kept.
  EXPECT_EQ(CompleteProcessName("python3", {"/usr/bin/python3.12"}), "python3");
  EXPECT_EQ(CompleteProcessName("vllm-worker-012", {"/usr/bin/python3.12", "python3"}),
            "vllm-worker-012");
  // A name exactly 15 bytes long is not truncated: nothing longer starts with it.
  EXPECT_EQ(CompleteProcessName("exactly15bytes_", {"/bin/exactly15bytes_"}), "exactly15bytes_");
  EXPECT_EQ(CompleteProcessName("", {"/bin/x"}), "");
}

// This test binary's own name is longer than 15 bytes.
TEST(ProcessNameTest, ThisProcessHasItsFullName) {
  std::ifstream comm("/proc/self/comm");
  std::string c;
  std::getline(comm, c);
  ASSERT_EQ(c.size(), 15u) << c;  // agent_link_wire_test, cut by the kernel
  EXPECT_EQ(ProcessName(), "agent_link_wire_test");
}

// What kerncapd reads for the pid an agent socket's credentials name.
TEST(ProcessNameTest, AnotherProcessIsReadByPid) {
  EXPECT_EQ(ProcessNameOf(::getpid()), "agent_link_wire_test");
  const std::vector<std::string> argv = CommandLineOf(::getpid(), 64, 4096);
  ASSERT_FALSE(argv.empty());
  EXPECT_NE(argv[0].find("agent_link_wire_test"), std::string::npos) << argv[0];
  EXPECT_EQ(CommandLineOf(::getpid(), 1, 3).front().size(), 3u);
  // Gone: nothing, not an error.
  EXPECT_EQ(ProcessNameOf(0x7ffffff0), "");
  EXPECT_TRUE(CommandLineOf(0x7ffffff0, 64, 4096).empty());
}

}  // namespace
}  // namespace kerncap::link
