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
#include "daemon/agent_link/remembered_chunks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::link::testing {
namespace {

using ::testing::HasSubstr;

// Bytes with no zero chunk (synthetic content is a quarter zero blocks).
std::string NonZeroBytes(uint64_t seed, uint64_t size) {
  std::string out = agent::testing::SyntheticBytes(seed, 0, 0, size);
  for (size_t i = 0; i < out.size(); i += 4096) out[i] |= 1;
  return out;
}

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
  // The begin message of a synthetic capture of kernel "k" for `arm`.
  static CaptureBeginMsg BeginOfK(const std::string& arm) {
    CaptureBeginMsg begin;
    begin.arm_id = arm;
    begin.demangled_name = "k";
    begin.mangled_name = agent::testing::SyntheticMangled("k");
    begin.platform = Platform::kSynthetic;
    return begin;
  }

  Outcome Capture(agent::AgentLinkClient& client, const std::string& arm, const std::string& pre,
                  bool claim_all = false) {
    Outcome out;
    auto session = client.BeginCapture(BeginOfK(arm), "");
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

  // A capture of one pre region of `region_bytes` whose chunk `index` the
  // agent names by `fp` (and sends nothing else): End()'s error, "" if none.
  std::string NameOneChunk(agent::AgentLinkClient& client, uint64_t region_bytes, uint64_t index,
                           const ChunkFingerprint& fp) {
    auto session = client.BeginCapture(BeginOfK(ArmKernel("k").arm_id()), "");
    if (!session.ok()) return "begin: " + session.error();
    RegionBeginMsg r;
    r.va = agent::testing::SyntheticVa(1);
    r.size = region_bytes;
    r.image = ImageKind::kPre;
    auto h = (*session)->AddRegion(r);
    if (!h.ok()) return "region: " + h.error();
    if (!(*session)->MarkKnown(*h, index, {fp}).ok()) return "MarkKnown failed";
    auto id = (*session)->End();
    return id.ok() ? "" : id.error();
  }
};

TEST_F(FingerprintTest, ASecondCaptureSendsOnlyWhatChanged) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  std::string pre = NonZeroBytes(3, 5 * kChunk + 77);
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
  const std::string secret = NonZeroBytes(9, 2 * kChunk);
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
  const std::string pre = NonZeroBytes(4, 3 * kChunk);
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
  const std::string small = NonZeroBytes(5, 100);
  ASSERT_TRUE(Capture(client, ArmKernel("k").arm_id(), small).id.ok());
  EXPECT_THAT(NameOneChunk(client, 2 * kChunk, 0, FingerprintChunk(small.data(), small.size())),
              HasSubstr("for a chunk of that length"));
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

TEST_F(FingerprintTest, ZeroChunksAreNamedFromTheFirstCaptureOn) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  // Chunks 1 and 3 and the short tail are zero; 0 and 2 are not.
  const uint64_t tail = 300;
  std::string pre(4 * kChunk + tail, '\0');
  const std::string data = NonZeroBytes(6, 2 * kChunk);
  std::memcpy(&pre[0], data.data(), kChunk);
  std::memcpy(&pre[2 * kChunk], data.data() + kChunk, kChunk);
  Outcome first = Capture(client, ArmKernel("k").arm_id(), pre);
  ASSERT_TRUE(first.id.ok()) << first.id.status();
  EXPECT_EQ(first.held, (std::vector<uint8_t>{0, 1, 0, 1, 1}));
  EXPECT_EQ(first.sent, 2 * kChunk);
  std::vector<RecordedCapture> caps = sink_.captures();
  ASSERT_EQ(caps.size(), 1u);
  ASSERT_TRUE(caps[0].committed);
  EXPECT_EQ(caps[0].regions[0].bytes, pre);
  EXPECT_EQ(caps[0].manifest.agent_timing().known_bytes(), 2 * kChunk + tail);
  // Another connection may name zero chunks too: they reference nothing.
  agent::AgentLinkClient& other = NewClient();
  ASSERT_TRUE(other.connected()) << other.last_error();
  const std::string zeros(2 * kChunk, '\0');
  Outcome z = Capture(other, ArmKernel("k").arm_id(), zeros);
  ASSERT_TRUE(z.id.ok()) << z.id.status();
  EXPECT_EQ(z.held, (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(z.sent, 0u);
  EXPECT_EQ(sink_.captures()[1].regions[0].bytes, zeros);
}

TEST_F(FingerprintTest, AZeroFingerprintOfAnotherLengthIsRefused) {
  StartServer();
  agent::AgentLinkClient& client = NewClient();
  ASSERT_TRUE(client.connected()) << client.last_error();
  // The whole chunk's zero fingerprint in a 40-byte tail's place.
  EXPECT_THAT(NameOneChunk(client, kChunk + 40, 1, ZeroChunkFingerprint(kChunk)),
              HasSubstr("region 0 chunk 1"));
}

TEST(ZeroChunkFingerprintTest, EqualsTheReferenceOfZeroBytes) {
  for (uint64_t n : {1ull, 7ull, 8ull, 9ull, 4096ull, 65536ull + 3}) {
    const std::string zeros(n, '\0');
    EXPECT_EQ(ZeroChunkFingerprint(n), FingerprintChunk(zeros.data(), n)) << n;
  }
  EXPECT_NE(ZeroChunkFingerprint(64), ZeroChunkFingerprint(72));
}

TEST(ZeroChunkFingerprintsTest, KnowsTheChunkSizeAndTheTailsItWasTold) {
  ZeroChunkFingerprints zeros(kChunk, /*max_lengths=*/3);
  const std::string chunk(kChunk, '\0');
  EXPECT_TRUE(zeros.IsZero(FingerprintChunk(chunk.data(), chunk.size())));
  EXPECT_TRUE(zeros.IsZeroOfLength(ZeroChunkFingerprint(kChunk), kChunk));
  EXPECT_FALSE(zeros.IsZero(ZeroChunkFingerprint(100)));
  zeros.AddRegionTail(2 * kChunk + 100);
  EXPECT_TRUE(zeros.IsZero(ZeroChunkFingerprint(100)));
  EXPECT_TRUE(zeros.IsZeroOfLength(ZeroChunkFingerprint(100), 100));
  EXPECT_FALSE(zeros.IsZeroOfLength(ZeroChunkFingerprint(100), kChunk));
  zeros.AddRegionTail(3 * kChunk);  // no tail
  zeros.AddRegionTail(200);
  zeros.AddRegionTail(300);         // past max_lengths: not learned
  EXPECT_TRUE(zeros.IsZero(ZeroChunkFingerprint(200)));
  EXPECT_FALSE(zeros.IsZero(ZeroChunkFingerprint(300)));
  const std::string data = NonZeroBytes(1, kChunk);
  EXPECT_FALSE(zeros.IsZero(FingerprintChunk(data.data(), data.size())));
}

}  // namespace
}  // namespace kerncap::link::testing
