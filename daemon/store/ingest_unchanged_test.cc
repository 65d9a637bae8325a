// CaptureIngest::MarkUnchanged (the agent-link's ChunksUnchanged; MarkKnown,
// ChunksKnown, at the end of this file): post chunks declared unchanged get
// the digests the ingest computed for the pre image's bytes, and nothing a
// producer says can make a manifest name a chunk this capture did not send.
#include <cstring>
#include <string>

#include "common/digest.h"
#include "daemon/store/store.h"
#include "daemon/store/store_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::store {
namespace {

using ::testing::HasSubstr;
using testing::RandomBytes;
using testing::SmallOptions;
using testing::TempDir;

constexpr uint64_t kChunk = 64 << 10;

v1::Region Region(uint64_t va, uint64_t size) {
  v1::Region r;
  r.set_va(va);
  r.set_kind(v1::REGION_DEVICE);
  r.mutable_data()->set_size(size);
  return r;
}

v1::CaptureManifest Manifest() {
  v1::CaptureManifest m;
  m.mutable_kernel()->set_mangled_name("_Z4testv");
  return m;
}

TEST(IngestUnchangedTest, UnchangedChunksTakeThePreImagesDigestsAndOnlyChangedOnesAreDiffed) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string pre = RandomBytes(5 * kChunk + 77, 3);  // 6 chunks, the last short
  std::string post = pre;
  post[2 * kChunk + 1] ^= 0x40;
  auto ingest = (*store)->BeginCapture();
  ASSERT_TRUE(ingest.ok());
  auto hpre = (*ingest)->AddRegion(ImageKind::kPre, Region(0x1000, pre.size()));
  ASSERT_TRUE(hpre.ok());
  ASSERT_TRUE((*ingest)->WriteRegion(*hpre, 0, pre.data(), pre.size(), nullptr).ok());
  auto hpost = (*ingest)->AddRegion(ImageKind::kPost, Region(0x1000, post.size()));
  ASSERT_TRUE(hpost.ok());
  ASSERT_TRUE((*ingest)->MarkUnchanged(*hpost, 0, 2).ok());
  ASSERT_TRUE(
      (*ingest)->WriteRegion(*hpost, 2 * kChunk, post.data() + 2 * kChunk, kChunk, nullptr).ok());
  ASSERT_TRUE((*ingest)->MarkUnchanged(*hpost, 3, 3).ok());  // includes the short last chunk
  auto id = (*ingest)->Commit(Manifest());
  ASSERT_TRUE(id.ok()) << id.status();
  auto m = (*store)->GetManifest(*id);
  ASSERT_TRUE(m.ok());
  const v1::Region& r = m->post().regions(0);
  EXPECT_TRUE(r.diff());
  ASSERT_EQ(r.changed_chunks_size(), 1);
  EXPECT_EQ(r.changed_chunks(0), 2u);
  auto chunk = (*store)->ReadChunk(*Digest::FromBytes(r.data().chunk_digests(0)));
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ(*chunk, post.substr(2 * kChunk, kChunk));
  EXPECT_TRUE(testing::VerifyProblems(**store, *id).empty());
}

TEST(IngestUnchangedTest, LiesAboutUnchangedChunksFailTheCaptureAndNameNoChunk) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string pre = RandomBytes(4 * kChunk, 4);
  struct Lie {
    const char* what;
    const char* error;
  };
  const Lie lies[] = {
      {"pre region", "only post-image chunks"},
      {"no pre at va", "no pre-image region"},
      {"pre of other size", "no pre-image region"},
      {"range past the end", "outside its"},
      {"empty range", "outside its"},
      {"overflowing range", "outside its"},
      {"twice", "twice"},
      {"after a write", "twice"},
      {"bad handle", "unknown region handle"},
  };
  for (const Lie& lie : lies) {
    SCOPED_TRACE(lie.what);
    auto ingest = (*store)->BeginCapture();
    ASSERT_TRUE(ingest.ok());
    auto hpre = (*ingest)->AddRegion(ImageKind::kPre, Region(0x1000, pre.size()));
    ASSERT_TRUE(hpre.ok());
    ASSERT_TRUE((*ingest)->WriteRegion(*hpre, 0, pre.data(), pre.size(), nullptr).ok());
    const std::string w(lie.what);
    const uint64_t va = w == "no pre at va" ? 0x9000 : 0x1000;
    const uint64_t size = w == "pre of other size" ? pre.size() + kChunk : pre.size();
    auto hpost = (*ingest)->AddRegion(ImageKind::kPost, Region(va, size));
    ASSERT_TRUE(hpost.ok());
    absl::Status st;
    if (w == "pre region") {
      st = (*ingest)->MarkUnchanged(*hpre, 0, 1);
    } else if (w == "range past the end") {
      st = (*ingest)->MarkUnchanged(*hpost, 3, 2);
    } else if (w == "empty range") {
      st = (*ingest)->MarkUnchanged(*hpost, 0, 0);
    } else if (w == "overflowing range") {
      st = (*ingest)->MarkUnchanged(*hpost, 2, ~0ull);
    } else if (w == "twice") {
      ASSERT_TRUE((*ingest)->MarkUnchanged(*hpost, 0, 2).ok());
      st = (*ingest)->MarkUnchanged(*hpost, 1, 1);
    } else if (w == "after a write") {
      ASSERT_TRUE((*ingest)->WriteRegion(*hpost, 0, pre.data(), kChunk, nullptr).ok());
      st = (*ingest)->MarkUnchanged(*hpost, 0, 1);
    } else if (w == "bad handle") {
      st = (*ingest)->MarkUnchanged(99, 0, 1);
    } else {
      st = (*ingest)->MarkUnchanged(*hpost, 0, 1);
    }
    EXPECT_FALSE(st.ok());
    EXPECT_THAT(st.message(), HasSubstr(lie.error));
    // The producer then aborts (the agent-link server fails the capture);
    // a commit of the unfinished post region would fail as well.
    auto id = (*ingest)->Commit(Manifest());
    EXPECT_FALSE(id.ok());
  }
}

}  // namespace
}  // namespace kerncap::store

namespace kerncap::store {
namespace {

// CaptureIngest::MarkKnown (the agent link's ChunksKnown): a later capture
// names chunks of an earlier one by the digests the store reported for it
// (CommittedDigests); only digests the store holds are accepted.
TEST(IngestKnownTest, ALaterCaptureNamesEarlierChunksByDigest) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string pre = RandomBytes(3 * kChunk + 5, 6) + std::string(kChunk, '\0');
  auto first = (*store)->BeginCapture();
  ASSERT_TRUE(first.ok());
  auto h1 = (*first)->AddRegion(ImageKind::kPre, Region(0x1000, pre.size()));
  ASSERT_TRUE(h1.ok());
  ASSERT_TRUE((*first)->WriteRegion(*h1, 0, pre.data(), pre.size(), nullptr).ok());
  EXPECT_FALSE((*first)->CommittedDigests(*h1).ok()) << "not before the commit";
  auto id1 = (*first)->Commit(Manifest());
  ASSERT_TRUE(id1.ok()) << id1.status();
  auto digests = (*first)->CommittedDigests(*h1);
  ASSERT_TRUE(digests.ok()) << digests.status();
  ASSERT_EQ(digests->size(), 5u);
  EXPECT_EQ((*digests)[4], Digest{}) << "a zero chunk";
  EXPECT_TRUE((*first)->HoldsChunk((*digests)[0]));

  auto second = (*store)->BeginCapture();
  ASSERT_TRUE(second.ok());
  auto h2 = (*second)->AddRegion(ImageKind::kPre, Region(0x1000, pre.size()));
  ASSERT_TRUE(h2.ok());
  ASSERT_TRUE((*second)->MarkKnown(*h2, 0, *digests).ok());
  EXPECT_FALSE((*second)->MarkKnown(*h2, 1, {(*digests)[1]}).ok()) << "declared twice";
  auto id2 = (*second)->Commit(Manifest());
  ASSERT_TRUE(id2.ok()) << id2.status();
  auto m1 = (*store)->GetManifest(*id1);
  auto m2 = (*store)->GetManifest(*id2);
  ASSERT_TRUE(m1.ok() && m2.ok());
  EXPECT_EQ(m2->pre().regions(0).data().SerializeAsString(),
            m1->pre().regions(0).data().SerializeAsString());
  EXPECT_EQ(m2->stats().new_raw_bytes(), 0u);
  EXPECT_TRUE(testing::VerifyProblems(**store, *id2).empty());
}

TEST(IngestKnownTest, DigestsTheStoreDoesNotHoldAndBadRangesFail) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status();
  auto ingest = (*store)->BeginCapture();
  ASSERT_TRUE(ingest.ok());
  auto h = (*ingest)->AddRegion(ImageKind::kPre, Region(0x1000, 2 * kChunk));
  ASSERT_TRUE(h.ok());
  const Digest made_up = Sha256(std::string("never stored"));
  EXPECT_FALSE((*ingest)->HoldsChunk(made_up));
  absl::Status st = (*ingest)->MarkKnown(*h, 0, {made_up});
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("no longer in the store"));
  EXPECT_FALSE((*ingest)->MarkKnown(*h, 2, {Digest{}}).ok()) << "past the region";
  EXPECT_FALSE((*ingest)->MarkKnown(*h, 0, {}).ok()) << "empty";
  // Nothing was recorded: the region is still unwritten.
  EXPECT_FALSE((*ingest)->Commit(Manifest()).ok());
}

}  // namespace
}  // namespace kerncap::store
