// "chunk_fingerprints" (messages.h): a later capture names chunks kerncapd
// holds from the same connection's earlier captures by their fingerprint
// instead of sending them; kerncapd resolves a fingerprint only to digests
// it computed itself for bytes this connection sent.
#include <cstring>
#include <string>
#include <vector>

#include "agent/link/agent_link_client.h"
#include "agent/testing/synthetic_content.h"
#include "common/agent_link/chunk_fingerprint.h"
#include "daemon/agent_link/agent_link_server.h"
#include "daemon/agent_link/agent_link_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::link::testing {
namespace {

using ::testing::HasSubstr;

class FingerprintTest : public AgentLinkTest {
 protected:
  struct Outcome {
    absl::StatusOr<std::string> id = absl::UnknownError("not run");
    std::vector<uint8_t> held;  // the daemon's answer for the pre image's chunks
    uint64_t sent = 0;          // bytes sent through the ring
  };
  // One pre region of `pre`: asks which chunks the daemon holds, names
  // those (or, with `claim_all`, every chunk) by fingerprint and sends the
  // others with their fingerprints.
  Outcome Capture(agent::AgentLinkClient& client, const std::string& arm, const std::string& pre,
                  bool claim_all = false) {
    Outcome out;
    CaptureBeginMsg begin;
    begin.arm_id = arm;
    begin.demangled_name = "k";
    begin.mangled_name = agent::testing::SyntheticMangled("k");
    begin.platform = Platform::kSynthetic;
    auto session = client.BeginCapture(begin, "");
    if (!session.ok()) {
      out.id = absl::UnavailableError(session.error());
      return out;
    }
    agent::CaptureSession& s = **session;
    if (!s.fingerprints_supported()) {
      out.id = absl::FailedPreconditionError("no chunk_fingerprints");
      return out;
    }
    RegionBeginMsg r;
    r.va = agent::testing::SyntheticVa(0);
    r.size = pre.size();
    r.image = ImageKind::kPre;
    auto h = s.AddRegion(r);
    if (!h.ok()) {
      out.id = absl::InternalError(h.error());
      return out;
    }
    std::vector<ChunkFingerprint> fps = FingerprintChunks(pre.data(), pre.size(), kChunk);
    auto held = s.QueryKnown(fps);
    if (!held.ok()) {
      out.id = absl::InternalError(held.error());
      return out;
    }
    out.held = *held;
    for (uint64_t c = 0; c < fps.size(); ++c) {
      if (out.held[c] || claim_all) {
        (void)s.MarkKnown(*h, c, {fps[c]});
        continue;
      }
      auto slot = s.AcquireSlot(5000);
      if (!slot.ok()) {
        out.id = absl::InternalError(slot.error());
        return out;
      }
      const uint64_t n = std::min<uint64_t>(kChunk, pre.size() - c * kChunk);
      std::memcpy(slot->data, pre.data() + c * kChunk, n);
      if (!s.SubmitSlot(*slot, *h, c * kChunk, n).ok()) break;
      (void)s.TellFingerprints(*h, c, {fps[c]});
      out.sent += n;
    }
    auto id = s.End();
    out.id = id.ok() ? absl::StatusOr<std::string>(*id) : absl::AbortedError(id.error());
    return out;
  }
};

TEST_F(FingerprintTest, ASecondCaptureSendsOnlyWhatChanged) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  std::string pre = agent::testing::SyntheticBytes(3, 0, 0, 5 * kChunk + 77);
  Outcome first = Capture(client, ArmKernel("k").arm_id(), pre);
  ASSERT_TRUE(first.id.ok()) << first.id.status();
  EXPECT_EQ(first.held, std::vector<uint8_t>(6, 0));
  EXPECT_EQ(first.sent, pre.size());
  // The dispatch wrote into chunk 2 and the short last chunk.
  pre[2 * kChunk + 5] ^= 0x40;
  pre[5 * kChunk + 3] ^= 0x01;
  Outcome second = Capture(client, ArmKernel("k").arm_id(), pre);
  ASSERT_TRUE(second.id.ok()) << second.id.status();
  EXPECT_EQ(second.held, (std::vector<uint8_t>{1, 1, 0, 1, 1, 0}));
  EXPECT_EQ(second.sent, kChunk + 77);
  std::vector<RecordedCapture> caps = sink_.captures();
  ASSERT_EQ(caps.size(), 2u);
  ASSERT_TRUE(caps[1].committed);
  EXPECT_EQ(caps[1].regions[0].bytes, pre);  // what the daemon filled in is the real content
  EXPECT_EQ(caps[1].regions[0].known, 4 * kChunk);
  EXPECT_EQ(caps[1].manifest.agent_timing().known_bytes(), 4 * kChunk);
  // A third capture of the same bytes sends nothing.
  Outcome third = Capture(client, ArmKernel("k").arm_id(), pre);
  ASSERT_TRUE(third.id.ok()) << third.id.status();
  EXPECT_EQ(third.sent, 0u);
  EXPECT_EQ(sink_.captures()[2].regions[0].bytes, pre);
}

TEST_F(FingerprintTest, AnotherConnectionCannotNameThoseChunks) {
  StartServer();
  agent::AgentLinkClient& a = NewClient();
  ASSERT_TRUE(a.connected()) << a.last_error();
  const std::string secret = agent::testing::SyntheticBytes(9, 0, 0, 2 * kChunk);
  ASSERT_TRUE(Capture(a, ArmKernel("k").arm_id(), secret).id.ok());
  agent::AgentLinkClient& b = NewClient();
  ASSERT_TRUE(b.connected()) << b.last_error();
  // b knows the bytes' fingerprints (it has the same data) but the daemon
  // resolves them only for a's connection.
  Outcome probe = Capture(b, ArmKernel("k").arm_id(), secret, /*claim_all=*/true);
  EXPECT_EQ(probe.held, std::vector<uint8_t>(2, 0));
  ASSERT_FALSE(probe.id.ok());
  EXPECT_THAT(std::string(probe.id.status().message()),
              HasSubstr("fingerprint kerncapd does not hold for this agent"));
  // b stays connected and an honest capture of it works.
  Outcome honest = Capture(b, ArmKernel("k").arm_id(), secret);
  EXPECT_TRUE(honest.id.ok()) << honest.id.status();
  EXPECT_EQ(honest.sent, secret.size());
}

TEST_F(FingerprintTest, NamingAChunkTheDaemonDoesNotHoldFailsTheCaptureOnly) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  const std::string pre = agent::testing::SyntheticBytes(4, 0, 0, 3 * kChunk);
  Outcome lie = Capture(client, ArmKernel("k").arm_id(), pre, /*claim_all=*/true);
  ASSERT_FALSE(lie.id.ok());
  EXPECT_THAT(std::string(lie.id.status().message()), HasSubstr("region 0 chunk 0"));
  std::vector<RecordedCapture> caps = sink_.captures();
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_FALSE(caps[0].committed);
  // Nothing of the failed capture was remembered: the next one sends all.
  Outcome next = Capture(client, ArmKernel("k").arm_id(), pre);
  ASSERT_TRUE(next.id.ok()) << next.id.status();
  EXPECT_EQ(next.sent, pre.size());
}

TEST_F(FingerprintTest, AKnownChunkOfAnotherLengthIsRefused) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  // A short chunk is remembered with its length; naming it for a whole
  // chunk's place fails.
  const std::string small = agent::testing::SyntheticBytes(5, 0, 0, 100);
  ASSERT_TRUE(Capture(client, ArmKernel("k").arm_id(), small).id.ok());
  CaptureBeginMsg begin;
  begin.arm_id = ArmKernel("k").arm_id();
  begin.demangled_name = "k";
  begin.platform = Platform::kSynthetic;
  auto session = client.BeginCapture(begin, "");
  ASSERT_TRUE(session.ok()) << session.error();
  RegionBeginMsg r;
  r.va = agent::testing::SyntheticVa(1);
  r.size = 2 * kChunk;
  r.image = ImageKind::kPre;
  auto h = (*session)->AddRegion(r);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE((*session)->MarkKnown(*h, 0, {FingerprintChunk(small.data(), small.size())}).ok());
  auto id = (*session)->End();
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.error(), HasSubstr("for a chunk of that length"));
}

TEST_F(FingerprintTest, MalformedOrUnannouncedFingerprintFramesDropTheAgent) {
  StartServer();
  {
    RawAgent raw = RawAgent::Connect(socket_);  // announces nothing
    EXPECT_FALSE(HasFeature(raw.welcome.features, kFeatureChunkFingerprints));
    raw.Begin(1, 2 * kChunk, ArmKernel("raw_kernel").arm_id());
    KnownChunksQueryMsg q;
    q.token = 1;
    q.query_id = 1;
    ASSERT_TRUE(SendMessage(raw.fd.get(), q, std::string(16, 'x')).ok());
    std::string error;
    EXPECT_TRUE(raw.Dropped(&error));
    EXPECT_THAT(error, HasSubstr("did not announce chunk_fingerprints"));
  }
  {
    RawAgent raw = RawAgent::Connect(socket_, true,
                                     {kFeaturePostUnchanged, kFeatureChunkFingerprints});
    EXPECT_TRUE(HasFeature(raw.welcome.features, kFeatureChunkFingerprints));
    raw.Begin(1, 2 * kChunk, ArmKernel("raw_kernel").arm_id());
    ChunksKnownMsg m;
    m.token = 1;
    m.region = 0;
    m.chunk_count = 1;
    ASSERT_TRUE(SendMessage(raw.fd.get(), m, std::string(15, 'x')).ok());
    std::string error;
    EXPECT_TRUE(raw.Dropped(&error));
    EXPECT_THAT(error, HasSubstr("not a whole number of fingerprints"));
  }
  {
    RawAgent raw = RawAgent::Connect(socket_, true,
                                     {kFeaturePostUnchanged, kFeatureChunkFingerprints});
    raw.Begin(1, 2 * kChunk, ArmKernel("raw_kernel").arm_id());
    ChunkFingerprintsMsg m;
    m.token = 1;
    m.region = 0;
    m.first_chunk = 1;
    m.chunk_count = 2;  // past the region's two chunks
    ASSERT_TRUE(SendMessage(raw.fd.get(), m, std::string(32, 'x')).ok());
    std::string error;
    EXPECT_TRUE(raw.Dropped(&error));
    EXPECT_THAT(error, HasSubstr("outside region 0"));
  }
}

TEST_F(FingerprintTest, TheQueryAnswersOneBytePerFingerprintAndIsBounded) {
  StartServer();
  RawAgent raw = RawAgent::Connect(socket_, true,
                                   {kFeaturePostUnchanged, kFeatureChunkFingerprints});
  raw.Begin(1, 2 * kChunk, ArmKernel("raw_kernel").arm_id());
  KnownChunksQueryMsg q;
  q.token = 1;
  q.query_id = 7;
  ASSERT_TRUE(SendMessage(raw.fd.get(), q, std::string(3 * 16, 'x')).ok());
  bool answered = false;
  for (int i = 0; i < 20 && !answered; ++i) {
    LinkResult<Frame> f = RecvFrame(raw.fd.get(), FrameLimits());
    ASSERT_TRUE(f.ok()) << f.error();
    if (f->type != MessageType::kKnownChunksAnswer) continue;
    KnownChunksAnswerMsg a;
    ASSERT_TRUE(DecodeBody(*f, &a).ok());
    EXPECT_EQ(a.query_id, 7u);
    EXPECT_EQ(f->payload, std::string(3, '\0'));
    answered = true;
  }
  EXPECT_TRUE(answered);
  q.query_id = 8;
  // The daemon drops us at the header, so the send itself may fail midway.
  (void)SendMessage(raw.fd.get(), q, std::string((kMaxFingerprintsPerFrame + 1) * 16, 'x'));
  std::string error;
  EXPECT_TRUE(raw.Dropped(&error));
  EXPECT_THAT(error, HasSubstr("more than"));
}

}  // namespace
}  // namespace kerncap::link::testing
