#include "format/manifest_check.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::format {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kChunk = 64u << 10;

v1::Region Region(uint64_t size, int digests) {
  v1::Region r;
  r.set_va(0x7f0000000000);
  r.mutable_data()->set_size(size);
  r.mutable_data()->set_chunk_size(kChunk);
  for (int i = 0; i < digests; ++i) r.mutable_data()->add_chunk_digests(std::string(32, 'd'));
  return r;
}

v1::CaptureManifest Good() {
  v1::CaptureManifest m;
  m.set_format_version(1);
  *m.mutable_pre()->add_regions() = Region(3 * kChunk + 1, 4);
  v1::Region post = Region(3 * kChunk + 1, 2);
  post.set_diff(true);
  post.add_changed_chunks(0);
  post.add_changed_chunks(3);
  *m.mutable_post()->add_regions() = post;
  v1::CodeObject* co = m.add_code_objects();
  co->set_name("k.cubin");
  co->mutable_data()->set_size(100);
  co->mutable_data()->set_chunk_size(kChunk);
  co->mutable_data()->add_chunk_digests(std::string(32, 'c'));
  return m;
}

std::string Error(const v1::CaptureManifest& m, const ManifestLimits& limits = {}) {
  absl::Status st = ValidateManifest(m, limits);
  EXPECT_TRUE(st.ok() || st.code() == absl::StatusCode::kInvalidArgument) << st;
  return std::string(st.message());
}

TEST(ManifestCheckTest, AConsistentManifestIsValid) {
  EXPECT_TRUE(ValidateManifest(Good()).ok()) << ValidateManifest(Good());
  v1::CaptureManifest empty;
  EXPECT_TRUE(ValidateManifest(empty).ok());
}

// What a crafted .kcap used to carry into `repro`: a code object claiming
// 4 GiB with one digest made the reader allocate 4 GiB.
TEST(ManifestCheckTest, SizesMustAgreeWithTheirDigests) {
  v1::CaptureManifest m = Good();
  m.mutable_code_objects(0)->mutable_data()->set_size(4ull << 30);
  EXPECT_THAT(Error(m), HasSubstr("code object 0 (k.cubin): 4294967296 bytes, more than"));
  m = Good();
  m.mutable_code_objects(0)->mutable_data()->set_size(10 * kChunk);
  EXPECT_THAT(Error(m), HasSubstr("1 digests for 10 chunks"));
  m = Good();
  m.mutable_pre()->mutable_regions(0)->mutable_data()->add_chunk_digests("");
  EXPECT_THAT(Error(m), HasSubstr("pre region 0 at va 0x7f0000000000: 5 digests for 4 chunks"));
  m = Good();
  m.mutable_pre()->mutable_regions(0)->mutable_data()->set_size(1ull << 50);
  EXPECT_THAT(Error(m), HasSubstr("more than the 4398046511104 a region may have"));
}

TEST(ManifestCheckTest, ChunkSizesDigestsAndDiffsAreChecked) {
  v1::CaptureManifest m = Good();
  m.mutable_pre()->mutable_regions(0)->mutable_data()->set_chunk_size(100000);
  EXPECT_THAT(Error(m), HasSubstr("chunk_size 100000 is not a power of two"));
  m.mutable_pre()->mutable_regions(0)->mutable_data()->set_chunk_size(2048);
  EXPECT_THAT(Error(m), HasSubstr("chunk_size 2048 is not a power of two between 4096"));
  m = Good();
  m.mutable_pre()->mutable_regions(0)->mutable_data()->set_chunk_size(0);
  EXPECT_THAT(Error(m), HasSubstr("chunk_size is 0"));
  m = Good();
  m.mutable_pre()->mutable_regions(0)->mutable_data()->set_chunk_digests(1, "short");
  EXPECT_THAT(Error(m), HasSubstr("digest 1 is 5 bytes"));
  m = Good();
  m.mutable_post()->mutable_regions(0)->set_changed_chunks(1, 4);
  EXPECT_THAT(Error(m), HasSubstr("changed chunk 4 beyond its 4 chunks"));
  m = Good();
  m.mutable_post()->mutable_regions(0)->set_changed_chunks(1, 0);
  EXPECT_THAT(Error(m), HasSubstr("not strictly increasing"));
  m = Good();
  m.mutable_post()->mutable_regions(0)->add_changed_chunks(2);
  EXPECT_THAT(Error(m), HasSubstr("3 changed_chunks but 2 digests"));
  m = Good();
  m.mutable_pre()->mutable_regions(0)->add_changed_chunks(1);
  EXPECT_THAT(Error(m), HasSubstr("changed_chunks on a region that is not a diff"));
  m = Good();
  m.set_format_version(2);
  EXPECT_THAT(Error(m), HasSubstr("format_version 2"));
}

// A .kcap or ImportCapture stream naming a region past the end of the
// address space is refused, naming the region (issue 28).
TEST(ManifestCheckTest, ARegionThatWrapsTheAddressSpaceIsRefused) {
  v1::CaptureManifest m = Good();
  m.mutable_post()->mutable_regions(0)->set_va(0xffffffffffff0000ull);
  EXPECT_THAT(Error(m), HasSubstr("post region 0 at va 0xffffffffffff0000: va 0xffffffffffff0000 "
                                  "+ size 196609 bytes wraps the 64-bit address space"));
  // Ending exactly at 2^64 wraps va + size to 0: refused too; one byte less is fine.
  m = Good();
  const uint64_t size = m.pre().regions(0).data().size();
  m.mutable_pre()->mutable_regions(0)->set_va(0 - size);
  EXPECT_THAT(Error(m), HasSubstr("pre region 0"));
  m.mutable_pre()->mutable_regions(0)->set_va(0 - size - 1);
  EXPECT_TRUE(ValidateManifest(m).ok()) << ValidateManifest(m);
}

TEST(ManifestCheckTest, TotalsAreBounded) {
  ManifestLimits limits;
  limits.max_regions = 1;
  EXPECT_THAT(Error(Good(), limits), HasSubstr("2 regions, more than 1"));
  limits = ManifestLimits();
  limits.max_logical_bytes = 4 * kChunk;
  EXPECT_THAT(Error(Good(), limits), HasSubstr("regions hold more than"));
  v1::CaptureManifest m = Good();
  m.set_argument_blob(std::string((1u << 20) + 1, 'a'));
  EXPECT_THAT(Error(m), HasSubstr("argument blob of 1048577 bytes"));
}

TEST(ManifestCheckTest, ChunkCountAndLength) {
  v1::ChunkList l;
  l.set_size(2 * kChunk + 5);
  l.set_chunk_size(kChunk);
  EXPECT_EQ(ChunkCount(l), 3u);
  EXPECT_EQ(ChunkLength(l, 0), kChunk);
  EXPECT_EQ(ChunkLength(l, 2), 5u);
  EXPECT_EQ(ChunkLength(l, 3), 0u);
  l.set_size(UINT64_MAX);
  EXPECT_EQ(ChunkCount(l), UINT64_MAX / kChunk + 1);  // no overflow
}

}  // namespace
}  // namespace kerncap::format
