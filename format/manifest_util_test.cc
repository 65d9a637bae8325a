#include "format/manifest_util.h"

#include "gtest/gtest.h"

namespace kerncap::service {
namespace {

std::string D(char c) { return Sha256(std::string(1, c)).ToBytes(); }

v1::CaptureManifest TwoRegions() {
  v1::CaptureManifest m;
  m.set_capture_id("cap-1");
  v1::Region* a = m.mutable_pre()->add_regions();
  a->set_va(0x1000);
  a->mutable_data()->set_size(2500);
  a->mutable_data()->set_chunk_size(1024);
  a->mutable_data()->add_chunk_digests(D('a'));
  a->mutable_data()->add_chunk_digests("");  // zero chunk
  a->mutable_data()->add_chunk_digests(D('b'));
  v1::Region* p = m.mutable_post()->add_regions();
  p->set_va(0x1000);
  p->set_diff(true);
  p->mutable_data()->set_size(2500);
  p->mutable_data()->set_chunk_size(1024);
  p->add_changed_chunks(2);
  p->mutable_data()->add_chunk_digests(D('c'));
  v1::CodeObject* co = m.add_code_objects();
  co->mutable_data()->set_size(10);
  co->mutable_data()->set_chunk_size(1024);
  co->mutable_data()->add_chunk_digests(D('a'));  // duplicate of pre chunk 0
  return m;
}

TEST(ManifestChunksTest, UniqueNonZeroChunksWithRawSizes) {
  auto chunks = ManifestChunks(TwoRegions());
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  ASSERT_EQ(chunks->size(), 3u);
  EXPECT_EQ((*chunks)[0].digest.ToBytes(), D('a'));
  EXPECT_EQ((*chunks)[0].raw_size, 1024u);
  EXPECT_EQ((*chunks)[1].digest.ToBytes(), D('b'));
  EXPECT_EQ((*chunks)[1].raw_size, 2500u - 2048u);  // the short tail chunk
  EXPECT_EQ((*chunks)[2].digest.ToBytes(), D('c'));
  EXPECT_EQ((*chunks)[2].raw_size, 2500u - 2048u);  // post diff of chunk index 2
}

TEST(ManifestChunksTest, RejectsMalformedDigest) {
  v1::CaptureManifest m = TwoRegions();
  m.mutable_pre()->mutable_regions(0)->mutable_data()->set_chunk_digests(0, "short");
  EXPECT_EQ(ManifestChunks(m).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ManifestChunksTest, RejectsTooManyDigests) {
  v1::CaptureManifest m = TwoRegions();
  m.mutable_pre()->mutable_regions(0)->mutable_data()->add_chunk_digests(D('z'));
  EXPECT_EQ(ManifestChunks(m).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ManifestChunksTest, RejectsChangedChunkOutOfRange) {
  v1::CaptureManifest m = TwoRegions();
  m.mutable_post()->mutable_regions(0)->set_changed_chunks(0, 7);
  EXPECT_EQ(ManifestChunks(m).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ManifestUtilTest, ZeroBytesCountsEmptyDigests) {
  v1::CaptureManifest m = TwoRegions();
  EXPECT_EQ(ZeroBytes(m.pre().regions(0)), 1024u);
  EXPECT_EQ(ZeroBytes(m.post().regions(0)), 0u);
}

}  // namespace
}  // namespace kerncap::service
