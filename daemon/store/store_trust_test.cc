// Tests of what the store does with damaged, foreign or hostile files in its
// own directory: it names every capture a damage hurts, never serves one
// capture as another, never deletes what the user did not name, and keeps
// its files private whatever the umask.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <sqlite3.h>

#include "absl/strings/match.h"
#include "common/file_util.h"
#include "format/manifest_store.h"
#include "daemon/store/store.h"
#include "daemon/store/store_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::store {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::IngestCapture;
using testing::SmallOptions;
using testing::TempDir;
using testing::TextBytes;
using testing::VerifyProblems;

constexpr size_t kChunk = 64 << 10;

std::string RefPath(const TempDir& dir, const std::string& id) {
  return dir.Sub("refs/captures/" + id);
}
std::string RefHex(const TempDir& dir, const std::string& id) {
  std::string s = *ReadFile(RefPath(dir, id));
  return s.substr(0, 64);
}
std::string ManifestPath(const TempDir& dir, const std::string& hex) {
  return dir.Sub("manifests/" + hex.substr(0, 2) + "/" + hex);
}
std::vector<std::string> PackFiles(const TempDir& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir.Sub("packs"))) {
    if (e.is_regular_file() && e.path().extension() == ".pack" &&
        e.path().parent_path().filename() != "quarantine") {
      out.push_back(e.path().string());
    }
  }
  return out;
}

// Three captures (kernels k0, k1, k2) in a closed store; their ids.
std::vector<std::string> ThreeCaptures(const TempDir& dir) {
  auto store = Store::Open(SmallOptions(dir.path()));
  EXPECT_TRUE(store.ok()) << store.status();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    v1::CaptureManifest m;
    m.mutable_kernel()->set_mangled_name("k" + std::to_string(i));
    ids.push_back(*IngestCapture(**store, {{0x1000, TextBytes(kChunk, 10 + i)}}, {}, m));
  }
  return ids;
}

// What `kerncapctl captures` would answer: id -> kernel.
std::map<std::string, std::string> Listed(Store& store) {
  auto list = store.ListCaptures(v1::ListCapturesRequest());
  EXPECT_TRUE(list.ok()) << list.status();
  std::map<std::string, std::string> out;
  if (list.ok()) {
    for (const auto& s : *list) out[s.capture_id()] = s.kernel();
  }
  return out;
}

void Sql(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// The catalog is derived: rows that disagree with the refs and manifests
// are re-derived and the log says so; the capture list never changes
// silently (issue 28). Before, a lost child row dropped a capture from the
// list, a row without a ref listed a capture that does not exist and a
// damaged summary failed every list.
TEST(StoreTrustTest, ACatalogThatDisagreesWithTheRefsIsRepairedAndSaysSo) {
  TempDir dir;
  const std::vector<std::string> ids = ThreeCaptures(dir);
  const std::string db = dir.Sub("catalog.sqlite");
  const std::string ghost = "cap-00000000000000000000000000000000";
  Sql(db, "DELETE FROM kernels WHERE capture_id='" + ids[0] + "';"
          "UPDATE captures SET summary=x'ffffffff', manifest_digest='00' WHERE id='" + ids[1] +
          "';"
          "DELETE FROM captures WHERE id='" + ids[2] + "';"
          "INSERT INTO captures SELECT '" + ghost +
          "', created_ms, manifest_digest, logical_bytes, summary, owner_uid FROM captures WHERE id='" +
          ids[0] + "';");
  ::testing::internal::CaptureStderr();
  auto store = Store::Open(SmallOptions(dir.path()));
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(Listed(**store), (std::map<std::string, std::string>{
                                 {ids[0], "k0"}, {ids[1], "k1"}, {ids[2], "k2"}}));
  EXPECT_THAT(log, HasSubstr("\"store.catalog_repaired\""));
  EXPECT_THAT(log, HasSubstr("\"missing\":1"));
  EXPECT_THAT(log, HasSubstr("\"not_in_refs\":1"));
  EXPECT_THAT(log, HasSubstr("\"disagreeing\":2"));
  EXPECT_THAT(log, HasSubstr(ghost));
  // A clean catalog is left alone and logs nothing of the kind.
  store->reset();
  ::testing::internal::CaptureStderr();
  store = Store::Open(SmallOptions(dir.path()));
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), Not(HasSubstr("catalog_repaired")));
  EXPECT_EQ(Listed(**store).size(), 3u);
}

// A truncated or overwritten catalog file is rebuilt from the refs: every
// capture is listed again.
TEST(StoreTrustTest, ATruncatedOrCorruptedCatalogIsRebuiltWithEveryCapture) {
  TempDir dir;
  const std::vector<std::string> ids = ThreeCaptures(dir);
  const std::string db = dir.Sub("catalog.sqlite");
  const std::map<std::string, std::string> want = {{ids[0], "k0"}, {ids[1], "k1"}, {ids[2], "k2"}};
  const uintmax_t size = fs::file_size(db);
  ASSERT_GT(size, 4096u);
  for (const char* damage : {"half", "header", "empty", "garbage"}) {
    SCOPED_TRACE(damage);
    const std::string what = damage;
    if (what == "half") {
      fs::resize_file(db, size / 2);
    } else if (what == "header") {
      fs::resize_file(db, 60);
    } else if (what == "empty") {
      fs::resize_file(db, 0);
    } else {
      std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(4096);
      const std::string junk(4096, '\x5a');
      f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
    ::testing::internal::CaptureStderr();
    auto store = Store::Open(SmallOptions(dir.path()));
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ(Listed(**store), want) << log;
    EXPECT_THAT(log, HasSubstr("catalog_re")) << "the damage is named in the log";
  }
}

TEST(StoreTrustTest, ABarePrefixNeverMatches) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  auto id = IngestCapture(**store, {{0x1000, TextBytes(kChunk, 1)}});
  ASSERT_TRUE(id.ok());
  EXPECT_EQ((*store)->ResolveCaptureId("cap-").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE((*store)->DeleteCapture("cap-").ok());
  EXPECT_TRUE((*store)->GetManifest(*id).ok());  // still there
  EXPECT_EQ(*(*store)->ResolveCaptureId(id->substr(0, 5)), *id);
}

TEST(StoreTrustTest, VerifyNamesEveryCaptureUsingADamagedChunk) {
  TempDir dir;
  std::string a, b, c;
  const std::string shared = TextBytes(kChunk, 7);
  {
    auto store = Store::Open(SmallOptions(dir.path()));
    a = *IngestCapture(**store, {{0x1000, shared}});
    b = *IngestCapture(**store, {{0x9000, shared}});
    c = *IngestCapture(**store, {{0x1000, TextBytes(kChunk, 8)}});
  }
  // Flip a byte of the first blob of every pack (the shared chunk's is
  // among them; c's chunk may be too).
  for (const std::string& pack : PackFiles(dir)) {
    std::fstream f(pack, std::ios::in | std::ios::out | std::ios::binary);
    char byte;
    f.seekg(10);
    f.read(&byte, 1);
    byte ^= 0x5a;
    f.seekp(10);
    f.write(&byte, 1);
  }
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  std::set<std::string> named;
  for (const auto& p : VerifyProblems(**store)) named.insert(p.capture_id());
  EXPECT_TRUE(named.contains(a)) << "a uses the damaged chunk";
  EXPECT_TRUE(named.contains(b)) << "b uses the damaged chunk too";
}

TEST(StoreTrustTest, AMissingManifestIsReportedAndIsDataLoss) {
  TempDir dir;
  std::string id, other;
  {
    auto store = Store::Open(SmallOptions(dir.path()));
    id = *IngestCapture(**store, {{0x1000, TextBytes(kChunk, 1)}});
    other = *IngestCapture(**store, {{0x1000, TextBytes(kChunk, 2)}});
  }
  ASSERT_TRUE(fs::remove(ManifestPath(dir, RefHex(dir, id))));
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  auto m = (*store)->GetManifest(id);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss) << m.status();
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("is missing"));
  auto problems = VerifyProblems(**store);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].capture_id(), id);
  EXPECT_THAT(problems[0].what(), HasSubstr("is missing"));
  // GC cannot know what the capture references: it refuses to sweep.
  EXPECT_FALSE((*store)->RunGc(false).ok());
  EXPECT_TRUE((*store)->GetManifest(other).ok());
}

TEST(StoreTrustTest, ReadsOfChunksOfAQuarantinedPackAreDataLoss) {
  TempDir dir;
  std::string id;
  {
    auto store = Store::Open(SmallOptions(dir.path()));
    id = *IngestCapture(**store, {{0x1000, TextBytes(3 * kChunk, 1)}});
  }
  for (const std::string& pack : PackFiles(dir)) fs::resize_file(pack, fs::file_size(pack) - 3);
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  auto m = (*store)->GetManifest(id);
  ASSERT_TRUE(m.ok());
  auto d = Digest::FromBytes(m->pre().regions(0).data().chunk_digests(0));
  ASSERT_TRUE(d.ok());
  auto read = (*store)->ReadChunk(*d);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("quarantined"));
  EXPECT_EQ((*store)->ReadStoredChunk(*d).status().code(), absl::StatusCode::kDataLoss);
}

// refs/captures/A holding B's manifest digest: A must not be served as B,
// and deleting A must not take B's manifest with it.
TEST(StoreTrustTest, ARefNamingAnotherCapturesManifestIsNeverServedOrDeletesIt) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  std::string a = *IngestCapture(**store, {{0x1000, TextBytes(kChunk, 1)}});
  std::string b = *IngestCapture(**store, {{0x1000, TextBytes(kChunk, 2)}});
  const std::string a_hex = RefHex(dir, a);
  ASSERT_TRUE(WriteFileAtomic(RefPath(dir, a), RefHex(dir, b) + "\n").ok());
  auto m = (*store)->GetManifest(a);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("belongs to capture " + b));
  auto problems = VerifyProblems(**store);
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems[0].capture_id(), a);
  ASSERT_TRUE((*store)->DeleteCapture(a).ok());
  auto mb = (*store)->GetManifest(b);
  ASSERT_TRUE(mb.ok()) << mb.status();
  EXPECT_EQ(mb->capture_id(), b);
  EXPECT_TRUE(fs::exists(ManifestPath(dir, a_hex)));  // an orphan now, removed at next open
}

// A damaged ref (garbage, or naming another capture) must not cost the
// capture its manifest: the next Open points the ref back at it.
TEST(StoreTrustTest, ADamagedRefDoesNotCostItsCapturesManifest) {
  TempDir dir;
  std::string a, b;
  {
    auto store = Store::Open(SmallOptions(dir.path()));
    a = *IngestCapture(**store, {{0x1000, TextBytes(kChunk, 1)}});
    b = *IngestCapture(**store, {{0x1000, TextBytes(kChunk, 2)}});
  }
  ASSERT_TRUE(WriteFileAtomic(RefPath(dir, a), "not a digest\n").ok());
  ASSERT_TRUE(WriteFileAtomic(RefPath(dir, b), RefHex(dir, b).substr(0, 60) + "ffff\n").ok());
  for (int open = 0; open < 2; ++open) {
    auto store = Store::Open(SmallOptions(dir.path()));
    ASSERT_TRUE(store.ok());
    for (const std::string& id : {a, b}) {
      auto m = (*store)->GetManifest(id);
      ASSERT_TRUE(m.ok()) << id << ": " << m.status();
      EXPECT_EQ(m->capture_id(), id);
    }
    EXPECT_TRUE(VerifyProblems(**store).empty());
  }
}

TEST(StoreTrustTest, AManifestThatViolatesTheFormatIsDataLossNotAnAllocation) {
  TempDir dir;
  std::string id;
  {
    auto store = Store::Open(SmallOptions(dir.path()));
    id = *IngestCapture(**store, {{0x1000, TextBytes(kChunk, 1)}});
  }
  // What a crafted import could leave behind before imports were checked:
  // a code object that claims 4 GiB and holds one chunk.
  ManifestStore manifests(dir.path());
  auto m = manifests.ReadCaptureManifest(id);
  ASSERT_TRUE(m.ok());
  v1::CodeObject* co = m->add_code_objects();
  co->mutable_data()->set_size(4ull << 30);
  co->mutable_data()->set_chunk_size(kChunk);
  co->mutable_data()->add_chunk_digests(m->pre().regions(0).data().chunk_digests(0));
  auto hex = manifests.WriteManifest(*m);
  ASSERT_TRUE(hex.ok());
  ASSERT_TRUE(manifests.WriteRef(id, *hex).ok());
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  auto got = (*store)->GetManifest(id);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("malformed manifest: code object"));
  // And a new import of it is refused before anything is published.
  m->clear_capture_id();
  auto imported = (*store)->CommitImportedManifest(*m);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument) << imported.status();
}

TEST(StoreTrustTest, TheStoreIsPrivateWhateverTheUmask) {
  TempDir dir;
  const mode_t old = ::umask(0);
  {
    auto store = Store::Open(SmallOptions(dir.Sub("store")));
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE(IngestCapture(**store, {{0x1000, TextBytes(3 * kChunk, 1)}}).ok());
    ASSERT_TRUE((*store)->RunGc(false).ok());
  }
  ::umask(old);
  int checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir.Sub("store"))) {
    struct stat st;
    ASSERT_EQ(::lstat(e.path().c_str(), &st), 0);
    const mode_t mode = st.st_mode & 07777;
    if (S_ISDIR(st.st_mode)) {
      EXPECT_EQ(mode & ~0750, 0u) << e.path() << " is " << std::oct << mode;
    } else {
      EXPECT_EQ(mode & ~0640, 0u) << e.path() << " is " << std::oct << mode;
    }
    ++checked;
  }
  EXPECT_GT(checked, 8);
  struct stat root;
  ASSERT_EQ(::stat(dir.Sub("store").c_str(), &root), 0);
  EXPECT_EQ(root.st_mode & 0007, 0u);
}

TEST(StoreTrustTest, UnknownStoreFormatAndChunkSizeMismatchSayWhatIsWrong) {
  TempDir dir;
  { ASSERT_TRUE(Store::Open(SmallOptions(dir.path())).ok()); }
  StoreOptions other = SmallOptions(dir.path());
  other.chunk_size = 1 << 20;
  auto mismatch = Store::Open(other);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(mismatch.status().message()),
              HasSubstr("was created with chunk_size 65536, not 1048576"));
  ASSERT_TRUE(WriteFileAtomic(dir.Sub("STORE"), "format=2\nchunk_size=65536\n").ok());
  auto future = Store::Open(SmallOptions(dir.path()));
  EXPECT_EQ(future.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(future.status().message()), HasSubstr("store format 2"));
  ASSERT_TRUE(WriteFileAtomic(dir.Sub("STORE"), "chunk_size=65536\n").ok());
  EXPECT_THAT(std::string(Store::Open(SmallOptions(dir.path())).status().message()),
              HasSubstr("store format (none)"));
}

// `show` (the footprint of one capture) used to read every other manifest:
// its cost grew with the store. Now it reads the capture's own manifest.
TEST(StoreTrustTest, AFootprintReadsOnlyItsOwnManifest) {
  TempDir dir;
  std::vector<std::string> ids;
  const std::string shared = TextBytes(kChunk, 99);
  {
    auto store = Store::Open(SmallOptions(dir.path()));
    for (int i = 0; i < 30; ++i) {
      ids.push_back(
          *IngestCapture(**store, {{0x1000, shared}, {0x9000, testing::RandomBytes(kChunk, i)}}));
    }
  }
  std::atomic<int> reads{0};
  StoreOptions o = SmallOptions(dir.path());
  o.test_hook = [&](absl::string_view point) {
    if (point == "manifest.read") ++reads;
  };
  auto store = Store::Open(o);
  ASSERT_TRUE(store.ok());
  auto first = (*store)->CaptureFootprint(ids[0]);  // waits for the counts of Open
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->exclusive_known);
  EXPECT_EQ(first->exclusive_raw_bytes, kChunk);  // `shared` is in every capture
  const int before = reads.load();
  auto fp = (*store)->CaptureFootprint(ids[7]);
  ASSERT_TRUE(fp.ok());
  EXPECT_EQ(reads.load() - before, 1);
  EXPECT_EQ(fp->exclusive_raw_bytes, kChunk);
  // Counts follow deletes and commits.
  for (size_t i = 1; i < ids.size(); ++i) ASSERT_TRUE((*store)->DeleteCapture(ids[i]).ok());
  EXPECT_EQ((*store)->CaptureFootprint(ids[0])->exclusive_raw_bytes, 2 * kChunk);
  auto again = IngestCapture(**store, {{0x1000, shared}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*store)->CaptureFootprint(ids[0])->exclusive_raw_bytes, kChunk);
  EXPECT_EQ((*store)->CaptureFootprint(*again)->exclusive_raw_bytes, 0u);
}

}  // namespace
}  // namespace kerncap::store
