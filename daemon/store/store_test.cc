#include "daemon/store/store.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "common/digest.h"
#include "common/file_util.h"
#include "daemon/store/store_test_util.h"
#include "gtest/gtest.h"

namespace kerncap::store {
namespace {

using testing::IngestCapture;
using testing::RandomBytes;
using testing::ReadPre;
using testing::SmallOptions;
using testing::TempDir;
using testing::TextBytes;
using testing::VerifyProblems;

constexpr size_t kChunk = 64 << 10;

int CountFiles(const std::string& root, const std::string& prefix) {
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

// `n` captures of the same `bytes` ingested at once, one thread each.
std::vector<std::string> IngestConcurrently(Store& store, const std::string& bytes, int n) {
  std::vector<std::string> ids(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      auto id = IngestCapture(store, {{0x1000u + t, bytes}});
      EXPECT_TRUE(id.ok()) << id.status();
      if (id.ok()) ids[t] = *id;
    });
  }
  for (auto& t : threads) t.join();
  return ids;
}

uint64_t NewRawBytes(Store& store, const std::vector<std::string>& ids) {
  uint64_t n = 0;
  for (const auto& id : ids) n += store.GetManifest(id)->stats().new_raw_bytes();
  return n;
}

TEST(StoreTest, IngestAndReadBack) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status();
  // Not chunk-multiple sized, mixed zero / text / random chunks.
  std::string a = TextBytes(3 * kChunk + 1000, 1);
  std::memset(a.data() + kChunk, 0, kChunk);
  std::string b = RandomBytes(2 * kChunk, 2);
  auto id = IngestCapture(**store, {{0x1000, a}, {0x900000, b}});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->size(), 16u);
  EXPECT_EQ(id->substr(0, 4), "cap-");

  auto m = (*store)->GetManifest(*id);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->pre().regions_size(), 2);
  EXPECT_EQ(m->pre().regions(0).va(), 0x1000u);
  EXPECT_EQ(m->pre().regions(0).data().chunk_digests_size(), 4);
  EXPECT_TRUE(m->pre().regions(0).data().chunk_digests(1).empty());  // zero chunk
  EXPECT_EQ(ReadPre(**store, *m, 0), a);
  EXPECT_EQ(ReadPre(**store, *m, 1), b);

  const auto& s = m->stats();
  EXPECT_EQ(s.logical_bytes(), a.size() + b.size());
  EXPECT_EQ(s.zero_bytes(), kChunk);
  EXPECT_EQ(s.chunk_count(), 5u);
  EXPECT_EQ(s.new_raw_bytes(), a.size() + b.size() - kChunk);
  EXPECT_LT(s.new_stored_bytes(), s.new_raw_bytes());  // text compressed
  EXPECT_EQ(s.dedup_bytes(), 0u);
  EXPECT_GT(s.ingest_seconds(), 0.0);
  EXPECT_TRUE(VerifyProblems(**store).empty());
}

TEST(StoreTest, ZeroChunksAreNeverStored) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  std::string zeros(8 * kChunk, '\0');
  auto id = IngestCapture(**store, {{0x1000, zeros}});
  ASSERT_TRUE(id.ok()) << id.status();
  auto stats = (*store)->Stats();
  EXPECT_EQ(stats.unique_chunks(), 0u);
  EXPECT_EQ(stats.pack_files(), 0u);
  auto m = (*store)->GetManifest(*id);
  EXPECT_EQ(m->stats().zero_bytes(), zeros.size());
  EXPECT_EQ(ReadPre(**store, *m, 0), zeros);
}

// Appends go to several open packs at once (striped_appender.h): chunks
// deduplicate across them, and a commit makes each pack it references
// durable (reopening finds everything).
TEST(StoreTest, StripedPacksDedupAcrossStripesAndCommitDurably) {
  TempDir dir;
  StoreOptions o = SmallOptions(dir.path());
  o.append_stripes = 3;
  o.pack_target_bytes = 1ull << 30;  // no pack fills: one per stripe used
  const std::string data = RandomBytes(40 * kChunk, 21);
  std::string id1, id2;
  {
    auto store = Store::Open(o);
    ASSERT_TRUE(store.ok()) << store.status();
    auto r1 = IngestCapture(**store, {{0x1000, data}});
    ASSERT_TRUE(r1.ok()) << r1.status();
    id1 = *r1;
    int packs = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir.Sub("packs"))) {
      if (e.path().extension() == ".pack") ++packs;
    }
    // One pack per stripe a worker used (which ones is the scheduler's say;
    // StripedAppenderTest pins the striping itself).
    EXPECT_GE(packs, 1);
    EXPECT_LE(packs, 2);
    // The same bytes again, whichever worker (stripe) hashes each chunk.
    auto r2 = IngestCapture(**store, {{0x9000000, data}});
    ASSERT_TRUE(r2.ok()) << r2.status();
    id2 = *r2;
    EXPECT_EQ((*store)->GetManifest(id2)->stats().dedup_bytes(), data.size());
    EXPECT_EQ((*store)->Stats().raw_bytes(), data.size());
  }
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(id1), 0), data);
  EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(id2), 0), data);
  EXPECT_TRUE(VerifyProblems(**store).empty());
  // Concurrent ingests of new bytes through the stripes, then GC.
  const std::string more = RandomBytes(24 * kChunk, 22);
  const std::vector<std::string> ids = IngestConcurrently(**store, more, 3);
  EXPECT_EQ(NewRawBytes(**store, ids), more.size());  // each chunk once, whatever its stripe
  ASSERT_TRUE((*store)->DeleteCapture(id1).ok());
  ASSERT_TRUE((*store)->DeleteCapture(id2).ok());
  auto gc = (*store)->RunGc(false);
  ASSERT_TRUE(gc.ok()) << gc.status();
  EXPECT_EQ(gc->dead_chunks(), 40u);
  for (const auto& id : ids) EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(id), 0), more);
  EXPECT_TRUE(VerifyProblems(**store).empty());
}

TEST(StoreTest, SecondCaptureDedupsAndPersistsAcrossReopen) {
  TempDir dir;
  std::string a = RandomBytes(6 * kChunk, 7);
  std::string id1, id2;
  uint64_t stored_after_first;
  {
    auto store = Store::Open(SmallOptions(dir.path()));
    ASSERT_TRUE(store.ok());
    id1 = *IngestCapture(**store, {{0x1000, a}});
    stored_after_first = (*store)->Stats().stored_bytes();
    // Same bytes at another va plus one new chunk.
    std::string b = a + RandomBytes(kChunk, 8);
    auto r = IngestCapture(**store, {{0x2000000, b}});
    ASSERT_TRUE(r.ok()) << r.status();
    id2 = *r;
    auto m2 = (*store)->GetManifest(id2);
    EXPECT_EQ(m2->stats().dedup_bytes(), a.size());
    EXPECT_EQ(m2->stats().new_raw_bytes(), kChunk);
  }
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Stats().captures(), 2u);
  EXPECT_EQ((*store)->Stats().unique_chunks(), 7u);
  EXPECT_LT((*store)->Stats().stored_bytes(), stored_after_first + 2 * kChunk);
  auto m1 = (*store)->GetManifest(id1);
  ASSERT_TRUE(m1.ok());
  EXPECT_EQ(ReadPre(**store, *m1, 0), a);
  auto fp = (*store)->CaptureFootprint(id2);
  ASSERT_TRUE(fp.ok()) << fp.status();
  EXPECT_TRUE(fp->exclusive_known);
  EXPECT_EQ(fp->exclusive_raw_bytes, kChunk);  // only the extra chunk is exclusive
}

TEST(StoreTest, PostImageIsDiffedAgainstPre) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  std::string pre = RandomBytes(4 * kChunk, 9);
  std::string post = pre;
  post[2 * kChunk + 5] ^= 1;                         // chunk 2 changed
  std::memset(post.data() + 3 * kChunk, 0, kChunk);  // chunk 3 zeroed
  std::string other = RandomBytes(kChunk, 10);       // post-only region
  auto id = IngestCapture(**store, {{0x1000, pre}}, {{0x1000, post}, {0x800000, other}});
  ASSERT_TRUE(id.ok()) << id.status();
  auto m = (*store)->GetManifest(*id);
  ASSERT_EQ(m->post().regions_size(), 2);
  const auto& diff = m->post().regions(0);
  EXPECT_TRUE(diff.diff());
  EXPECT_EQ(diff.data().size(), post.size());
  ASSERT_EQ(diff.changed_chunks_size(), 2);
  EXPECT_EQ(diff.changed_chunks(0), 2u);
  EXPECT_EQ(diff.changed_chunks(1), 3u);
  ASSERT_EQ(diff.data().chunk_digests_size(), 2);
  EXPECT_TRUE(diff.data().chunk_digests(1).empty());
  auto chunk = (*store)->ReadChunk(*Digest::FromBytes(diff.data().chunk_digests(0)));
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ(*chunk, post.substr(2 * kChunk, kChunk));
  EXPECT_FALSE(m->post().regions(1).diff());
  EXPECT_EQ(m->post().regions(1).data().chunk_digests_size(), 1);
  // logical = pre + 2 changed chunks + post-only region.
  EXPECT_EQ(m->stats().logical_bytes(), pre.size() + 2 * kChunk + kChunk);
}

TEST(StoreTest, CodeObjectsAreStoredAndChecked) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  auto ingest = (*store)->BeginCapture();
  ASSERT_TRUE(ingest.ok());
  std::string hsaco = TextBytes(100000, 11);
  v1::CodeObject meta;
  meta.set_name("kernel.hsaco");
  meta.set_format(v1::CODE_OBJECT_HSACO);
  ASSERT_TRUE((*ingest)->AddCodeObject(meta, hsaco.data(), hsaco.size()).ok());
  meta.set_digest(std::string(32, 'x'));
  EXPECT_EQ((*ingest)->AddCodeObject(meta, hsaco.data(), hsaco.size()).code(),
            absl::StatusCode::kInvalidArgument);
  auto id = (*ingest)->Commit({});
  ASSERT_TRUE(id.ok()) << id.status();
  auto m = (*store)->GetManifest(*id);
  ASSERT_EQ(m->code_objects_size(), 1);
  EXPECT_EQ(m->code_objects(0).digest(), Sha256(hsaco).ToBytes());
  std::string out(hsaco.size(), '\0');
  ASSERT_TRUE((*store)->ReadChunkList(m->code_objects(0).data(), out.data(), out.size()).ok());
  EXPECT_EQ(out, hsaco);
}

TEST(StoreTest, BadWritesAreRejected) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  auto ingest = (*store)->BeginCapture();
  v1::Region r;
  r.set_va(0x1000);
  r.mutable_data()->set_size(3 * kChunk);
  int h = *(*ingest)->AddRegion(ImageKind::kPre, r);
  std::string data = RandomBytes(3 * kChunk, 12);
  int consumed = 0;
  auto cb = [&] { ++consumed; };
  EXPECT_EQ((*ingest)->WriteRegion(h, 100, data.data(), kChunk, cb).code(),
            absl::StatusCode::kInvalidArgument);  // unaligned offset
  EXPECT_EQ((*ingest)->WriteRegion(h, 0, data.data(), kChunk + 1, cb).code(),
            absl::StatusCode::kInvalidArgument);  // not a chunk multiple mid-region
  EXPECT_EQ((*ingest)->WriteRegion(h, 0, data.data(), 4 * kChunk, cb).code(),
            absl::StatusCode::kInvalidArgument);  // past the end
  EXPECT_EQ((*ingest)->WriteRegion(7, 0, data.data(), kChunk, cb).code(),
            absl::StatusCode::kInvalidArgument);  // unknown handle
  EXPECT_EQ(consumed, 4);                         // rejected bytes are released at once
  ASSERT_TRUE((*ingest)->WriteRegion(h, 0, data.data(), kChunk, cb).ok());
  EXPECT_EQ((*ingest)->WriteRegion(h, 0, data.data(), kChunk, cb).code(),
            absl::StatusCode::kInvalidArgument);  // chunk written twice
  auto id = (*ingest)->Commit({});
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);  // incomplete region
  EXPECT_NE(id.status().message().find("1 of 3"), std::string::npos) << id.status();
  EXPECT_EQ((*store)->Stats().captures(), 0u);
}

TEST(StoreTest, AbortedCaptureIsNotVisible) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  std::string data = RandomBytes(4 * kChunk, 13);
  {
    auto ingest = (*store)->BeginCapture();
    v1::Region r;
    r.mutable_data()->set_size(data.size());
    int h = *(*ingest)->AddRegion(ImageKind::kPre, r);
    ASSERT_TRUE((*ingest)->WriteRegion(h, 0, data.data(), data.size(), nullptr).ok());
    EXPECT_EQ((*store)->ingests_in_flight(), 1);
    (*ingest)->Abort("test");
    EXPECT_EQ((*ingest)->Commit({}).status().code(), absl::StatusCode::kAborted);
  }
  EXPECT_EQ((*store)->ingests_in_flight(), 0);
  EXPECT_EQ((*store)->Stats().captures(), 0u);
  EXPECT_TRUE((*store)->ListCaptures({})->empty());
}

TEST(StoreTest, BackpressureBoundsInflightBytes) {
  TempDir dir;
  StoreOptions o = SmallOptions(dir.path());
  o.max_inflight_bytes = 2 * kChunk;
  o.workers = 1;
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok());
  auto ingest = (*store)->BeginCapture();
  const int kWrites = 16;
  std::vector<std::string> bufs;
  for (int i = 0; i < kWrites; ++i) bufs.push_back(RandomBytes(kChunk, 100 + i));
  v1::Region r;
  r.mutable_data()->set_size(kWrites * kChunk);
  int h = *(*ingest)->AddRegion(ImageKind::kPre, r);
  std::atomic<int> consumed{0};
  int max_outstanding = 0;
  for (int i = 0; i < kWrites; ++i) {
    ASSERT_TRUE((*ingest)
                    ->WriteRegion(h, static_cast<uint64_t>(i) * kChunk, bufs[i].data(), kChunk,
                                  [&] { consumed.fetch_add(1); })
                    .ok());
    max_outstanding = std::max(max_outstanding, i + 1 - consumed.load());
  }
  // WriteRegion returned with at most max_inflight_bytes (+ the chunk being
  // admitted) unconsumed.
  EXPECT_LE(max_outstanding, 3);
  auto id = (*ingest)->Commit({});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(consumed.load(), kWrites);
  EXPECT_EQ((*ingest)->Progress().bytes_received, kWrites * kChunk);
}

TEST(StoreTest, ConcurrentIngestsOfSameDataWriteEachChunkOnce) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  std::string data = RandomBytes(32 * kChunk, 14);
  const std::vector<std::string> ids = IngestConcurrently(**store, data, 4);
  EXPECT_EQ(NewRawBytes(**store, ids), data.size());  // every chunk written by exactly one ingest
  EXPECT_EQ((*store)->Stats().raw_bytes(), data.size());
  // Random chunks are stored raw: no second copy of any chunk in the packs.
  EXPECT_LT((*store)->Stats().stored_bytes(), data.size() + kChunk);
  for (const auto& id : ids) EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(id), 0), data);
}

TEST(StoreTest, CaptureIdsResolveByUniquePrefix) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  v1::CaptureManifest m;
  m.set_capture_id("cap-abc000000001");
  ASSERT_TRUE(IngestCapture(**store, {{0, TextBytes(kChunk, 1)}}, {}, m).ok());
  m.set_capture_id("cap-abc000000002");
  ASSERT_TRUE(IngestCapture(**store, {{0, TextBytes(kChunk, 1)}}, {}, m).ok());
  m.set_capture_id("cap-def000000003");
  ASSERT_TRUE(IngestCapture(**store, {{0, TextBytes(kChunk, 1)}}, {}, m).ok());

  EXPECT_EQ(*(*store)->ResolveCaptureId("cap-d"), "cap-def000000003");
  EXPECT_EQ(*(*store)->ResolveCaptureId("cap-abc000000002"), "cap-abc000000002");
  auto amb = (*store)->ResolveCaptureId("cap-abc");
  EXPECT_EQ(amb.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(amb.status().message().find("ambiguous"), std::string::npos);
  EXPECT_EQ((*store)->ResolveCaptureId("cap-fff").status().code(), absl::StatusCode::kNotFound);
  for (const char* bad : {"../x", "cap-../../etc", "CAP-ABC", "cap-abc0000000011", ""}) {
    auto r = (*store)->GetManifest(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("malformed capture id"), std::string::npos);
  }
  // Duplicate explicit id.
  EXPECT_EQ(IngestCapture(**store, {{0, TextBytes(kChunk, 1)}}, {}, m).status().code(),
            absl::StatusCode::kAlreadyExists);

  ASSERT_TRUE((*store)->DeleteCapture("cap-d").ok());
  EXPECT_EQ((*store)->GetManifest("cap-def000000003").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store)->ListCaptures({})->size(), 2u);
}

TEST(StoreTest, ListCapturesFiltersThroughCatalog) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  v1::CaptureManifest m;
  m.mutable_kernel()->set_demangled_name("gemm_kernel<float>");
  m.mutable_process()->set_pid(42);
  (*m.mutable_tags())["model"] = "llama";
  auto id1 = IngestCapture(**store, {{0, RandomBytes(kChunk, 1)}}, {}, m);
  m.mutable_kernel()->set_demangled_name("softmax");
  m.mutable_process()->set_pid(43);
  (*m.mutable_tags())["model"] = "bert";
  auto id2 = IngestCapture(**store, {{0, RandomBytes(kChunk, 2)}}, {}, m);
  ASSERT_TRUE(id1.ok() && id2.ok());
  v1::ListCapturesRequest f;
  f.set_kernel_contains("gemm");
  auto l = (*store)->ListCaptures(f);
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].capture_id(), *id1);
  EXPECT_EQ((*l)[0].logical_bytes(), kChunk);
  f.Clear();
  f.set_tag("model=bert");
  ASSERT_EQ((*store)->ListCaptures(f)->size(), 1u);
  EXPECT_EQ((*store)->ListCaptures(f)->at(0).capture_id(), *id2);
  f.Clear();
  f.set_pid(42);
  EXPECT_EQ((*store)->ListCaptures(f)->at(0).capture_id(), *id1);
  EXPECT_EQ((*store)->Stats().logical_bytes(), 2 * kChunk);
}

TEST(StoreTest, CatalogIsRebuiltWhenMissingOrCorrupt) {
  TempDir dir;
  std::string id;
  {
    auto store = Store::Open(SmallOptions(dir.path()));
    v1::CaptureManifest m;
    m.mutable_kernel()->set_demangled_name("rebuild_me");
    id = *IngestCapture(**store, {{0, RandomBytes(kChunk, 1)}}, {}, m);
  }
  for (int round = 0; round < 2; ++round) {
    const std::string db = dir.Sub("catalog.sqlite");
    for (const char* sfx : {"", "-wal", "-shm"}) std::filesystem::remove(db + sfx);
    if (round == 1) {
      std::ofstream f(db);
      f << std::string(10000, '\x5a');
    }
    auto store = Store::Open(SmallOptions(dir.path()));
    ASSERT_TRUE(store.ok()) << store.status();
    v1::ListCapturesRequest f;
    f.set_kernel_contains("rebuild");
    auto l = (*store)->ListCaptures(f);
    ASSERT_TRUE(l.ok()) << l.status();
    ASSERT_EQ(l->size(), 1u) << "round " << round;
    EXPECT_EQ((*l)[0].capture_id(), id);
  }
}

TEST(StoreTest, SecondOpenIsRefusedNamingHolderPid) {
  TempDir dir;
  auto first = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(first.ok());
  auto second = Store::Open(SmallOptions(dir.path()));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(absl::StrCat("pid ", ::getpid())), std::string::npos)
      << second.status();
  first->reset();
  EXPECT_TRUE(Store::Open(SmallOptions(dir.path())).ok());
}

TEST(StoreTest, OptionsAreValidated) {
  TempDir dir;
  StoreOptions o = SmallOptions(dir.path());
  o.chunk_size = 100000;
  EXPECT_EQ(Store::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.chunk_size = 8 << 20;
  EXPECT_EQ(Store::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.chunk_size = 128 << 10;
  ASSERT_TRUE(Store::Open(o).ok());
  o.chunk_size = 64 << 10;  // store was created with 128 KiB
  auto reopened = Store::Open(o);
  EXPECT_EQ(reopened.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(reopened.status().message().find("131072"), std::string::npos);
}

TEST(StoreTest, OpenRemovesTempFilesAndQuarantinesTornPacks) {
  TempDir dir;
  std::string id;
  {
    auto store = Store::Open(SmallOptions(dir.path()));
    id = *IngestCapture(**store, {{0, RandomBytes(2 * kChunk, 1)}});
  }
  ASSERT_TRUE(MakeDirs(dir.Sub("packs/ab")).ok());
  { std::ofstream(dir.Sub("packs/ab/tmp-deadbeef.pack")) << "partial"; }
  { std::ofstream(dir.Sub("refs/captures/tmp-1234")) << "partial"; }
  { std::ofstream(dir.Sub("packs/ab/ab00000000000000000000000000000000.pack")) << "no trailer"; }
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(CountFiles(dir.path(), "tmp-"), 0);
  EXPECT_TRUE(
      std::filesystem::exists(dir.Sub("packs/quarantine/ab00000000000000000000000000000000.pack")));
  EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(id), 0).size(), 2 * kChunk);
  auto problems = VerifyProblems(**store);
  ASSERT_EQ(problems.size(), 1u);  // the quarantined pack is reported
  EXPECT_NE(problems[0].what().find("quarantined"), std::string::npos);
  EXPECT_TRUE(VerifyProblems(**store, id).empty());
}

TEST(StoreTest, PutStoredChunkChecksDigest) {
  TempDir src_dir, dst_dir;
  auto src = Store::Open(SmallOptions(src_dir.path()));
  auto dst = Store::Open(SmallOptions(dst_dir.path()));
  ASSERT_TRUE(src.ok() && dst.ok());
  std::string data = TextBytes(3 * kChunk, 5);
  v1::CaptureManifest in;
  in.mutable_kernel()->set_demangled_name("exported");
  auto id = IngestCapture(**src, {{0x5000, data}}, {}, in);
  auto m = (*src)->GetManifest(*id);
  const auto& digests = m->pre().regions(0).data().chunk_digests();

  // Missing chunks: the import commit names the first one.
  auto early = (*dst)->CommitImportedManifest(*m);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);

  auto d0 = *Digest::FromBytes(digests[0]);
  auto c0 = (*src)->ReadStoredChunk(d0);
  ASSERT_TRUE(c0.ok());
  EXPECT_EQ(c0->codec, v1::CODEC_ZSTD);
  // Wrong digest for these bytes.
  auto d1 = *Digest::FromBytes(digests[1]);
  absl::Status bad = (*dst)->PutStoredChunk(d1, *c0);
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.message().find(d1.ToHex()), std::string::npos);
  for (const auto& raw : digests) {
    auto d = *Digest::FromBytes(raw);
    ASSERT_TRUE((*dst)->PutStoredChunk(d, *(*src)->ReadStoredChunk(d)).ok());
    ASSERT_TRUE((*dst)->PutStoredChunk(d, *(*src)->ReadStoredChunk(d)).ok());  // no-op
  }
  auto imported = (*dst)->CommitImportedManifest(*m);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(*imported, *id);
  EXPECT_TRUE((*dst)->HasChunk(d0));
  EXPECT_EQ(ReadPre(**dst, *(*dst)->GetManifest(*id), 0), data);
  EXPECT_EQ((*dst)->Stats().unique_chunks(), 3u);
}

// The producer's bytes may be shared memory that a hostile sender keeps
// writing after handing it over (an agent's ring slot). Whatever it does, a
// stored chunk's bytes must hash to the address they are stored under, or
// later captures that dedup against it would restore the wrong data.
TEST(StoreTest, StoredChunksMatchTheirDigestWhileTheSourceKeepsChanging) {
  TempDir dir;
  StoreOptions o = SmallOptions(dir.path());
  o.max_inflight_bytes = 64ull << 20;
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  constexpr size_t kChunks = 128;
  std::vector<uint64_t> shared(kChunks * kChunk / 8, 1);
  std::atomic<bool> stop{false};
  std::thread hostile([&] {
    for (uint64_t round = 2; !stop.load(std::memory_order_relaxed); ++round) {
      for (uint64_t& word : shared) {
        std::atomic_ref<uint64_t>(word).store(round, std::memory_order_relaxed);
      }
    }
  });
  auto ingest = (*store)->BeginCapture();
  ASSERT_TRUE(ingest.ok());
  v1::Region region;
  region.set_va(0x1000);
  region.mutable_data()->set_size(kChunks * kChunk);
  auto h = (*ingest)->AddRegion(ImageKind::kPre, region);
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE((*ingest)->WriteRegion(*h, 0, shared.data(), kChunks * kChunk, [] {}).ok());
  v1::CaptureManifest m;
  auto id = (*ingest)->Commit(m);
  stop = true;
  hostile.join();
  ASSERT_TRUE(id.ok()) << id.status();
  auto manifest = (*store)->GetManifest(*id);
  ASSERT_TRUE(manifest.ok());
  int checked = 0;
  for (const std::string& raw : manifest->pre().regions(0).data().chunk_digests()) {
    if (raw.empty()) continue;
    auto d = Digest::FromBytes(raw);
    ASSERT_TRUE(d.ok());
    auto bytes = (*store)->ReadChunk(*d);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(Sha256(*bytes), *d) << "chunk " << checked << " stored under the wrong address";
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(kChunks));
  EXPECT_TRUE(VerifyProblems(**store).empty());
}

TEST(StoreTest, UnknownChunkIsNotFound) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  Digest d = Sha256("nothing");
  auto r = (*store)->ReadChunk(d);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(d.ToHex()), std::string::npos);
  EXPECT_FALSE((*store)->HasChunk(d));
}

}  // namespace
}  // namespace kerncap::store
