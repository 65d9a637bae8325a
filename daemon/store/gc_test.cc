#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "daemon/store/store.h"
#include "daemon/store/store_test_util.h"
#include "gtest/gtest.h"

namespace kerncap::store {
namespace {

using testing::IngestCapture;
using testing::RandomBytes;
using testing::ReadPre;
using testing::SmallOptions;
using testing::TempDir;
using testing::VerifyProblems;

constexpr size_t kChunk = 64 << 10;

int CountPacks(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir + "/packs")) {
    if (e.path().extension() == ".pack") ++n;
  }
  return n;
}

TEST(GcTest, DeletedCaptureChunksAreReclaimed) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  std::string keep = RandomBytes(4 * kChunk, 1);
  std::string drop = RandomBytes(4 * kChunk, 2);
  auto id_keep = IngestCapture(**store, {{0x1000, keep}});
  auto id_drop = IngestCapture(**store, {{0x1000, drop}});
  ASSERT_TRUE(id_keep.ok() && id_drop.ok());
  EXPECT_EQ(CountPacks(dir.path()), 2);  // one pack per commit
  ASSERT_TRUE((*store)->DeleteCapture(*id_drop).ok());

  auto dry = (*store)->RunGc(true);
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_TRUE(dry->dry_run());
  EXPECT_EQ(dry->dead_chunks(), 4u);
  EXPECT_EQ(dry->packs_deleted(), 1u);
  EXPECT_EQ(CountPacks(dir.path()), 2);  // dry run changes nothing

  auto report = (*store)->RunGc(false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->dead_chunks(), 4u);
  EXPECT_EQ(report->live_chunks(), 4u);
  EXPECT_EQ(report->packs_deleted(), 1u);
  EXPECT_GE(report->reclaimed_bytes(), drop.size());
  EXPECT_EQ(CountPacks(dir.path()), 1);
  EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(*id_keep), 0), keep);
  EXPECT_TRUE(VerifyProblems(**store).empty());
}

TEST(GcTest, MostlyDeadPackIsRewritten) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  std::string a = RandomBytes(kChunk, 1);
  std::string b = RandomBytes(6 * kChunk, 2);
  // One ingest with both regions -> one pack; then a capture sharing only a.
  auto both = IngestCapture(**store, {{0x1000, a}, {0x2000000, b}});
  auto only_a = IngestCapture(**store, {{0x1000, a}});
  ASSERT_TRUE(both.ok() && only_a.ok());
  ASSERT_TRUE((*store)->DeleteCapture(*both).ok());
  auto report = (*store)->RunGc(false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->packs_rewritten(), 1u);
  EXPECT_EQ(report->dead_chunks(), 6u);
  EXPECT_EQ(CountPacks(dir.path()), 1);
  EXPECT_LT((*store)->Stats().stored_bytes(), 2 * kChunk);
  EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(*only_a), 0), a);
  EXPECT_TRUE(VerifyProblems(**store).empty());
  // Survives a reopen (the index is rebuilt from the new pack).
  store->reset();
  store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(*only_a), 0), a);
}

TEST(GcTest, InFlightIngestChunksArePinned) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  std::string shared = RandomBytes(3 * kChunk, 1);
  auto old_id = IngestCapture(**store, {{0x1000, shared}});
  ASSERT_TRUE(old_id.ok());

  // An ingest dedups against the old capture's chunks...
  auto ingest = (*store)->BeginCapture();
  v1::Region r;
  r.mutable_data()->set_size(shared.size() + kChunk);
  int h = *(*ingest)->AddRegion(ImageKind::kPre, r);
  std::atomic<bool> consumed{false};
  ASSERT_TRUE(
      (*ingest)->WriteRegion(h, 0, shared.data(), shared.size(), [&] { consumed = true; }).ok());
  // ...then the old capture is deleted and GC runs before the ingest commits.
  ASSERT_TRUE((*store)->DeleteCapture(*old_id).ok());
  // on_consumed runs after the workers hashed (and so pinned) the chunks.
  while (!consumed) std::this_thread::yield();
  std::string tail = RandomBytes(kChunk, 9);
  ASSERT_TRUE((*ingest)->WriteRegion(h, shared.size(), tail.data(), tail.size(), nullptr).ok());
  auto report = (*store)->RunGc(false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->dead_chunks(), 0u);
  auto id = (*ingest)->Commit({});
  ASSERT_TRUE(id.ok()) << id.status();
  auto m = (*store)->GetManifest(*id);
  EXPECT_EQ(ReadPre(**store, *m, 0), shared + tail);
  EXPECT_TRUE(VerifyProblems(**store).empty());
  // Once nothing references them any more they do go.
  ASSERT_TRUE((*store)->DeleteCapture(*id).ok());
  EXPECT_EQ((*store)->RunGc(false)->dead_chunks(), 4u);
  EXPECT_EQ((*store)->Stats().unique_chunks(), 0u);
}

// Ingests, deletes and GCs race; every capture that survives must read back
// exactly and Verify must stay clean (exercises the pinning protocol).
TEST(GcTest, ConcurrentIngestDeleteAndGcKeepStoreConsistent) {
  TempDir dir;
  StoreOptions o = SmallOptions(dir.path());
  o.pack_target_bytes = 4 * kChunk;
  o.gc_rewrite_threshold = 0.0;  // rewrite whenever anything is dead
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok());
  // A small pool of chunk contents so captures share chunks heavily.
  std::vector<std::string> pool;
  for (int i = 0; i < 12; ++i) pool.push_back(RandomBytes(kChunk, 500 + i));
  auto content = [&](int n) {
    std::string s;
    for (int j = 0; j < 3; ++j) s += pool[(n * 5 + j * 3) % pool.size()];
    return s + RandomBytes(kChunk, 9000 + n);  // one chunk only this capture has
  };
  std::atomic<bool> stop{false};
  absl::Mutex mu;
  std::vector<std::pair<std::string, int>> live;  // id, content number
  std::thread deleter([&] {
    while (!stop) {
      std::string victim;
      {
        absl::MutexLock l(&mu);
        if (live.size() > 3) {
          victim = live.front().first;
          live.erase(live.begin());
        }
      }
      if (!victim.empty()) {
        EXPECT_TRUE((*store)->DeleteCapture(victim).ok());
      }
      std::this_thread::yield();
    }
  });
  std::atomic<uint64_t> dead{0}, rewritten{0};
  std::thread gc([&] {
    while (!stop) {
      auto r = (*store)->RunGc(false);
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok()) {
        dead += r->dead_chunks();
        rewritten += r->packs_rewritten() + r->packs_deleted();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  for (int n = 0; n < 40; ++n) {
    auto id = IngestCapture(**store, {{0x1000, content(n)}});
    ASSERT_TRUE(id.ok()) << id.status();
    absl::MutexLock l(&mu);
    live.emplace_back(*id, n);
  }
  stop = true;
  deleter.join();
  gc.join();
  ASSERT_TRUE((*store)->RunGc(false).ok());
  EXPECT_GT(dead.load(), 0u);  // the race was real: GC freed and moved chunks
  EXPECT_GT(rewritten.load(), 0u);
  for (const auto& [id, n] : live) {
    auto m = (*store)->GetManifest(id);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(ReadPre(**store, *m, 0), content(n)) << id;
  }
  EXPECT_TRUE(VerifyProblems(**store).empty());
}

}  // namespace
}  // namespace kerncap::store
