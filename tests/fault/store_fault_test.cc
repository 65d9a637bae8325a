// store_fault_test.cc: the store under damage and crashes. Each test works in
// its own temp dir; crashes are real (a forked child SIGKILLs itself at a
// named point of the write protocol via StoreOptions::test_hook, or hits
// RLIMIT_FSIZE), and the parent then reopens the store and checks that no
// partial capture is visible, earlier captures still read and Verify is clean.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
using testing::TextBytes;
using testing::VerifyProblems;

namespace fs = std::filesystem;
constexpr size_t kChunk = 64 << 10;

std::vector<std::string> PackFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir + "/packs")) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".pack" && name.rfind("tmp-", 0) != 0 &&
        e.path().parent_path().filename() != "quarantine") {
      out.push_back(e.path().string());
    }
  }
  return out;
}

int CountTemp(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().filename().string().rfind("tmp-", 0) == 0) ++n;
  }
  return n;
}

int CountFilesUnder(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

void FlipByte(const std::string& path, off_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c;
  ASSERT_EQ(::pread(fd, &c, 1, offset), 1);
  c ^= 0x5a;
  ASSERT_EQ(::pwrite(fd, &c, 1, offset), 1);
  ::close(fd);
}

// Two captures in two packs: `victim` (text, compressible) and `bystander`.
struct TwoCaptures {
  std::string victim, bystander;
  std::string victim_bytes, bystander_bytes;
  std::string victim_pack;
};

TwoCaptures MakeTwo(Store& store, const std::string& dir) {
  TwoCaptures t;
  t.victim_bytes = TextBytes(4 * kChunk, 1) + RandomBytes(2 * kChunk, 2);
  t.victim = *IngestCapture(store, {{0x1000, t.victim_bytes}});
  auto packs = PackFiles(dir);
  EXPECT_EQ(packs.size(), 1u);
  t.victim_pack = packs[0];
  t.bystander_bytes = RandomBytes(3 * kChunk, 3);
  t.bystander = *IngestCapture(store, {{0x1000, t.bystander_bytes}});
  return t;
}

std::string PackName(const std::string& path) { return fs::path(path).stem().string(); }

TEST(StoreFaultTest, CorruptedPackByteIsDataLossNamingCaptureChunkAndPack) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  TwoCaptures t = MakeTwo(**store, dir.path());
  FlipByte(t.victim_pack, 100);  // inside the first blob (chunk 0 of the victim)

  for (int round = 0; round < 2; ++round) {  // open store, then after reopen
    auto m = (*store)->GetManifest(t.victim);
    ASSERT_TRUE(m.ok());
    // Workers append in any order: find the one chunk the flip hit.
    std::vector<Digest> bad;
    std::vector<int> good;
    const auto& digests = m->pre().regions(0).data().chunk_digests();
    for (int i = 0; i < digests.size(); ++i) {
      const Digest d = *Digest::FromBytes(digests[i]);
      auto r = (*store)->ReadChunk(d);
      if (r.ok()) {
        EXPECT_EQ(*r, t.victim_bytes.substr(i * kChunk, kChunk));  // the rest still reads
        good.push_back(i);
        continue;
      }
      bad.push_back(d);
      EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
      EXPECT_NE(r.status().message().find(d.ToHex()), std::string::npos) << r.status();
      EXPECT_NE(r.status().message().find(PackName(t.victim_pack)), std::string::npos);
    }
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_EQ(good.size(), 5u);
    std::string out(t.victim_bytes.size(), '\0');
    EXPECT_EQ((*store)->ReadChunkList(m->pre().regions(0).data(), out.data(), out.size()).code(),
              absl::StatusCode::kDataLoss);

    auto problems = VerifyProblems(**store);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].capture_id(), t.victim);
    EXPECT_EQ(problems[0].chunk_digest(), bad[0].ToBytes());
    EXPECT_EQ(problems[0].pack(), PackName(t.victim_pack));
    EXPECT_NE(problems[0].what().find("checksum"), std::string::npos) << problems[0].what();
    EXPECT_TRUE(VerifyProblems(**store, t.bystander).empty());
    EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(t.bystander), 0), t.bystander_bytes);

    store->reset();
    store = Store::Open(SmallOptions(dir.path()));
    ASSERT_TRUE(store.ok()) << store.status();
  }
}

TEST(StoreFaultTest, TruncatedPackIsDataLossAndQuarantinedOnReopen) {
  TempDir dir;
  auto store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok());
  TwoCaptures t = MakeTwo(**store, dir.path());
  fs::resize_file(t.victim_pack, fs::file_size(t.victim_pack) / 2);

  // While open: chunks past the cut fail with DataLoss naming chunk and pack.
  auto m = (*store)->GetManifest(t.victim);
  int failed = 0;
  for (const std::string& raw : m->pre().regions(0).data().chunk_digests()) {
    const Digest d = *Digest::FromBytes(raw);
    auto r = (*store)->ReadChunk(d);
    if (r.ok()) continue;
    ++failed;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find(d.ToHex()), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find(PackName(t.victim_pack)), std::string::npos);
  }
  EXPECT_GT(failed, 0);
  auto problems = VerifyProblems(**store, t.victim);
  ASSERT_FALSE(problems.empty());
  for (const auto& p : problems) {
    EXPECT_EQ(p.capture_id(), t.victim);
    EXPECT_EQ(p.pack(), PackName(t.victim_pack));
  }

  // Reopen: the trailer is gone, so the pack is quarantined; every chunk the
  // victim needs is reported missing by name, the bystander is intact.
  store->reset();
  store = Store::Open(SmallOptions(dir.path()));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(fs::exists(dir.Sub("packs/quarantine/" + PackName(t.victim_pack) + ".pack")));
  problems = VerifyProblems(**store);
  int chunk_problems = 0, pack_problems = 0;
  for (const auto& p : problems) {
    if (p.chunk_digest().empty()) {
      ++pack_problems;
      EXPECT_EQ(p.pack(), PackName(t.victim_pack));
    } else {
      ++chunk_problems;
      EXPECT_EQ(p.capture_id(), t.victim);
      EXPECT_NE(p.what().find("missing"), std::string::npos);
    }
  }
  EXPECT_EQ(chunk_problems, 6);
  EXPECT_EQ(pack_problems, 1);
  m = (*store)->GetManifest(t.victim);
  std::string out(t.victim_bytes.size(), '\0');
  absl::Status st = (*store)->ReadChunkList(m->pre().regions(0).data(), out.data(), out.size());
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("missing"), std::string::npos);
  EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(t.bystander), 0), t.bystander_bytes);
  EXPECT_TRUE(VerifyProblems(**store, t.bystander).empty());
}

// Runs `body` in a forked child and returns its wait status.
template <typename F>
int RunChild(F body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

struct KillPoint {
  const char* point;
  int hit;                     // die at this hit of the point
  int committed_before_death;  // captures the child committed before dying
  bool expect_tmp;             // a tmp-* file must be left behind
};

void PrintTo(const KillPoint& kp, std::ostream* os) { *os << kp.point << "#" << kp.hit; }

class StoreKillTest : public ::testing::TestWithParam<KillPoint> {};

TEST_P(StoreKillTest, KillNineLeavesNoPartialCapture) {
  const KillPoint kp = GetParam();
  TempDir dir;
  StoreOptions opts = SmallOptions(dir.path());
  opts.pack_target_bytes = 4 * kChunk;  // several packs per capture
  std::string baseline_bytes = RandomBytes(5 * kChunk, 77);
  std::string baseline;
  {
    auto store = Store::Open(opts);
    ASSERT_TRUE(store.ok());
    baseline = *IngestCapture(**store, {{0x1000, baseline_bytes}});
  }

  int status = RunChild([&] {
    StoreOptions child = opts;
    int hits = 0;
    child.test_hook = [&](absl::string_view point) {
      if (point == kp.point && ++hits == kp.hit) ::raise(SIGKILL);
    };
    auto store = Store::Open(child);
    if (!store.ok()) ::_exit(3);
    for (int i = 0; i < 20; ++i) {
      // Half new data, half shared with the baseline (dedup across the crash).
      std::string bytes = RandomBytes(5 * kChunk, 1000 + i) + baseline_bytes.substr(0, 5 * kChunk);
      if (!IngestCapture(**store, {{0x1000, bytes}}).ok()) ::_exit(4);
    }
    ::_exit(5);  // never reached the kill point
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  ASSERT_EQ(WTERMSIG(status), SIGKILL);
  if (kp.expect_tmp) {
    EXPECT_GT(CountTemp(dir.path()), 0);
  }

  auto store = Store::Open(opts);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(CountTemp(dir.path()), 0);
  auto list = (*store)->ListCaptures({});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u + kp.committed_before_death);
  EXPECT_EQ((*store)->Stats().captures(), 1u + kp.committed_before_death);
  // No orphan manifest survives the reopen either.
  EXPECT_EQ(CountFilesUnder(dir.Sub("manifests")), 1 + kp.committed_before_death);
  for (const auto& s : *list) {
    auto m = (*store)->GetManifest(s.capture_id());
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(ReadPre(**store, *m, 0).size(),
              10 * kChunk - (s.capture_id() == baseline ? 5 * kChunk : 0));
  }
  EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(baseline), 0), baseline_bytes);
  EXPECT_TRUE(VerifyProblems(**store).empty());
  // Whatever the dead child wrote without committing is garbage; GC frees it
  // and the store stays clean.
  auto gc = (*store)->RunGc(false);
  ASSERT_TRUE(gc.ok()) << gc.status();
  EXPECT_TRUE(VerifyProblems(**store).empty());
  // And the store takes new captures.
  EXPECT_TRUE(IngestCapture(**store, {{0x1000, RandomBytes(kChunk, 5)}}).ok());
}

INSTANTIATE_TEST_SUITE_P(
    Points, StoreKillTest,
    ::testing::Values(KillPoint{"pack.chunk_appended", 3, 0, true},  // after N chunks
                      KillPoint{"pack.before_trailer", 2, 0, true},  // mid pack write
                      KillPoint{"pack.before_rename", 1, 0, true},   // trailer synced, not renamed
                      KillPoint{"commit.before_manifest", 2, 1, false},
                      KillPoint{"commit.before_ref", 2, 1, false},    // right before the ref
                      KillPoint{"commit.ref_written", 2, 2, false}),  // before catalog insert
    [](const ::testing::TestParamInfo<KillPoint>& info) {
      std::string name = absl::StrCat(info.param.point, "_", info.param.hit);
      for (char& c : name) {
        if (c == '.') c = '_';
      }
      return name;
    });

// The parent sends SIGKILL from outside while the child is mid-ingest (no
// hook): whatever the child was doing, the store reopens clean.
TEST(StoreFaultTest, ExternalKillNineMidIngestLeavesStoreClean) {
  TempDir dir;
  StoreOptions opts = SmallOptions(dir.path());
  opts.pack_target_bytes = 4 * kChunk;
  int progress[2];
  ASSERT_EQ(::pipe(progress), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(progress[0]);
    auto store = Store::Open(opts);
    if (!store.ok()) ::_exit(3);
    for (int i = 0;; ++i) {
      if (!IngestCapture(**store, {{0x1000, RandomBytes(16 * kChunk, 3000 + i)}}).ok()) ::_exit(4);
      (void)!::write(progress[1], "c", 1);
    }
  }
  ::close(progress[1]);
  char c;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(::read(progress[0], &c, 1), 1);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  ::close(progress[0]);

  auto store = Store::Open(opts);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(CountTemp(dir.path()), 0);
  auto list = (*store)->ListCaptures({});
  ASSERT_TRUE(list.ok());
  EXPECT_GE(list->size(), 3u);
  for (const auto& s : *list) {
    auto m = (*store)->GetManifest(s.capture_id());
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(ReadPre(**store, *m, 0).size(), 16 * kChunk);
  }
  EXPECT_TRUE(VerifyProblems(**store).empty());
}

TEST(StoreFaultTest, DiskFullIsResourceExhaustedAndStoreStaysIntact) {
  TempDir dir;
  StoreOptions opts = SmallOptions(dir.path());
  opts.pack_target_bytes = 64 << 20;
  std::string baseline_bytes = RandomBytes(4 * kChunk, 1);
  std::string baseline;
  {
    auto store = Store::Open(opts);
    ASSERT_TRUE(store.ok());
    baseline = *IngestCapture(**store, {{0x1000, baseline_bytes}});
  }
  int status = RunChild([&] {
    // RLIMIT_FSIZE raises SIGXFSZ (fatal by default); ignored, write() fails
    // with EFBIG instead, which the store must report as ResourceExhausted.
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {1 << 20, 1 << 20};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(2);
    auto store = Store::Open(opts);
    if (!store.ok()) ::_exit(3);
    auto r = IngestCapture(**store, {{0x1000, RandomBytes(32 * kChunk, 2)}});
    if (r.ok()) ::_exit(4);
    if (r.status().message().find("pack") == std::string::npos) ::_exit(5);
    // The store is still usable for a capture that fits.
    if (!IngestCapture(**store, {{0x1000, RandomBytes(2 * kChunk, 3)}}).ok()) ::_exit(6);
    ::_exit(100 + static_cast<int>(r.status().code()));
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 100 + static_cast<int>(absl::StatusCode::kResourceExhausted));

  auto store = Store::Open(opts);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(CountTemp(dir.path()), 0);
  EXPECT_EQ((*store)->Stats().captures(), 2u);
  EXPECT_EQ(ReadPre(**store, *(*store)->GetManifest(baseline), 0), baseline_bytes);
  EXPECT_TRUE(VerifyProblems(**store).empty());
}

TEST(StoreFaultTest, SecondDaemonOnSameStoreIsRefused) {
  TempDir dir;
  int ready[2], release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  pid_t child = ::fork();
  if (child == 0) {
    auto store = Store::Open(SmallOptions(dir.path()));
    char c = store.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(release[0], &c, 1);  // hold the store until the parent says
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto second = Store::Open(SmallOptions(dir.path()));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(absl::StrCat("pid ", child)), std::string::npos)
      << second.status();
  EXPECT_NE(second.status().message().find(dir.path()), std::string::npos);
  (void)!::write(release[1], "x", 1);
  int status;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(Store::Open(SmallOptions(dir.path())).ok());
  for (int fd : {ready[0], ready[1], release[0], release[1]}) ::close(fd);
}

}  // namespace
}  // namespace kerncap::store
