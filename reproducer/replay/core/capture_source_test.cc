#include "reproducer/replay/core/capture_source.h"

#include <unistd.h>

#include <zstd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "format/kcap_file.h"
#include "common/digest.h"
#include "gtest/gtest.h"
#include "kerncap/v1/control.pb.h"
#include "reproducer/replay/core/replay_test_util.h"

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
  // Records with correct checksums around wrong content, raw and zstd.
  ASSERT_TRUE(b.Write(Path("bad.kcap"), m, /*compress=*/false).ok());
  ASSERT_TRUE(b.Write(Path("badz.kcap"), m, /*compress=*/true).ok());
  for (const char* name : {"badz.kcap", "bad.kcap"}) {
    SCOPED_TRACE(name);
    auto src = CaptureSource::OpenKcap(Path(name));
    ASSERT_TRUE(src.ok()) << src.status();
    const v1::Region& r = (*src)->manifest().pre().regions(0);
    std::string out;
    // Off by default: the record checksum is right, so the bytes come back.
    EXPECT_FALSE((*src)->verify_content_digests());
    for (int i : {0, 2}) {
      ASSERT_TRUE((*src)->ReadChunk(r.data().chunk_digests(i), ChunkLength(r.data(), i), &out)
                      .ok());
      EXPECT_EQ(out[0], pre[static_cast<size_t>(i) * 4096] ^ 1);
    }
    (*src)->set_verify_content_digests(true);
    for (int i : {0, 2}) {
      absl::Status s =
          (*src)->ReadChunk(r.data().chunk_digests(i), ChunkLength(r.data(), i), &out);
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
      EXPECT_NE(s.message().find("SHA-256"), std::string::npos) << s;
    }
  }
  auto src = CaptureSource::OpenKcap(Path("bad.kcap"));
  ASSERT_TRUE(src.ok());
  std::string out;
  const v1::Region& r = (*src)->manifest().pre().regions(0);
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
  const uint64_t size = std::filesystem::file_size(Path("c.kcap"));
  // Into the last chunk's payload (the trailer is 20 bytes), then into the
  // middle of the file: open reads no chunk payload, yet must notice both.
  for (uint64_t cut : {size - 30, size / 2, size - 1}) {
    SCOPED_TRACE(cut);
    ASSERT_TRUE(b.Write(Path("c.kcap"), m).ok());
    std::filesystem::resize_file(Path("c.kcap"), cut);
    absl::Status s = CaptureSource::OpenKcap(Path("c.kcap")).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find(Path("c.kcap")), std::string::npos) << s;
  }
  EXPECT_FALSE(CaptureSource::OpenKcap(Path("missing.kcap")).ok());

  ASSERT_TRUE(b.Write(Path("t.kcap"), m).ok());
  auto src = CaptureSource::OpenKcap(Path("t.kcap"), /*unlink_after_open=*/true);
  ASSERT_TRUE(src.ok());
  EXPECT_FALSE(std::filesystem::exists(Path("t.kcap")));
  std::string out;
  const v1::Region& r = (*src)->manifest().pre().regions(0);
  EXPECT_TRUE((*src)->ReadChunk(r.data().chunk_digests(0), 4096, &out).ok());
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Bytes that neither zstd nor a repeated pattern search can shortcut.
std::string Noise(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (char& c : s) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x >> 56);
  }
  return s;
}

TEST_F(CaptureSourceTest, ReadsRawAndZstdChunksByteExactFromManyThreads) {
  // 64 KiB chunks of noise and of a compressible pattern, stored alternately
  // zstd and raw; the last chunk is short.
  const uint32_t cs = 64 << 10;
  testing::KcapBuilder b(cs);
  std::string image;
  for (int i = 0; i < 12; ++i) image += i % 3 == 0 ? Pattern(cs, i) : Noise(cs, i);
  image += Noise(1000, 99);
  v1::CaptureManifest m;
  m.set_capture_id("cap-many");
  v1::Region* r = m.mutable_pre()->add_regions();
  r->set_va(0x7f0000000000);
  *r->mutable_data() = b.Add(image);
  ASSERT_TRUE(b.Write(Path("c.kcap"), m, /*compress=*/true).ok());

  auto src = CaptureSource::OpenKcap(Path("c.kcap"));
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_EQ((*src)->chunk_count(), 13u);
  const v1::ChunkList& list = (*src)->manifest().pre().regions(0).data();
  for (bool verify : {false, true}) {
    (*src)->set_verify_content_digests(verify);
    std::string got(image.size(), '\x5a');
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (uint64_t i = static_cast<uint64_t>(t); i < ChunkCount(list); i += 4) {
          absl::Status s = (*src)->ReadChunkInto(list.chunk_digests(static_cast<int>(i)),
                                                 ChunkLength(list, i),
                                                 got.data() + ChunkOffset(list, i));
          if (!s.ok()) ++failures;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_TRUE(got == image) << "verify=" << verify;
  }
}

TEST_F(CaptureSourceTest, FlippedByteInChunkDataIsDataLoss) {
  testing::KcapBuilder b(4096);
  std::string pre, post;
  v1::CaptureManifest m = MakeCapture(b, &pre, &post);
  // Raw records: the chunk's bytes appear verbatim in the file.
  ASSERT_TRUE(b.Write(Path("raw.kcap"), m, /*compress=*/false).ok());
  std::string file = ReadFile(Path("raw.kcap"));
  const size_t at = file.find(pre.substr(0, 4096));
  ASSERT_NE(at, std::string::npos);
  file[at + 2000] ^= 0x10;
  WriteFile(Path("raw.kcap"), file);

  // A one-chunk capture stored zstd: its data ends where the trailer begins.
  testing::KcapBuilder bz(4096);
  v1::CaptureManifest mz;
  *mz.mutable_pre()->add_regions()->mutable_data() = bz.Add(Noise(4096, 5));
  ASSERT_TRUE(bz.Write(Path("zstd.kcap"), mz, /*compress=*/true).ok());
  file = ReadFile(Path("zstd.kcap"));
  file[file.size() - kcap::kKcapTrailerBytes - 100] ^= 0x01;
  WriteFile(Path("zstd.kcap"), file);

  for (const char* name : {"raw.kcap", "zstd.kcap"}) {
    SCOPED_TRACE(name);
    auto src = CaptureSource::OpenKcap(Path(name));  // payloads are not read at open
    ASSERT_TRUE(src.ok()) << src.status();
    const v1::Region& r = (*src)->manifest().pre().regions(0);
    std::string out;
    absl::Status s = (*src)->ReadChunk(r.data().chunk_digests(0), 4096, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find("checksum"), std::string::npos) << s;
    EXPECT_NE(s.message().find(Path(name)), std::string::npos) << s;
    EXPECT_NE(s.message().find("at byte"), std::string::npos) << s;
  }
}

TEST_F(CaptureSourceTest, DamagedRecordHeaderFieldsAreDataLoss) {
  testing::KcapBuilder b(4096);
  std::string pre, post;
  v1::CaptureManifest m = MakeCapture(b, &pre, &post);
  ASSERT_TRUE(b.Write(Path("c.kcap"), m, /*compress=*/false).ok());
  const std::string good = ReadFile(Path("c.kcap"));
  const std::string digest = m.pre().regions(0).data().chunk_digests(0);
  const size_t d = good.rfind(digest);  // the chunk record, after the manifest
  ASSERT_NE(d, std::string::npos);
  // Canonical layout after the digest: codec tag, codec, raw_size tag, raw_size.
  ASSERT_EQ(good[d + 32], '\x10');
  ASSERT_EQ(good[d + 33], '\x01');  // CODEC_RAW
  for (size_t at : {d + 33, d + 35}) {
    SCOPED_TRACE(at);
    std::string file = good;
    file[at] ^= 0x02;  // codec RAW -> unknown 3; raw_size 4096 -> 4098's encoding
    WriteFile(Path("c.kcap"), file);
    auto src = CaptureSource::OpenKcap(Path("c.kcap"));
    ASSERT_TRUE(src.ok()) << src.status();
    std::string out;
    absl::Status s = (*src)->ReadChunk(digest, 4096, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  }
}

TEST_F(CaptureSourceTest, ChecksTheTrailerRecordCount) {
  testing::KcapBuilder b(4096);
  std::string pre, post;
  v1::CaptureManifest m = MakeCapture(b, &pre, &post);
  ASSERT_TRUE(b.Write(Path("c.kcap"), m).ok());
  std::string file = ReadFile(Path("c.kcap"));
  file[file.size() - kcap::kKcapTrailerBytes + 4] ^= 0x01;  // record_count 4 -> 5
  WriteFile(Path("c.kcap"), file);
  absl::Status s = CaptureSource::OpenKcap(Path("c.kcap")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("records"), std::string::npos) << s;
}

// ---- records written by hand, fields in other orders ----

void PutVarint(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  s->push_back(static_cast<char>(v));
}
std::string VarintField(int field, uint64_t v) {
  std::string s;
  PutVarint(&s, static_cast<uint64_t>(field) << 3);  // wire type 0
  PutVarint(&s, v);
  return s;
}
std::string BytesField(int field, const std::string& bytes) {
  std::string s;
  PutVarint(&s, (static_cast<uint64_t>(field) << 3) | 2);
  PutVarint(&s, bytes.size());
  return s + bytes;
}

// One chunk as stored: its address, codec and stored bytes.
struct HandChunk {
  std::string raw, digest, data;
  v1::ChunkCodec codec = v1::CODEC_RAW;
};
HandChunk MakeHandChunk(std::string raw, bool zstd) {
  HandChunk c;
  c.digest = Sha256(raw).ToBytes();
  c.data = raw;
  if (zstd) {
    c.data.resize(ZSTD_compressBound(raw.size()));
    c.data.resize(ZSTD_compress(c.data.data(), c.data.size(), raw.data(), raw.size(), 1));
    c.codec = v1::CODEC_ZSTD;
  }
  c.raw = std::move(raw);
  return c;
}

TEST_F(CaptureSourceTest, IndexesChunkRecordsWithFieldsInAnyOrder) {
  std::vector<HandChunk> chunks;
  std::vector<std::string> payloads;
  auto field = [](int f, const HandChunk& c) {
    switch (f) {
      case 1: return BytesField(1, c.digest);
      case 2: return VarintField(2, c.codec);
      case 3: return VarintField(3, c.raw.size());
      default: return BytesField(4, c.data);
    }
  };
  // 0: data first (the index must read the whole payload), raw.
  chunks.push_back(MakeHandChunk(Noise(5000, 1), false));
  payloads.push_back(BytesField(
      2, field(4, chunks[0]) + field(3, chunks[0]) + field(2, chunks[0]) + field(1, chunks[0])));
  // 1: data last, the rest reversed, an unknown field before the chunk; zstd.
  chunks.push_back(MakeHandChunk(Pattern(5000, 2), true));
  payloads.push_back(VarintField(9, 12345) +
                     BytesField(2, field(3, chunks[1]) + field(2, chunks[1]) +
                                       field(1, chunks[1]) + field(4, chunks[1])));
  // 2: data first, a field after the chunk (bytes_total); zstd.
  chunks.push_back(MakeHandChunk(Pattern(7000, 3), true));
  payloads.push_back(BytesField(2, field(4, chunks[2]) + field(1, chunks[2]) +
                                       field(2, chunks[2]) + field(3, chunks[2])) +
                     VarintField(4, 7000));
  // 3: the chunk split over two occurrences of the field (the parser merges
  // them), a stale data value overridden by the last one; raw, large enough
  // that data is past the index's prefix.
  chunks.push_back(MakeHandChunk(Noise(3000, 4), false));
  payloads.push_back(BytesField(2, field(1, chunks[3]) + BytesField(4, "stale")) +
                     BytesField(2, field(2, chunks[3]) + field(3, chunks[3]) +
                                       field(4, chunks[3])));

  v1::CaptureManifest m;
  m.set_capture_id("cap-hand");
  v1::Region* r = m.mutable_pre()->add_regions();
  r->mutable_data()->set_chunk_size(8192);
  for (size_t i = 0; i < chunks.size(); ++i) {
    // The payloads are valid TransferFrames, with the fields we mean.
    v1::TransferFrame f;
    ASSERT_TRUE(f.ParseFromString(payloads[i])) << i;
    ASSERT_TRUE(f.has_chunk()) << i;
    EXPECT_EQ(f.chunk().digest(), chunks[i].digest) << i;
    EXPECT_EQ(f.chunk().data(), chunks[i].data) << i;
    EXPECT_EQ(f.chunk().codec(), chunks[i].codec) << i;
  }
  auto write = [&](const std::vector<std::string>& p) {
    auto w = kcap::KcapWriter::Create(Path("hand.kcap"));
    ASSERT_TRUE(w.ok());
    v1::TransferFrame mf;
    *mf.mutable_manifest() = m;
    ASSERT_TRUE((*w)->Append(mf).ok());
    for (const std::string& payload : p) ASSERT_TRUE((*w)->AppendSerialized(payload).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  };
  write(payloads);
  auto src = CaptureSource::OpenKcap(Path("hand.kcap"));
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->chunk_count(), chunks.size());
  (*src)->set_verify_content_digests(true);
  for (size_t i = 0; i < chunks.size(); ++i) {
    std::string out;
    absl::Status s =
        (*src)->ReadChunk(chunks[i].digest, static_cast<uint32_t>(chunks[i].raw.size()), &out);
    ASSERT_TRUE(s.ok()) << i << ": " << s;
    EXPECT_TRUE(out == chunks[i].raw) << i;
  }

  // A record whose data is not last is read whole at open, so damage to it is
  // found there.
  std::string file = ReadFile(Path("hand.kcap"));
  const size_t at = file.find(chunks[0].raw);
  ASSERT_NE(at, std::string::npos);
  file[at + 100] ^= 0x04;
  WriteFile(Path("hand.kcap"), file);
  absl::Status s = CaptureSource::OpenKcap(Path("hand.kcap")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s;

  // A record that is no chunk, and one that is no valid encoding.
  for (const std::string& bad : {BytesField(1, "x") + VarintField(3, 1),
                                 BytesField(2, BytesField(4, "abc")).substr(0, 4)}) {
    write({payloads[1], bad});
    EXPECT_EQ(CaptureSource::OpenKcap(Path("hand.kcap")).status().code(),
              absl::StatusCode::kDataLoss);
  }
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
