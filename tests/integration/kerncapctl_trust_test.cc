// End to end, real kerncapd and kerncapctl processes: crafted files, damaged
// stores and careless commands get clear refusals with the documented exit
// codes (2 invalid, 5 data loss), never a crash, never a wrong deletion.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "format/kcap_file.h"
#include "tests/integration/kerncapctl_test_util.h"
#include "common/file_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kerncap::ctl {
namespace {

namespace fs = std::filesystem;
using testing::BinDir;
using testing::Daemon;
using testing::Result;
using testing::SeedStore;
using testing::Sh;
using testing::TempDir;

// A capture with a code object, for repro.
std::string SeedCodeCapture(const std::string& dir) {
  auto s = store::Store::Open(store::testing::SmallOptions(dir));
  EXPECT_TRUE(s.ok()) << s.status();
  auto ingest = (*s)->BeginCapture();
  std::string code = store::testing::RandomBytes(100 << 10, 3);
  v1::CodeObject co;
  co.set_format(v1::CODE_OBJECT_CUBIN);
  EXPECT_TRUE((*ingest)->AddCodeObject(co, code.data(), code.size()).ok());
  v1::CaptureManifest m;
  m.mutable_kernel()->set_mangled_name("_Z4gemmv");
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  m.mutable_kernel()->set_arch("sm_90");
  auto id = (*ingest)->Commit(std::move(m));
  EXPECT_TRUE(id.ok()) << id.status();
  return *id;
}

// Rewrites the manifest record of a .kcap file with `edit`.
void EditKcap(const std::string& in, const std::string& out,
              const std::function<void(v1::CaptureManifest*)>& edit) {
  auto reader = kcap::KcapReader::Open(in);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto writer = kcap::KcapWriter::Create(out);
  ASSERT_TRUE(writer.ok()) << writer.status();
  v1::TransferFrame f;
  for (int i = 0;; ++i) {
    auto more = (*reader)->Next(&f);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    if (i == 0) edit(f.mutable_manifest());
    ASSERT_TRUE((*writer)->Append(f).ok());
  }
  ASSERT_TRUE((*writer)->Finish().ok());
}

// A .kcap whose code object claims 4 GiB but holds one chunk imported
// fine, made kerncapd's repro allocate 4 GiB, and aborted a local
// `kerncapctl repro` (an uncaught allocation failure).
TEST(KerncapctlTrustTest, ACraftedCaptureFileIsRefusedNotAllocatedFrom) {
  TempDir tmp;
  const std::string id = SeedCodeCapture(tmp.Sub("a-store"));
  Daemon a(tmp, "a");
  Daemon b(tmp, "b");
  const std::string good = tmp.Sub("good.kcap");
  Result r = Sh(a.Ctl("export " + id + " --out " + good));
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string crafted = tmp.Sub("crafted.kcap");
  EditKcap(good, crafted, [](v1::CaptureManifest* m) {
    m->mutable_code_objects(0)->mutable_data()->set_size(4ull << 30);
  });
  r = Sh(b.Ctl("import " + crafted + " 2>&1"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "code object 0")) << r.out;
  EXPECT_EQ(Sh(b.Ctl("captures --json")).out, "{\"captures\":[]}\n");
  r = Sh(absl::StrCat(BinDir(), "/kerncapctl repro ", crafted, " --out ", tmp.Sub("proj"),
                      " 2>&1"));
  EXPECT_EQ(r.rc, 5) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "malformed manifest")) << r.out;
  EXPECT_FALSE(fs::exists(tmp.Sub("proj")));
  // The untouched file still makes a reproducer locally.
  r = Sh(absl::StrCat(BinDir(), "/kerncapctl repro ", good, " --out ", tmp.Sub("proj"), " 2>&1"));
  EXPECT_EQ(r.rc, 0) << r.out;
}

TEST(KerncapctlTrustTest, RmWithABarePrefixDeletesNothing) {
  TempDir tmp;
  std::vector<std::string> ids = SeedStore(tmp.Sub("a-store"));
  Daemon a(tmp, "a");
  Result r = Sh(a.Ctl("rm cap- 2>&1"));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "at least one digit")) << r.out;
  r = Sh(a.Ctl("captures --json"));
  EXPECT_EQ(nlohmann::json::parse(r.out)["captures"].size(), 2u) << r.out;
}

TEST(KerncapctlTrustTest, AStoreOfAnotherChunkSizeOrFormatIsNotBusy) {
  TempDir tmp;
  SeedStore(tmp.Sub("a-store"));  // 64 KiB chunks
  auto kerncapd = [&](const std::string& flags) {
    return Sh(absl::StrCat(BinDir(), "/kerncapd --store=", tmp.Sub("a-store"), " --socket=",
                           tmp.Sub("x.sock"), " --agent-socket=", tmp.Sub("x-agent.sock"), " ",
                           flags, " 2>&1"));
  };
  Result r = kerncapd("--chunk-size=1MiB");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "was created with chunk_size 65536, not 1048576")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "store_busy")) << r.out;
  ASSERT_TRUE(WriteFileAtomic(tmp.Sub("a-store/STORE"), "format=7\nchunk_size=65536\n").ok());
  r = kerncapd("--chunk-size=64KiB");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "store format 7")) << r.out;
  EXPECT_FALSE(absl::StrContains(r.out, "store_busy")) << r.out;
}

TEST(KerncapctlTrustTest, ChunksOfAQuarantinedPackAreDataLoss) {
  TempDir tmp;
  std::vector<std::string> ids = SeedStore(tmp.Sub("a-store"));
  for (const auto& e : fs::recursive_directory_iterator(tmp.Sub("a-store/packs"))) {
    if (e.is_regular_file() && e.path().extension() == ".pack") {
      fs::resize_file(e.path(), fs::file_size(e.path()) - 1);
    }
  }
  Daemon a(tmp, "a");
  Result r = Sh(a.Ctl("export " + ids[0] + " --out " + tmp.Sub("x.kcap") + " 2>&1"));
  EXPECT_EQ(r.rc, 5) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "quarantined")) << r.out;
  r = Sh(a.Ctl("verify 2>&1"));
  EXPECT_EQ(r.rc, 5) << r.out;
}

TEST(KerncapctlTrustTest, SocketFolderAndStoreArePrivateWhateverTheUmask) {
  TempDir tmp;
  const mode_t old = ::umask(0);
  std::vector<std::string> ids;
  {
    Daemon a(tmp, "a", {}, tmp.Sub("run"));
    ::umask(old);
    ASSERT_TRUE(fs::exists(a.socket())) << *ReadFile(a.log());
    struct stat st;
    ASSERT_EQ(::stat(tmp.Sub("run").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0750u) << std::oct << (st.st_mode & 0777);
    ASSERT_EQ(::stat(tmp.Sub("a-store").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0027, 0u) << std::oct << (st.st_mode & 0777);
    for (const auto& e : fs::recursive_directory_iterator(tmp.Sub("a-store"))) {
      ASSERT_EQ(::lstat(e.path().c_str(), &st), 0);
      EXPECT_EQ(st.st_mode & (S_ISDIR(st.st_mode) ? 0027 : 0137), 0u)
          << e.path() << " " << std::oct << (st.st_mode & 0777);
    }
  }
  ::umask(old);
}

}  // namespace
}  // namespace kerncap::ctl
