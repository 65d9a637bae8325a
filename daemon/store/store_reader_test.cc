// StoreReader: read-only access to a store a live Store (the daemon) owns.
#include "format/store_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/file_util.h"
#include "daemon/store/store.h"
#include "daemon/store/store_test_util.h"
#include "gtest/gtest.h"

namespace kerncap::store {
namespace {

using testing::IngestCapture;
using testing::RandomBytes;
using testing::SmallOptions;
using testing::TempDir;
using testing::TextBytes;

constexpr size_t kChunk = 64 << 10;
namespace fs = std::filesystem;

// A region's bytes through the reader (zero chunks expanded).
absl::StatusOr<std::string> ReadRegion(const StoreCapture& cap, const v1::Region& r) {
  const v1::ChunkList& l = r.data();
  std::string out(l.size(), '\0');
  for (int i = 0; i < l.chunk_digests_size(); ++i) {
    const uint64_t off = static_cast<uint64_t>(i) * l.chunk_size();
    const uint32_t len = static_cast<uint32_t>(std::min<uint64_t>(l.chunk_size(), l.size() - off));
    if (l.chunk_digests(i).empty()) continue;
    auto d = Digest::FromBytes(l.chunk_digests(i));
    if (!d.ok()) return d.status();
    if (absl::Status st = cap.ReadChunkInto(*d, len, out.data() + off); !st.ok()) return st;
  }
  return out;
}

// Every file and directory under `root`: kind, size, mtime (ns).
std::map<std::string, std::tuple<bool, uint64_t, int64_t>> Snapshot(const std::string& root) {
  std::map<std::string, std::tuple<bool, uint64_t, int64_t>> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0) continue;
    out[e.path().string()] = {S_ISDIR(st.st_mode), static_cast<uint64_t>(st.st_size),
                              static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                                  st.st_mtim.tv_nsec};
  }
  return out;
}

std::vector<testing::TestRegion> Regions(uint64_t seed) {
  return {{0x10000, TextBytes(3 * kChunk + 100, seed)},
          {0x90000, RandomBytes(5 * kChunk, seed)},
          {0xA0000, std::string(2 * kChunk, '\0')}};
}

void ExpectCaptureReads(const StoreCapture& cap, const std::vector<testing::TestRegion>& regions) {
  ASSERT_EQ(cap.manifest().pre().regions_size(), static_cast<int>(regions.size()));
  for (size_t i = 0; i < regions.size(); ++i) {
    auto bytes = ReadRegion(cap, cap.manifest().pre().regions(static_cast<int>(i)));
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_TRUE(*bytes == regions[i].bytes) << "region " << i;
  }
}

TEST(StoreReaderTest, ReadsCapturesWhileTheWriterKeepsIngesting) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status();
  const auto regions = Regions(1);
  auto id = IngestCapture(**store, regions, {{0x10000, TextBytes(3 * kChunk + 100, 2)}});
  ASSERT_TRUE(id.ok()) << id.status();

  auto reader = StoreReader::Open(dir.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->chunk_size(), kChunk);
  EXPECT_EQ(*(*reader)->ResolveCaptureId(id->substr(0, 7)), *id);
  auto cap = (*reader)->OpenCapture(id->substr(0, 7));
  ASSERT_TRUE(cap.ok()) << cap.status();
  EXPECT_EQ((*cap)->capture_id(), *id);
  EXPECT_EQ((*cap)->manifest().SerializeAsString(),
            (*store)->GetManifest(*id)->SerializeAsString());
  // 4 text + 5 random pre chunks, 4 changed post chunks (zero chunks are not stored).
  EXPECT_EQ((*cap)->chunk_count(), 13u);

  // The writer keeps committing captures (new packs appear, tmp-* packs are
  // being appended to) while the reader re-reads the first one and opens the
  // writer's newest ones.
  absl::Mutex mu;
  std::map<std::string, uint64_t> committed;  // id -> seed
  std::atomic<bool> writer_done{false};
  std::thread writer([&] {
    for (uint64_t seed = 100; seed < 130; ++seed) {
      auto more = IngestCapture(**store, Regions(seed));
      EXPECT_TRUE(more.ok()) << more.status();
      if (!more.ok()) break;
      absl::MutexLock l(&mu);
      committed[*more] = seed;
    }
    writer_done = true;
  });
  int newer_read = 0;
  for (int round = 0; !writer_done || round < 5; ++round) {
    ExpectCaptureReads(**cap, regions);
    std::pair<std::string, uint64_t> latest;
    {
      absl::MutexLock l(&mu);
      if (!committed.empty()) latest = *committed.rbegin();
    }
    if (latest.first.empty()) continue;
    // The newest by id, not by time: any committed capture will do.
    auto other = (*reader)->OpenCapture(latest.first);
    ASSERT_TRUE(other.ok()) << other.status();
    ExpectCaptureReads(**other, Regions(latest.second));
    ++newer_read;
  }
  writer.join();
  EXPECT_GT(newer_read, 0);
  auto ids = (*reader)->ListCaptureIds();
  ASSERT_TRUE(ids.ok());
  absl::MutexLock l(&mu);
  EXPECT_EQ(ids->size(), committed.size() + 1);
}

TEST(StoreReaderTest, LeavesTheStoreUntouched) {
  TempDir dir;
  const auto regions = Regions(3);
  std::string id;
  {
    auto store = Store::Open(SmallOptions(dir.path()));
    ASSERT_TRUE(store.ok()) << store.status();
    auto i = IngestCapture(**store, regions);
    ASSERT_TRUE(i.ok()) << i.status();
    id = *i;
  }
  // With a writer holding the lock and without one.
  for (bool with_writer : {true, false}) {
    std::unique_ptr<Store> writer;
    if (!with_writer) {
      // A leftover of an interrupted write, which Store::Open would remove.
      ASSERT_TRUE(WriteFileAtomic(dir.Sub("packs/tmp-leftover.pack"), "partial").ok());
    } else {
      auto s = Store::Open(SmallOptions(dir.path()));
      ASSERT_TRUE(s.ok()) << s.status();
      writer = std::move(*s);
    }
    const auto before = Snapshot(dir.path());
    const std::string lock_before = *ReadFile(dir.Sub("LOCK"));
    {
      auto reader = StoreReader::Open(dir.path());
      ASSERT_TRUE(reader.ok()) << reader.status();
      ASSERT_TRUE((*reader)->ListCaptureIds().ok());
      auto cap = (*reader)->OpenCapture(id);
      ASSERT_TRUE(cap.ok()) << cap.status();
      ExpectCaptureReads(**cap, regions);
      EXPECT_FALSE((*reader)->OpenCapture("cap-ffffffffffff").ok());
    }
    EXPECT_EQ(Snapshot(dir.path()), before);
    EXPECT_EQ(*ReadFile(dir.Sub("LOCK")), lock_before);
    if (with_writer) {
      // The reader did not take (or break) the daemon's lock.
      auto second = Store::Open(SmallOptions(dir.path()));
      EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
    }
  }
  EXPECT_TRUE(fs::exists(dir.Sub("packs/tmp-leftover.pack")));
}

TEST(StoreReaderTest, ClearErrorsForMissingOrForeignDirectories) {
  TempDir dir;
  auto missing = StoreReader::Open(dir.Sub("nope"));
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), dir.Sub("nope")));

  auto empty = StoreReader::Open(dir.path());
  EXPECT_TRUE(absl::IsFailedPrecondition(empty.status())) << empty.status();
  EXPECT_TRUE(absl::StrContains(empty.status().message(), "not a kerncap store"));

  ASSERT_TRUE(WriteFileAtomic(dir.Sub("file"), "x").ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(StoreReader::Open(dir.Sub("file")).status()));

  ASSERT_TRUE(WriteFileAtomic(dir.Sub("STORE"), "\x01\x02garbage\nchunk_size=zz\n").ok());
  auto garbage = StoreReader::Open(dir.path());
  EXPECT_TRUE(absl::IsFailedPrecondition(garbage.status())) << garbage.status();

  ASSERT_TRUE(WriteFileAtomic(dir.Sub("STORE"), "format=1\nchunk_size=65536\n").ok());
  auto no_refs = StoreReader::Open(dir.path());
  EXPECT_TRUE(absl::IsFailedPrecondition(no_refs.status())) << no_refs.status();

  ASSERT_TRUE(MakeDirs(dir.Sub("refs/captures")).ok());
  auto reader = StoreReader::Open(dir.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE(absl::IsNotFound((*reader)->OpenCapture("cap-12").status()));
  EXPECT_TRUE(absl::IsInvalidArgument((*reader)->OpenCapture("../etc").status()));
}

TEST(StoreReaderTest, OpenCaptureSurvivesGcDeletingAndRewritingItsPacks) {
  TempDir dir;
  StoreOptions o = SmallOptions(dir.path());
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  // `both` and `gone` land in one pack; `keep` reuses only `both`'s chunks.
  const std::string both = RandomBytes(4 * kChunk, 10);
  const std::string gone = RandomBytes(4 * kChunk, 11);
  auto id_all = IngestCapture(**store, {{0x1000, both}, {0x900000, gone}});
  auto id_keep = IngestCapture(**store, {{0x1000, both}});
  ASSERT_TRUE(id_all.ok() && id_keep.ok());

  auto reader = StoreReader::Open(dir.path());
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto cap_all = (*reader)->OpenCapture(*id_all);
  auto cap_keep = (*reader)->OpenCapture(*id_keep);
  ASSERT_TRUE(cap_all.ok() && cap_keep.ok());

  // Deleting `all` makes half its pack dead: GC rewrites `both` into a new
  // pack and unlinks the old one; `gone`'s chunks are freed.
  ASSERT_TRUE((*store)->DeleteCapture(*id_all).ok());
  auto gc = (*store)->RunGc(false);
  ASSERT_TRUE(gc.ok()) << gc.status();
  EXPECT_EQ(gc->packs_rewritten(), 1u);

  // Opened before the GC: still readable, deleted capture included.
  ExpectCaptureReads(**cap_keep, {{0x1000, both}});
  ExpectCaptureReads(**cap_all, {{0x1000, both}, {0x900000, gone}});
  // Opened after: finds the rewritten pack; the deleted capture is gone.
  auto again = (*reader)->OpenCapture(*id_keep);
  ASSERT_TRUE(again.ok()) << again.status();
  ExpectCaptureReads(**again, {{0x1000, both}});
  EXPECT_TRUE(absl::IsNotFound((*reader)->OpenCapture(*id_all).status()));
}

TEST(StoreReaderTest, CorruptChunkIsDataLossNamingTheChunk) {
  TempDir dir;
  const std::string bytes = RandomBytes(2 * kChunk, 20);
  std::string id;
  {
    auto store = Store::Open(SmallOptions(dir.path()));
    ASSERT_TRUE(store.ok());
    auto i = IngestCapture(**store, {{0x1000, bytes}});
    ASSERT_TRUE(i.ok());
    id = *i;
  }
  std::string pack;
  for (const auto& e : fs::recursive_directory_iterator(dir.Sub("packs"))) {
    if (e.path().extension() == ".pack") pack = e.path().string();
  }
  ASSERT_FALSE(pack.empty());
  const int fd = ::open(pack.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c;
  ASSERT_EQ(::pread(fd, &c, 1, 100), 1);
  c = static_cast<char>(c ^ 0x40);
  ASSERT_EQ(::pwrite(fd, &c, 1, 100), 1);
  ::close(fd);

  auto reader = StoreReader::Open(dir.path());
  ASSERT_TRUE(reader.ok());
  auto cap = (*reader)->OpenCapture(id);
  ASSERT_TRUE(cap.ok()) << cap.status();
  auto read = ReadRegion(**cap, (*cap)->manifest().pre().regions(0));
  ASSERT_TRUE(absl::IsDataLoss(read.status())) << read.status();
  EXPECT_TRUE(absl::StrContains(read.status().message(), "checksum mismatch"));
  EXPECT_TRUE(absl::StrContains(read.status().message(), "chunk "));
  EXPECT_TRUE(absl::StrContains(read.status().message(), "in pack "));
}

}  // namespace
}  // namespace kerncap::store
