// A node kerncapd shared by several users (issue 28), attacked as a second
// user would: a real root kerncapd whose sockets belong to a group both test
// users are in, kerncapctl and synthetic agents run as other uids with
// setpriv (no accounts needed), and every request checked to act with the
// caller's rights only.
//
// Each attack is paired with a control that shows the thing attacked is
// there to take: root (or the victim) does the same and succeeds, so a
// refusal is the rights at work, never a broken fixture.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/subprocess.h"

namespace kerncap::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kAttacker = 41001;
constexpr int kVictim = 41002;
constexpr int kSocketGroup = 41000;  // both users are in it; owns the sockets

void WriteFile(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void ChownTree(const std::string& root, int uid) {
  ASSERT_EQ(::chown(root.c_str(), uid, uid), 0) << root;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    ASSERT_EQ(::lchown(e.path().c_str(), uid, uid), 0) << e.path();
  }
}

// Everything under `root` in one string (to look for a marker).
std::string TreeText(const std::string& root) {
  std::string all;
  if (!fs::exists(root)) return all;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) all += ReadAll(e.path().string());
  }
  return all;
}

// A capture folder in the reference tool's layout (what `kerncapctl import
// FOLDER` reads), with `hsaco` as its code object.
void WriteReferenceFolder(const std::string& dir, const std::string& hsaco,
                          const std::string& symbol) {
  const std::string region(64 << 10, '\x5a');
  const json metadata = {
      {"kernel_name", symbol},
      {"kernel_symbol", symbol},
      {"gpu_arch", "gfx90a"},
      {"grid", {{"x", 256}, {"y", 1}, {"z", 1}}},
      {"block", {{"x", 256}, {"y", 1}, {"z", 1}}},
      {"lds_size", 0},
      {"kernarg_slots",
       {{{"offset", 0}, {"size", 8}, {"value_kind", "global_buffer"}, {"name", "x"}},
        {{"offset", 8}, {"size", 4}, {"value_kind", "by_value"}, {"name", "n"}}}},
      {"sgpr_count", 16},
      {"vgpr_count", 8},
      {"hsaco_sha256", Sha256(hsaco).ToHex()},
  };
  const json dispatch = {{"agent_name", "gfx90a"},     {"isa_name", "amdgcn-amd-amdhsa--gfx90a"},
                         {"wavefront_size", 64},       {"grid", {256, 1, 1}},
                         {"block", {256, 1, 1}},       {"group_segment_size", 0},
                         {"private_segment_size", 0},  {"kernarg_size", 16},
                         {"dispatch_index", 1}};
  const json regions = {{"regions",
                         {{{"base", "0x7f0000000000"},
                           {"size", region.size()},
                           {"is_pool", true},
                           {"is_vmem", false},
                           {"contains_kernarg", false}}}}};
  std::string kernarg(16, '\0');
  const uint64_t va = 0x7f0000000000ull;
  kernarg.replace(0, 8, reinterpret_cast<const char*>(&va), 8);
  WriteFile(dir + "/metadata.json", metadata.dump());
  WriteFile(dir + "/dispatch.json", dispatch.dump());
  WriteFile(dir + "/memory_regions.json", regions.dump());
  WriteFile(dir + "/memory/region_7f0000000000.bin", region);
  WriteFile(dir + "/kernarg_raw.bin", kernarg);
  WriteFile(dir + "/kernarg.bin", kernarg);
  WriteFile(dir + "/kernel.hsaco", hsaco);
  WriteFile(dir + "/capture_complete", "ok\n");
}

class MultiUserE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root: runs a node kerncapd as root and its clients as two other "
                      "uids (setpriv); CI runs as root";
    }
    for (const char* p : {"/usr/bin/setpriv", "/bin/setpriv"}) {
      if (fs::exists(p)) setpriv_ = p;
    }
    if (setpriv_.empty()) GTEST_SKIP() << "setpriv (util-linux) missing";
    dir_ = MakeTempDir("kc_multiuser");
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    // Each user's own folder, as a home directory would be.
    for (int uid : {kAttacker, kVictim}) {
      const std::string home = Home(uid);
      fs::create_directories(home);
      ASSERT_EQ(::chown(home.c_str(), uid, uid), 0);
      ASSERT_EQ(::chmod(home.c_str(), 0700), 0);
    }
    daemon_ = std::make_unique<Background>(std::vector<std::string>{
        BinaryPath("kerncapd"), "--store=" + dir_ + "/store", "--socket=" + Socket(),
        "--agent-socket=" + dir_ + "/run/agent.sock", "--chunk-size=64KiB",
        "--drain-timeout=2", absl::StrCat("--socket-group=", kSocketGroup)});
    ASSERT_TRUE(WaitFor([&] { return As(0, {"status"}).exit_code == 0; }))
        << "kerncapd did not come up:\n"
        << daemon_->Stderr();
  }
  void TearDown() override {
    agents_.clear();
    daemon_.reset();
    if (!dir_.empty()) RemoveTree(dir_);
  }

  std::string Socket() const { return dir_ + "/run/ctl.sock"; }
  std::string Home(int uid) const { return absl::StrCat(dir_, "/home", uid); }

  // argv as `uid` (0: root itself), in the sockets' group.
  std::vector<std::string> AsUser(int uid, std::vector<std::string> argv) const {
    if (uid == 0) return argv;
    std::vector<std::string> out = {setpriv_, absl::StrCat("--reuid=", uid),
                                    absl::StrCat("--regid=", uid),
                                    absl::StrCat("--groups=", kSocketGroup)};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }
  RunResult As(int uid, std::vector<std::string> args) const {
    args.insert(args.begin(), {BinaryPath("kerncapctl"), "--socket=" + Socket()});
    return RunProcess(AsUser(uid, args), std::chrono::seconds(120),
                      {{"HOME", uid == 0 ? dir_ : Home(uid)}});
  }
  json AsJson(int uid, std::vector<std::string> args) const {
    args.insert(args.begin(), "--json");
    RunResult r = As(uid, args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return json::parse(r.out, nullptr, false);
  }
  // A synthetic application of `uid`: `dispatches` launches of matmul, the
  // first after an arm reaches it (at most wait_ms).
  Background* StartAgent(int uid, int dispatches, int wait_ms, bool substitution = false) {
    std::vector<std::string> argv = {BinaryPath("synthetic_agent"),
                                     "--socket=" + dir_ + "/run/agent.sock",
                                     "--kernels=matmul",
                                     absl::StrCat("--dispatches=", dispatches),
                                     "--region-mib=1",
                                     absl::StrCat("--wait-arm-ms=", wait_ms)};
    if (substitution) {
      argv.insert(argv.end(), {"--substitution", "--wait-substitution-ms=5000"});
    }
    agents_.push_back(std::make_unique<Background>(AsUser(uid, argv)));
    return agents_.back().get();
  }
  // The agents of uid `uid` that root sees.
  std::vector<json> AgentsOf(int uid) const {
    std::vector<json> out;
    json all = AsJson(0, {"agents"});
    for (const json& a : all["agents"]) {
      if (a["process"].value("uid", 0) == uid) out.push_back(a);
    }
    return out;
  }
  std::vector<std::string> CaptureIds(int uid) const {
    RunResult r = As(uid, {"captures", "-q"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> ids;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) ids.push_back(line);
    }
    return ids;
  }
  // One capture of `uid`'s own synthetic application.
  std::string CaptureAs(int uid) {
    const size_t before = CaptureIds(uid).size();
    RunResult arm = As(uid, {"arm", "--kernel=matmul", "--count=1", "--ttl=2m"});
    EXPECT_EQ(arm.exit_code, 0) << arm.out << arm.err;
    Background* app = StartAgent(uid, 2, 10000);
    EXPECT_TRUE(WaitFor([&] { return CaptureIds(uid).size() > before; },
                        std::chrono::seconds(60)))
        << "no capture from uid " << uid << "'s application; kerncapd:\n"
        << daemon_->Stderr() << "\nagent:\n"
        << app->Stderr();
    std::vector<std::string> ids = CaptureIds(uid);
    return ids.empty() ? "" : ids.front();
  }

  std::string dir_;
  std::string setpriv_;
  std::unique_ptr<Background> daemon_;
  std::vector<std::unique_ptr<Background>> agents_;
};

// Agents are who the kernel says: pid and uid from the agent socket's
// credentials, and so are the captures' (not the Hello's, which the agent
// writes).
TEST_F(MultiUserE2eTest, AgentsAndTheirCapturesCarryTheSocketsCredentials) {
  const std::string id = CaptureAs(kVictim);
  ASSERT_FALSE(id.empty());
  json cap = AsJson(kVictim, {"show", id});
  EXPECT_EQ(cap["manifest"]["owner_uid"], kVictim) << cap.dump();
  EXPECT_EQ(cap["manifest"]["process"]["uid"], kVictim) << cap.dump();
  // The application's pid: setpriv execs it in place, so it is the pid the
  // test started.
  EXPECT_EQ(cap["manifest"]["process"]["pid"], agents_.back()->pid()) << cap.dump();
  EXPECT_EQ(cap["manifest"]["process"]["process_name"], "synthetic_agent");
  // Who am I: the daemon tells the caller what it takes it to be.
  json status = AsJson(kAttacker, {"status"});
  EXPECT_EQ(status["caller"]["uid"], kAttacker) << status.dump();
  EXPECT_NE(status["caller"].value("privileged", false), true);
}

// Another user's captures are not there for the attacker: not listed, not
// shown, exported, reproduced or deleted (NotFound, as an unknown id), and
// root sees them all.
TEST_F(MultiUserE2eTest, CapturesAreTheirOwnersOnly) {
  const std::string id = CaptureAs(kVictim);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(CaptureIds(kVictim), std::vector<std::string>{id});
  EXPECT_TRUE(CaptureIds(kAttacker).empty());
  EXPECT_EQ(CaptureIds(0), std::vector<std::string>{id});  // root: everyone's
  for (std::vector<std::string> cmd :
       {std::vector<std::string>{"show", id},
        {"export", id, "--out", Home(kAttacker) + "/stolen.kcap"},
        {"rm", id},
        {"verify", id},
        {"repro", id, "--out", Home(kAttacker) + "/stolen"}}) {
    RunResult r = As(kAttacker, cmd);
    EXPECT_EQ(r.exit_code, 3) << cmd[0] << ": " << r.out << r.err;  // not found
  }
  EXPECT_FALSE(fs::exists(Home(kAttacker) + "/stolen.kcap"));
  EXPECT_EQ(CaptureIds(kVictim), std::vector<std::string>{id}) << "the attacker deleted it";
  // Store-wide maintenance is the node's administrator's.
  RunResult gc = As(kAttacker, {"gc"});
  EXPECT_EQ(gc.exit_code, 6) << gc.out << gc.err;  // permission
  EXPECT_TRUE(absl::StrContains(gc.err + gc.out, "only root or the daemon's own user")) << gc.err;
  EXPECT_EQ(As(kAttacker, {"verify"}).exit_code, 6);
  EXPECT_EQ(As(0, {"gc"}).exit_code, 0);
}

// An arm reaches only its owner's processes: the attacker's arm on the
// victim's kernel captures nothing from the victim's application, which
// the victim's own arm then captures.
TEST_F(MultiUserE2eTest, ArmsReachOnlyTheirOwnersProcesses) {
  RunResult arm = As(kAttacker, {"arm", "--kernel=matmul", "--count=1", "--ttl=2m"});
  ASSERT_EQ(arm.exit_code, 0) << arm.err;
  Background* app = StartAgent(kVictim, 3, 3000);
  ASSERT_TRUE(WaitFor([&] { return !app->Running(); }, std::chrono::seconds(30)));
  EXPECT_TRUE(CaptureIds(0).empty()) << "the attacker's arm captured the victim's dispatch";
  json arms = AsJson(kAttacker, {"arms"});
  ASSERT_EQ(arms["arms"].size(), 1u) << arms.dump();
  EXPECT_EQ(arms["arms"][0].value("captured", 0), 0);
  // Nor does the victim see, or disarm... the attacker's arm, nor the
  // attacker the victim's.
  EXPECT_TRUE(AsJson(kVictim, {"arms"})["arms"].empty());
  const std::string victim_cap = CaptureAs(kVictim);
  EXPECT_FALSE(victim_cap.empty());
  EXPECT_TRUE(CaptureIds(kAttacker).empty());
}

// Code goes only into the caller's own processes; a selector that names no
// process needs --all-processes.
TEST_F(MultiUserE2eTest, SubstitutionReachesOnlyTheCallersProcesses) {
  StartAgent(kVictim, 400, 0, /*substitution=*/true);
  ASSERT_TRUE(WaitFor([&] { return AgentsOf(kVictim).size() == 1; }));
  const std::string variant = Home(kAttacker) + "/v.cubin";
  WriteFile(variant, "SYNTHETIC-VARIANT");
  ASSERT_EQ(::chown(variant.c_str(), kAttacker, kAttacker), 0);
  RunResult r = As(kAttacker, {"substitute", "--kernel=matmul", "--code-object=" + variant,
                               "--format=cubin", "--no-preflight"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "--all-processes")) << r.err;
  r = As(kAttacker, {"substitute", "--kernel=matmul", "--code-object=" + variant,
                     "--format=cubin", "--no-preflight", "--all-processes"});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.err, "no connected agent of yours")) << r.err;
  EXPECT_TRUE(AsJson(0, {"substitutions", "--all"})["substitutions"].empty());
  // The victim substitutes into its own process.
  const std::string own = Home(kVictim) + "/v.cubin";
  WriteFile(own, "SYNTHETIC-VARIANT");
  ASSERT_EQ(::chown(own.c_str(), kVictim, kVictim), 0);
  r = As(kVictim, {"--json", "substitute", "--kernel=matmul", "--code-object=" + own,
                   "--format=cubin", "--no-preflight", "--all-processes", "--count=3", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json info = json::parse(r.out, nullptr, false);
  EXPECT_EQ(info["owner_uid"], kVictim) << r.out;
  ASSERT_EQ(info["agents"].size(), 1u) << r.out;
  EXPECT_EQ(info["agents"][0]["state"], "ended") << r.out;
}

// Paths a request names, and the paths the code object's line table names,
// are touched with the caller's rights: no reading root's files, no folder in
// /etc, no replacing another user's reproducer.
class MultiUserPathsTest : public MultiUserE2eTest {
 protected:
  void SetUp() override {
    MultiUserE2eTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    clang_ = "/usr/lib/llvm-15/bin/clang";
    bitcode_ = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode";
    if (!fs::exists(clang_) || !fs::exists("/usr/include/hip/hip_runtime.h") ||
        !fs::exists(bitcode_ + "/ockl.bc")) {
      GTEST_SKIP() << "clang-15, HIP headers or ROCm device libraries missing";
    }
  }
  // A gfx90a code object compiled with -g from `source` (its line table
  // names that path).
  std::string Compile(const std::string& source) {
    const std::string out = dir_ + "/k.hsaco";
    RunResult c = RunProcess({clang_, "-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output",
                              "--offload-arch=gfx90a", "-O2", "-g", "-nogpuinc", "-include",
                              "/usr/include/hip/hip_runtime.h",
                              "--rocm-device-lib-path=" + bitcode_, "-o", out, source});
    EXPECT_EQ(c.exit_code, 0) << c.err;
    return ReadAll(out);
  }
  std::string ImportAs(int uid, const std::string& folder) {
    json r = AsJson(uid, {"import", folder});
    return r.value("capture_id", "");
  }
  std::string clang_, bitcode_;
};

TEST_F(MultiUserPathsTest, HostPathsAreTouchedWithTheCallersRights) {
  // Root's private source; a code object whose line table points at it.
  const std::string secret_dir = dir_ + "/rootonly";
  const std::string secret = secret_dir + "/kern.hip";
  WriteFile(secret,
            "extern \"C\" __global__ void scale_secret(float* x, int n) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;  // SECRET-MARKER-7731\n"
            "  if (i < n) x[i] *= 2.0f;\n}\n");
  ASSERT_EQ(::chmod(secret_dir.c_str(), 0700), 0);
  const std::string hsaco = Compile(secret);
  ASSERT_FALSE(hsaco.empty());

  // 1. A folder only root can read is not imported for the attacker...
  const std::string root_folder = secret_dir + "/capture";
  WriteReferenceFolder(root_folder, hsaco, "scale_secret");
  // Searchable, so the attacker's kerncapctl finds the folder and sends the
  // request; nothing in it is readable but by root.
  ASSERT_EQ(::chmod(secret_dir.c_str(), 0711), 0);
  for (const auto& e : fs::recursive_directory_iterator(root_folder)) {
    ASSERT_EQ(::chmod(e.path().c_str(), e.is_directory() ? 0711 : 0600), 0) << e.path();
  }
  ASSERT_EQ(::chmod(root_folder.c_str(), 0711), 0);
  ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);
  RunResult r = As(kAttacker, {"import", root_folder});
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "Permission denied")) << r.err;
  EXPECT_TRUE(CaptureIds(kAttacker).empty());
  // ...and is for root (the folder is a good one).
  EXPECT_FALSE(ImportAs(0, root_folder).empty());

  // The attacker's own capture of that code object.
  const std::string own_folder = Home(kAttacker) + "/capture";
  WriteReferenceFolder(own_folder, hsaco, "scale_secret");
  ChownTree(own_folder, kAttacker);
  const std::string id = ImportAs(kAttacker, own_folder);
  ASSERT_FALSE(id.empty());

  // 2. Sources are read as the attacker: root's file is refused, and stays
  // out of the project, which root's own reproducer of the same code object
  // copies.
  const std::string project = Home(kAttacker) + "/proj";
  r = As(kAttacker, {"repro", id, "--out", project});
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "Permission denied")) << r.err;
  EXPECT_FALSE(absl::StrContains(TreeText(project), "SECRET-MARKER-7731"))
      << "root's source was copied into the attacker's reproducer";
  // The attacker's own binary-only reproducer is written, as the attacker.
  r = As(kAttacker, {"repro", id, "--out", project, "--binary"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  struct stat st{};
  ASSERT_EQ(::stat((project + "/kerncap.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(kAttacker)) << "written with the daemon's rights";
  const std::string root_project = dir_ + "/root_proj";
  r = As(0, {"repro", id, "--out", root_project});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(TreeText(root_project), "SECRET-MARKER-7731"))
      << "control: root's reproducer should have found the source";

  // 3. No folder where the attacker cannot write.
  const std::string etc = absl::StrCat("/etc/kerncap-attack-", ::getpid());
  r = As(kAttacker, {"repro", id, "--out", etc, "--binary"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(fs::exists(etc)) << "created a folder in /etc";
  fs::remove_all(etc);

  // 4. --force does not replace another user's reproducer.
  const std::string victims = Home(kVictim) + "/proj";
  WriteFile(victims + "/kerncap.json", "{\"victim\": true}");
  ChownTree(victims, kVictim);
  r = As(kAttacker, {"repro", id, "--out", victims, "--force", "--binary"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(ReadAll(victims + "/kerncap.json"), "{\"victim\": true}");
}

}  // namespace
}  // namespace kerncap::testing
