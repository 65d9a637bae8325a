#include "reproducer/replay/capture_source.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reproducer/replay/replay_test_util.h"

namespace kerncap::replay {
namespace {

class CaptureSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("kc_replay_src_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed) & 0xff);
  return s;
}

// A capture: one region of 3 chunks (middle one zero) whose last chunk the
// kernel changed.
v1::CaptureManifest MakeCapture(testing::KcapBuilder& b, std::string* pre, std::string* post) {
  const uint32_t cs = 4096;
  *pre = Pattern(cs, 1) + std::string(cs, '\0') + Pattern(cs - 100, 2);
  *post = *pre;
  (*post)[2 * cs + 5] ^= 0x55;
  v1::CaptureManifest m;
  m.set_capture_id("cap-test");
  m.mutable_kernel()->set_mangled_name("_Z5scalePfi");
  v1::Region* r = m.mutable_pre()->add_regions();
  r->set_va(0x7f0000000000);
  r->set_kind(v1::REGION_DEVICE);
  *r->mutable_data() = b.Add(*pre);
  *m.mutable_post()->add_regions() = b.Diff(*r, *pre, *post);
  m.set_post_complete(true);
  return m;
}

TEST_F(CaptureSourceTest, ReadsManifestAndChunksOnDemand) {
  testing::KcapBuilder b(4096);
  std::string pre, post;
  v1::CaptureManifest m = MakeCapture(b, &pre, &post);
  ASSERT_TRUE(b.Write(Path("c.kcap"), m).ok());

  auto src = CaptureSource::OpenKcap(Path("c.kcap"));
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->manifest().capture_id(), "cap-test");
  EXPECT_EQ((*src)->chunk_count(), 3u);  // 2 pre + 1 changed post chunk (zero chunk not stored)

  const v1::Region& r = (*src)->manifest().pre().regions(0);
  const v1::Region& p = (*src)->manifest().post().regions(0);
  ASSERT_TRUE(CheckRegion(r, "pre").ok());
  ASSERT_TRUE(CheckRegion(p, "post").ok());
  ASSERT_EQ(ChunkCount(r.data()), 3u);
  EXPECT_EQ(ChunkLength(r.data(), 2), 4096u - 100);
  std::string got, out;
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE((*src)->ReadChunk(r.data().chunk_digests(static_cast<int>(i)),
                                  ChunkLength(r.data(), i), &out).ok());
    got += out;
  }
  EXPECT_EQ(got, pre);
  // Post: unchanged chunks come from the pre image, the changed one from the diff.
  got.clear();
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE((*src)->ReadChunk(PostDigest(r, &p, i), ChunkLength(r.data(), i), &out).ok());
    got += out;
  }
  EXPECT_EQ(got, post);
  EXPECT_EQ(&PostDigest(r, nullptr, 2), &r.data().chunk_digests(2));
}

TEST_F(CaptureSourceTest, DetectsChunksThatDoNotMatchTheirAddress) {
  testing::KcapBuilder b(4096);
  std::string pre, post;
  v1::CaptureManifest m = MakeCapture(b, &pre, &post);
  for (auto& [d, c] : b.chunks()) c[0] ^= 1;  // bytes no longer hash to d
  ASSERT_TRUE(b.Write(Path("bad.kcap"), m, /*compress=*/false).ok());
  auto src = CaptureSource::OpenKcap(Path("bad.kcap"));
  ASSERT_TRUE(src.ok());
  std::string out;
  const v1::Region& r = (*src)->manifest().pre().regions(0);
  absl::Status s = (*src)->ReadChunk(r.data().chunk_digests(0), 4096, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  // Wrong expected size.
  EXPECT_EQ((*src)->ReadChunk(r.data().chunk_digests(0), 100, &out).code(),
            absl::StatusCode::kDataLoss);
  // Unknown digest.
  EXPECT_EQ((*src)->ReadChunk(std::string(32, 'x'), 4096, &out).code(),
            absl::StatusCode::kNotFound);
  // Zero chunk needs no record.
  ASSERT_TRUE((*src)->ReadChunk("", 64, &out).ok());
  EXPECT_EQ(out, std::string(64, '\0'));
}

TEST_F(CaptureSourceTest, RejectsTruncatedFilesAndTempExportsAreUnlinked) {
  testing::KcapBuilder b(4096);
  std::string pre, post;
  v1::CaptureManifest m = MakeCapture(b, &pre, &post);
  ASSERT_TRUE(b.Write(Path("c.kcap"), m).ok());
  std::filesystem::resize_file(Path("c.kcap"), std::filesystem::file_size(Path("c.kcap")) - 30);
  EXPECT_EQ(CaptureSource::OpenKcap(Path("c.kcap")).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(CaptureSource::OpenKcap(Path("missing.kcap")).ok());

  ASSERT_TRUE(b.Write(Path("t.kcap"), m).ok());
  auto src = CaptureSource::OpenKcap(Path("t.kcap"), /*unlink_after_open=*/true);
  ASSERT_TRUE(src.ok());
  EXPECT_FALSE(std::filesystem::exists(Path("t.kcap")));
  std::string out;
  const v1::Region& r = (*src)->manifest().pre().regions(0);
  EXPECT_TRUE((*src)->ReadChunk(r.data().chunk_digests(0), 4096, &out).ok());
}

TEST_F(CaptureSourceTest, CheckRegionCatchesInconsistentLists) {
  v1::Region r;
  r.set_va(0x1000);
  r.mutable_data()->set_size(10000);
  r.mutable_data()->set_chunk_size(4096);
  r.mutable_data()->add_chunk_digests("");
  EXPECT_FALSE(CheckRegion(r, "pre").ok());  // 1 digest for 3 chunks
  r.mutable_data()->add_chunk_digests("");
  r.mutable_data()->add_chunk_digests("");
  EXPECT_TRUE(CheckRegion(r, "pre").ok());
  r.set_diff(true);
  EXPECT_FALSE(CheckRegion(r, "post").ok());  // 3 digests, 0 indices
  r.mutable_data()->clear_chunk_digests();
  r.add_changed_chunks(2);
  r.add_changed_chunks(1);
  r.mutable_data()->add_chunk_digests("");
  r.mutable_data()->add_chunk_digests("");
  EXPECT_FALSE(CheckRegion(r, "post").ok());  // not increasing
  r.set_changed_chunks(0, 0);
  EXPECT_TRUE(CheckRegion(r, "post").ok());
  r.set_changed_chunks(1, 3);
  EXPECT_FALSE(CheckRegion(r, "post").ok());  // out of range
}

}  // namespace
}  // namespace kerncap::replay
