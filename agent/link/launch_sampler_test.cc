// Launch sampling (feature "launch_sample") on the agent's side: the
// sampler's counts, bounds and deadline, and an AgentLinkClient starting and
// stopping a sample for a stand-in daemon speaking the real frames.
#include "agent/link/launch_sampler.h"


#include <algorithm>
#include <string>
#include <vector>

#include "agent/link/agent_link_client.h"
#include "agent/link/link_client_test_fixture.h"
#include "agent/testing/standin_daemon.h"
#include "common/agent_link/messages.h"
#include "gtest/gtest.h"

namespace kerncap::agent {
namespace {

using Clock = LaunchSampler::Clock;

link::SampledConfig Config(uint32_t grid_x, uint32_t block_x = 256, uint32_t smem = 0) {
  link::SampledConfig c;
  c.grid = {grid_x, 1, 1};
  c.block = {block_x, 1, 1};
  c.shared_mem_bytes = smem;
  return c;
}

TEST(LaunchSamplerTest, CountsLaunchesConfigurationsAndArgumentShapesPerKernel) {
  std::vector<bool> holds;
  LaunchSampler s([&](bool on) { holds.push_back(on); });
  EXPECT_FALSE(s.active());
  const Clock::time_point t0 = Clock::now();
  s.Record("_Z1av", "a()", Config(1), 1, t0);  // before the sample: not counted
  s.Start(7, std::chrono::seconds(5), t0);
  EXPECT_TRUE(s.active());
  for (int i = 0; i < 5; ++i) s.Record("_Z1av", "a()", Config(64), 11, t0);
  for (int i = 0; i < 3; ++i) s.Record("_Z1av", "a()", Config(128), 12 + i, t0);
  s.Record("_Z1bv", "b()", Config(1, 32, 4096), std::nullopt, t0);
  s.Record("", "", Config(1), std::nullopt, t0);
  s.Record("bad\x01name", "bad", Config(1), std::nullopt, t0);
  s.RecordGraphLaunch(t0);
  link::SampleReportMsg r = s.Stop(7, t0 + std::chrono::seconds(2));
  EXPECT_FALSE(s.active());
  EXPECT_EQ(holds, (std::vector<bool>{true, false}));
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.sample_id, 7u);
  EXPECT_DOUBLE_EQ(r.seconds, 2.0);
  EXPECT_EQ(r.unattributed_launches, 2u);
  EXPECT_EQ(r.graph_launches, 1u);
  ASSERT_EQ(r.kernels.size(), 2u);
  EXPECT_EQ(r.kernels[0].mangled_name, "_Z1av");  // the most launched first
  EXPECT_EQ(r.kernels[0].demangled_name, "a()");
  EXPECT_EQ(r.kernels[0].launches, 8u);
  ASSERT_EQ(r.kernels[0].configs.size(), 2u);
  EXPECT_EQ(r.kernels[0].configs[0].grid[0], 64u);
  EXPECT_EQ(r.kernels[0].configs[0].launches, 5u);
  EXPECT_EQ(r.kernels[0].configs[1].launches, 3u);
  EXPECT_EQ(r.kernels[0].argument_shapes, 4u);  // 11, 12, 13, 14
  EXPECT_EQ(r.kernels[1].launches, 1u);
  EXPECT_EQ(r.kernels[1].configs[0].shared_mem_bytes, 4096u);
  EXPECT_EQ(r.kernels[1].argument_shapes, 0u);
  // Nothing is counted once stopped; a second stop is an error.
  s.Record("_Z1av", "a()", Config(64), 11, t0);
  EXPECT_FALSE(s.Stop(7, t0).error.empty());
}

TEST(LaunchSamplerTest, ConfigurationsArgumentShapesAndKernelsAreBounded) {
  LaunchSampler s;
  const Clock::time_point t0 = Clock::now();
  s.Start(1, std::chrono::seconds(5), t0);
  const uint32_t configs = link::kMaxSampledConfigsPerKernel + 3;
  for (uint32_t g = 1; g <= configs; ++g) s.Record("_Z1kv", "k()", Config(g), g, t0);
  for (uint32_t i = 0; i < link::kMaxArgumentShapesCounted + 10; ++i) {
    s.Record("_Z1kv", "k()", Config(1), 1000 + i, t0);
  }
  for (size_t i = 0; i < link::kMaxSampledKernels + 5; ++i) {
    const std::string name = "_Z" + std::to_string(i);
    s.Record(name, name, Config(1), std::nullopt, t0);
  }
  link::SampleReportMsg r = s.Stop(1, t0);
  ASSERT_FALSE(r.kernels.empty());
  const link::SampledKernel& k = r.kernels[0];
  EXPECT_EQ(k.mangled_name, "_Z1kv");
  EXPECT_EQ(k.configs.size(), link::kMaxSampledConfigsPerKernel);
  EXPECT_EQ(k.other_config_launches, 3u);
  EXPECT_TRUE(k.argument_shapes_capped);
  EXPECT_EQ(k.argument_shapes, link::kMaxArgumentShapesCounted);
  // Kernels past the bound (in memory or in the body) are counted, never sent.
  EXPECT_LE(r.kernels.size(), link::kMaxSampledKernels);
  EXPECT_EQ(r.kernels.size() + r.kernels_left_out, link::kMaxSampledKernels + 6);
  EXPECT_LT(link::EncodeBody(r).size(), link::kMaxSampleReportBytes + 1024);
}

TEST(LaunchSamplerTest, LongNamesKeepTheBodyUnderItsBound) {
  LaunchSampler s;
  const Clock::time_point t0 = Clock::now();
  s.Start(1, std::chrono::seconds(5), t0);
  for (int i = 0; i < 40; ++i) {
    std::string name(60000, 'a' + (i % 26));
    name += std::to_string(i);
    s.Record(name, name, Config(1), std::nullopt, t0);
  }
  link::SampleReportMsg r = s.Stop(1, t0);
  EXPECT_GT(r.kernels_left_out, 0u);
  EXPECT_EQ(r.kernels.size() + r.kernels_left_out, 40u);
  EXPECT_LE(link::EncodeBody(r).size(), link::kMaxSampleReportBytes);
}

TEST(LaunchSamplerTest, StopsCountingAtItsDeadlineAndAbortReleasesTheHold) {
  int held = 0;
  LaunchSampler s([&](bool on) { held += on ? 1 : -1; });
  const Clock::time_point t0 = Clock::now();
  s.Start(3, std::chrono::milliseconds(100), t0);
  EXPECT_EQ(held, 1);
  s.Record("_Z1av", "a()", Config(1), std::nullopt, t0 + std::chrono::milliseconds(50));
  s.Record("_Z1av", "a()", Config(1), std::nullopt, t0 + std::chrono::milliseconds(150));
  // A restart while one runs replaces it without a second hold.
  s.Start(4, std::chrono::hours(10), t0);
  EXPECT_EQ(held, 1);
  EXPECT_FALSE(s.Stop(3, t0).error.empty()) << "not the running sample";
  s.Abort();
  EXPECT_EQ(held, 0);
  EXPECT_FALSE(s.active());
  s.Abort();
  EXPECT_EQ(held, 0) << "released once";

  s.Start(5, std::chrono::milliseconds(100), t0);
  s.Record("_Z1av", "a()", Config(1), std::nullopt, t0 + std::chrono::milliseconds(50));
  s.Record("_Z1av", "a()", Config(1), std::nullopt, t0 + std::chrono::milliseconds(150));
  link::SampleReportMsg r = s.Stop(5, t0 + std::chrono::seconds(9));
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(r.kernels[0].launches, 1u) << "the launch after the deadline is not counted";
  EXPECT_NEAR(r.seconds, 0.1, 1e-9) << "counted until the deadline";
}

class LaunchSampleLinkTest : public StandInLinkTest {};

TEST_F(LaunchSampleLinkTest, TheDaemonStartsAndStopsASampleAndGetsItsReport) {
  testing::StandInDaemon daemon(Socket());
  ASSERT_TRUE(daemon.listening());
  int held = 0;
  LaunchSampler sampler([&](bool on) { held += on ? 1 : -1; });
  AgentLinkClientOptions o = Options();
  o.launch_sampler = &sampler;
  AgentLinkClient client(o);
  client.Start();
  link::HelloMsg hello;
  ASSERT_TRUE(daemon.Handshake(&hello, {link::kFeatureLazyRing, link::kFeatureLaunchSample}));
  EXPECT_NE(std::find(hello.features.begin(), hello.features.end(), link::kFeatureLaunchSample),
            hello.features.end());
  link::SampleStartMsg start;
  start.sample_id = 5;
  start.duration_ms = 60000;
  ASSERT_TRUE(daemon.Tell(start).ok());
  ASSERT_TRUE(WaitUntil([&] { return sampler.active(); }));
  EXPECT_EQ(held, 1);
  sampler.Record("_Z6matmulv", "matmul()", Config(4), 9);
  sampler.Record("_Z6matmulv", "matmul()", Config(4), 9);
  link::SampleStopMsg stop;
  stop.sample_id = 5;
  auto reply = daemon.Ask(stop);
  ASSERT_TRUE(reply.ok()) << reply.error();
  ASSERT_EQ(reply->type, link::MessageType::kSampleReport);
  link::SampleReportMsg report;
  ASSERT_TRUE(link::DecodeBody(*reply, &report).ok());
  EXPECT_EQ(report.sample_id, 5u);
  EXPECT_TRUE(report.error.empty()) << report.error;
  ASSERT_EQ(report.kernels.size(), 1u);
  EXPECT_EQ(report.kernels[0].launches, 2u);
  EXPECT_EQ(report.kernels[0].argument_shapes, 1u);
  EXPECT_EQ(held, 0);
  // A stop with nothing running is answered with an error, not dropped.
  reply = daemon.Ask(stop);
  ASSERT_TRUE(reply.ok()) << reply.error();
  ASSERT_TRUE(link::DecodeBody(*reply, &report).ok());
  EXPECT_FALSE(report.error.empty());
  // A sample still running when the link drops ends with it.
  start.sample_id = 6;
  ASSERT_TRUE(daemon.Tell(start).ok());
  ASSERT_TRUE(WaitUntil([&] { return sampler.active(); }));
  client.Stop();
  EXPECT_FALSE(sampler.active());
  EXPECT_EQ(held, 0);
}

TEST_F(LaunchSampleLinkTest, WithoutASamplerTheFeatureIsNotOfferedAndAStartBreaksTheLink) {
  testing::StandInDaemon daemon(Socket());
  ASSERT_TRUE(daemon.listening());
  AgentLinkClient client(Options());
  client.Start();
  link::HelloMsg hello;
  ASSERT_TRUE(daemon.Handshake(&hello, {link::kFeatureLazyRing, link::kFeatureLaunchSample}));
  EXPECT_EQ(std::find(hello.features.begin(), hello.features.end(), link::kFeatureLaunchSample),
            hello.features.end());
  link::SampleStartMsg start;
  start.sample_id = 1;
  auto reply = daemon.Ask(start);
  ASSERT_TRUE(reply.ok()) << reply.error();
  ASSERT_EQ(reply->type, link::MessageType::kError);
  link::ErrorMsg err;
  ASSERT_TRUE(link::DecodeBody(*reply, &err).ok());
  EXPECT_NE(err.message.find("launch_sample"), std::string::npos) << err.message;
  client.Stop();
}

}  // namespace
}  // namespace kerncap::agent
