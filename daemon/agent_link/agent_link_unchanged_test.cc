// ChunksUnchanged ("post_unchanged", messages.h): an agent that compared its
// post image against a device snapshot of the pre image sends only the
// changed chunks; the daemon takes the others from the pre image it holds.
#include <cstring>
#include <string>

#include "agent/link/agent_link_client.h"
#include "agent/testing/synthetic_content.h"
#include "daemon/agent_link/agent_link_server.h"
#include "daemon/agent_link/agent_link_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::link::testing {
namespace {

using ::testing::HasSubstr;

class UnchangedChunksTest : public AgentLinkTest {
 protected:
  // Pre image `pre`, then a post region at the same va where only chunk
  // `changed` is sent and the rest is declared unchanged (or, with
  // `lie_on_pre`, the unchanged declaration names the pre region).
  absl::StatusOr<std::string> Capture(agent::AgentLinkClient& client, const std::string& arm,
                                      const std::string& pre, const std::string& post,
                                      uint64_t changed, bool lie_on_pre = false) {
    CaptureBeginMsg begin;
    begin.arm_id = arm;
    begin.demangled_name = "k";
    begin.mangled_name = agent::testing::SyntheticMangled("k");
    begin.platform = Platform::kSynthetic;
    auto session = client.BeginCapture(begin, "");
    if (!session.ok()) return absl::UnavailableError(session.error());
    agent::CaptureSession& s = **session;
    if (!s.unchanged_supported()) return absl::FailedPreconditionError("no post_unchanged");
    RegionBeginMsg r;
    r.va = agent::testing::SyntheticVa(0);
    r.size = pre.size();
    r.image = ImageKind::kPre;
    auto hpre = s.AddRegion(r);
    if (!hpre.ok()) return absl::InternalError(hpre.error());
    if (!s.WriteRegion(*hpre, pre.data(), pre.size()).ok()) return absl::InternalError("pre");
    r.image = ImageKind::kPost;
    auto hpost = s.AddRegion(r);
    if (!hpost.ok()) return absl::InternalError(hpost.error());
    const uint64_t chunks = (post.size() + kChunk - 1) / kChunk;
    if (changed > 0) (void)s.MarkUnchanged(lie_on_pre ? *hpre : *hpost, 0, changed);
    // The daemon may fail the capture as soon as it reads the bad
    // declaration, so any later step can carry its reason, not only End.
    auto slot = s.AcquireSlot(5000);
    if (!slot.ok()) return absl::AbortedError(slot.error());
    const uint64_t n = std::min<uint64_t>(kChunk, post.size() - changed * kChunk);
    std::memcpy(slot->data, post.data() + changed * kChunk, n);
    LinkStatus submitted = s.SubmitSlot(*slot, *hpost, changed * kChunk, n);
    if (!submitted.ok()) return absl::AbortedError(submitted.message());
    if (changed + 1 < chunks) (void)s.MarkUnchanged(*hpost, changed + 1, chunks - changed - 1);
    link::CaptureTimingInfo timing;
    timing.path = CapturePath::kDeviceSnapshot;
    timing.held_seconds = 0.25;
    timing.unchanged_post_bytes = post.size() - n;
    s.SetTiming(timing);
    auto id = s.End();
    if (!id.ok()) return absl::AbortedError(id.error());
    return *id;
  }
};

TEST_F(UnchangedChunksTest, OnlyChangedChunksCrossAndTheDaemonFillsTheRestFromThePreImage) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  const std::string pre = agent::testing::SyntheticBytes(7, 0, 0, 4 * kChunk + 123);
  std::string post = pre;
  post[2 * kChunk + 9] ^= 0x11;
  auto id = Capture(client, ArmKernel("k").arm_id(), pre, post, /*changed=*/2);
  ASSERT_TRUE(id.ok()) << id.status();
  std::vector<RecordedCapture> caps = sink_.captures();
  ASSERT_EQ(caps.size(), 1u);
  ASSERT_TRUE(caps[0].committed);
  ASSERT_EQ(caps[0].regions.size(), 2u);
  EXPECT_EQ(caps[0].regions[0].bytes, pre);
  EXPECT_EQ(caps[0].regions[1].bytes, post);
  const v1::CaptureTiming& t = caps[0].manifest.agent_timing();
  EXPECT_EQ(t.path(), "device_snapshot");
  EXPECT_DOUBLE_EQ(t.held_seconds(), 0.25);
  EXPECT_EQ(t.unchanged_post_bytes(), post.size() - kChunk);
}

TEST_F(UnchangedChunksTest, UnchangedChunksOfAPreRegionFailTheCaptureOnly) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  const std::string pre = agent::testing::SyntheticBytes(8, 0, 0, 3 * kChunk);
  auto id = Capture(client, ArmKernel("k").arm_id(), pre, pre, 1, /*lie_on_pre=*/true);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("unchanged chunks of region 0"));
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("not a post region"));
  // The agent stays connected and its next capture works.
  auto again = Capture(client, ArmKernel("k").arm_id(), pre, pre, 1);
  ASSERT_TRUE(again.ok()) << again.status();
}

TEST_F(UnchangedChunksTest, ChunksUnchangedWithoutTheFeatureDropsTheAgent) {
  StartServer();
  RawAgent raw = RawAgent::Connect(socket_);  // its Hello lists no features
  EXPECT_FALSE(HasFeature(raw.welcome.features, kFeaturePostUnchanged));
  raw.Begin(1, 2 * kChunk, ArmKernel("raw_kernel").arm_id());
  ChunksUnchangedMsg m;
  m.token = 1;
  m.region = 0;
  m.chunk_count = 1;
  ASSERT_TRUE(SendMessage(raw.fd.get(), m).ok());
  std::string error;
  EXPECT_TRUE(raw.Dropped(&error));
  EXPECT_THAT(error, HasSubstr("did not announce post_unchanged"));
}

}  // namespace
}  // namespace kerncap::link::testing
