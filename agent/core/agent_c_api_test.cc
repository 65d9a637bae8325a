#include "agent/core/agent_c_api.h"

#include "gtest/gtest.h"

namespace kerncap::agent {
namespace {

TEST(AgentCApiTest, FillCaptureInfoCopiesEveryFigure) {
  LastCaptureFigures c;
  c.pre_bytes = 1;
  c.post_bytes = 2;
  c.regions = 3;
  c.ring_bytes = 4;
  c.quiesce_seconds = 0.5;
  c.pre_seconds = 1.5;
  c.post_seconds = 2.5;
  c.held_seconds = 3.5;
  kerncap_agent_capture_info_t out{};
  ASSERT_EQ(FillCaptureInfo(c, &out), 0);
  EXPECT_EQ(out.pre_bytes, 1u);
  EXPECT_EQ(out.post_bytes, 2u);
  EXPECT_EQ(out.regions, 3u);
  EXPECT_EQ(out.ring_bytes, 4u);
  EXPECT_EQ(out.quiesce_seconds, 0.5);
  EXPECT_EQ(out.pre_seconds, 1.5);
  EXPECT_EQ(out.post_seconds, 2.5);
  EXPECT_EQ(out.held_seconds, 3.5);
  EXPECT_EQ(FillCaptureInfo(c, nullptr), 1);
}

}  // namespace
}  // namespace kerncap::agent
