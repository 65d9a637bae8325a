// The kernel census (feature "kernel_census") and the launcher rank in the
// Hello, on the agent's side: KernelsReportPage's pages and bounds, and an
// AgentLinkClient answering a KernelsRequest from a minimal stand-in daemon
// speaking the real frames (agent/testing/standin_daemon.h).
#include "agent/link/kernel_census.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent/link/agent_link_client.h"
#include "agent/link/link_client_test_fixture.h"
#include "agent/testing/standin_daemon.h"
#include "common/agent_link/messages.h"
#include "common/agent_link/wire.h"
#include "gtest/gtest.h"

namespace kerncap::agent {
namespace {

link::LoadedKernelInfo K(std::string mangled, std::string module = "cuda-module-1") {
  link::LoadedKernelInfo k;
  k.mangled_name = std::move(mangled);
  k.demangled_name = k.mangled_name;
  k.module = std::move(module);
  return k;
}

link::KernelsRequestMsg Page(uint64_t offset, uint64_t id = 9) {
  link::KernelsRequestMsg r;
  r.request_id = id;
  r.offset = offset;
  return r;
}

TEST(KernelCensusTest, ReportKeepsOrderAndDropsDuplicates) {
  link::KernelsReportMsg r =
      KernelsReportPage(Page(0), {K("_Z1av"), K("_Z1bv"), K("_Z1av"), K("_Z1av", "cuda-module-2")});
  EXPECT_EQ(r.request_id, 9u);
  ASSERT_EQ(r.kernels.size(), 3u);
  EXPECT_EQ(r.kernels[0].mangled_name, "_Z1av");
  EXPECT_EQ(r.kernels[1].mangled_name, "_Z1bv");
  EXPECT_EQ(r.kernels[2].module, "cuda-module-2");
  EXPECT_EQ(r.total, 3u);
  EXPECT_EQ(r.next_offset, 0u) << "one page holds them all";
  EXPECT_EQ(r.left_out, 0u);
}

TEST(KernelCensusTest, OversizedAndNonAsciiNamesAreLeftOutAndCounted) {
  link::KernelsReportMsg r = KernelsReportPage(
      Page(0), {K(std::string(link::kMaxKernelNameBytes + 1, 'k')), K("bad\xff" "name"), K("ok"),
                K("")});
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels[0].mangled_name, "ok");
  EXPECT_EQ(r.left_out, 3u);
  EXPECT_NO_THROW(link::EncodeBody(r));
}

TEST(KernelCensusTest, PagesCoverTheWholeListWithinTheBounds) {
  // Many kernels with long names (a PyTorch-sized library): several pages,
  // each under the body bound, together the whole list once, in order.
  std::vector<link::LoadedKernelInfo> all;
  for (int i = 0; i < 30000; ++i) {
    all.push_back(K("_Z" + std::to_string(i) + std::string(i % 3 == 0 ? 300 : 20, 'n') + "\"q"));
  }
  uint64_t offset = 0;
  size_t pages = 0, seen = 0;
  do {
    link::KernelsReportMsg r = KernelsReportPage(Page(offset), all);
    ASSERT_FALSE(r.kernels.empty());
    EXPECT_LE(r.kernels.size(), link::kMaxReportedKernels);
    EXPECT_LE(link::EncodeBody(r).size(), link::kMaxKernelsReportBytes);
    EXPECT_EQ(r.total, all.size());
    EXPECT_EQ(r.kernels[0].mangled_name, all[seen].mangled_name);
    seen += r.kernels.size();
    offset = r.next_offset;
    ++pages;
  } while (offset != 0 && pages < 100);
  EXPECT_EQ(seen, all.size());
  EXPECT_GT(pages, 2u);
  // Past the end: an empty last page.
  link::KernelsReportMsg past = KernelsReportPage(Page(all.size() + 5), all);
  EXPECT_TRUE(past.kernels.empty());
  EXPECT_EQ(past.next_offset, 0u);
}

class KernelCensusLinkTest : public StandInLinkTest {};

TEST_F(KernelCensusLinkTest, AgentAnswersWithItsLoadedKernelsAndSendsItsRank) {
  testing::StandInDaemon daemon(Socket());
  ASSERT_TRUE(daemon.listening());
  ::setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  AgentLinkClientOptions o = Options();
  int calls = 0;
  o.list_kernels = [&calls] {
    ++calls;
    return std::vector<link::LoadedKernelInfo>{K("_Z6matmulPfS_"), K("_Z6matmulPfS_"),
                                               K("softmax", "cuda-module-7")};
  };
  AgentLinkClient client(o);
  client.Start();
  link::HelloMsg hello;
  ASSERT_TRUE(daemon.Handshake(&hello, {link::kFeatureLazyRing, link::kFeatureKernelCensus}));
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_NE(std::find(hello.features.begin(), hello.features.end(), link::kFeatureKernelCensus),
            hello.features.end());
  EXPECT_EQ(hello.rank.rank, 3);
  EXPECT_EQ(hello.rank.local_rank, 1);
  EXPECT_EQ(hello.rank.world_size, 4);
  EXPECT_EQ(hello.rank.source, "OMPI_COMM_WORLD_RANK");

  link::KernelsRequestMsg req;
  req.request_id = 42;
  auto reply = daemon.Ask(req);
  ASSERT_TRUE(reply.ok()) << reply.error();
  ASSERT_EQ(reply->type, link::MessageType::kKernelsReport);
  link::KernelsReportMsg report;
  ASSERT_TRUE(link::DecodeBody(*reply, &report).ok());
  EXPECT_EQ(report.request_id, 42u);
  ASSERT_EQ(report.kernels.size(), 2u);
  EXPECT_EQ(report.kernels[0].mangled_name, "_Z6matmulPfS_");
  EXPECT_EQ(report.kernels[1].module, "cuda-module-7");
  EXPECT_EQ(report.total, 2u);
  EXPECT_EQ(report.next_offset, 0u);
  EXPECT_EQ(calls, 1);
  client.Stop();
}

TEST_F(KernelCensusLinkTest, WithoutAKernelListTheFeatureIsNotOffered) {
  testing::StandInDaemon daemon(Socket());
  ASSERT_TRUE(daemon.listening());
  AgentLinkClient client(Options());
  client.Start();
  link::HelloMsg hello;
  ASSERT_TRUE(daemon.Handshake(&hello, {link::kFeatureLazyRing, link::kFeatureKernelCensus}));
  EXPECT_EQ(std::find(hello.features.begin(), hello.features.end(), link::kFeatureKernelCensus),
            hello.features.end());
  // A daemon that asks anyway breaks the protocol: the agent says so and drops the link.
  link::KernelsRequestMsg req;
  auto reply = daemon.Ask(req);
  ASSERT_TRUE(reply.ok()) << reply.error();
  ASSERT_EQ(reply->type, link::MessageType::kError);
  link::ErrorMsg err;
  ASSERT_TRUE(link::DecodeBody(*reply, &err).ok());
  EXPECT_NE(err.message.find("kernel_census"), std::string::npos) << err.message;
  client.Stop();
}

}  // namespace
}  // namespace kerncap::agent
