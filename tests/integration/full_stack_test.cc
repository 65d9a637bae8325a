// Full stack, as a user runs it: a real kerncapd process, kerncapctl to arm
// and inspect, and the synthetic agent (the real agent-link client and ring)
// standing in for an application. Checks that the bytes the agent sent are
// exactly what the store returns, that repeated captures deduplicate, that a
// kill -9 of the daemon mid-ingest never exposes a partial capture, and that
// bad requests get clear errors while the daemon keeps serving.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <memory>
#include <thread>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/testing/synthetic_content.h"
#include "common/digest.h"
#include "daemon/store/store.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/subprocess.h"

namespace kerncap::testing {
namespace {

constexpr uint64_t kSeed = 7;
constexpr uint32_t kChunk = 64 << 10;

class Daemon {
 public:
  explicit Daemon(const std::string& dir) : dir_(dir) { Start(); }

  void Start() {
    proc_ = std::make_unique<Background>(std::vector<std::string>{
        BinaryPath("kerncapd"), "--store=" + store(), "--socket=" + socket(),
        "--agent-socket=" + agent_socket(), "--chunk-size=64KiB", "--drain-timeout=2"});
    ASSERT_TRUE(WaitFor([&] { return Ctl({"status"}).exit_code == 0; }))
        << "kerncapd did not come up:\n"
        << proc_->Stderr();
  }
  RunResult Stop(int sig) { return proc_->Stop(sig); }

  RunResult Ctl(std::vector<std::string> args) const {
    args.insert(args.begin(), {BinaryPath("kerncapctl"), "--socket=" + socket()});
    return RunProcess(args, std::chrono::seconds(60));
  }
  nlohmann::json CtlJson(std::vector<std::string> args) const {
    args.insert(args.begin(), "--json");
    RunResult r = Ctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  }

  std::string store() const { return dir_ + "/store"; }
  std::string socket() const { return dir_ + "/kerncapd.sock"; }
  std::string agent_socket() const { return dir_ + "/agent.sock"; }
  Background& proc() { return *proc_; }

 private:
  std::string dir_;
  std::unique_ptr<Background> proc_;
};

class FullStackTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("kc_full_stack"); }
  void TearDown() override { RemoveTree(dir_); }
  std::string dir_;
};

std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(j);
  }
  return out;
}

// docs/JSON.md: integers are JSON numbers, 64-bit ones too.
uint64_t U64(const nlohmann::json& j) {
  EXPECT_TRUE(j.is_number_integer()) << j.dump();
  return j.is_number() ? j.get<uint64_t>() : 0;
}

// Reassembles a region's bytes from the store: a pre region is complete; a
// post (diff) region overlays its changed chunks on `base`.
std::string ReadRegion(store::Store& s, const v1::Region& region, const std::string& base) {
  std::string full(region.data().size(), '\0');
  if (!region.diff()) {
    EXPECT_TRUE(s.ReadChunkList(region.data(), full.data(), full.size()).ok());
    return full;
  }
  full = base;
  const auto& list = region.data();
  for (int i = 0; i < region.changed_chunks_size(); ++i) {
    uint64_t off = uint64_t{region.changed_chunks(i)} * list.chunk_size();
    uint64_t len = std::min<uint64_t>(list.chunk_size(), full.size() - off);
    const std::string& digest = list.chunk_digests(i);
    if (digest.empty()) {
      std::fill(full.begin() + off, full.begin() + off + len, '\0');
      continue;
    }
    auto d = Digest::FromBytes(digest);
    EXPECT_TRUE(d.ok());
    auto bytes = s.ReadChunk(*d);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (bytes.ok()) full.replace(off, len, *bytes);
  }
  return full;
}

TEST_F(FullStackTest, ArmCaptureShowVerifyAndStoredBytesMatchWhatTheAgentSent) {
  Daemon d(dir_);
  nlohmann::json arm = d.CtlJson({"arm", "--kernel=matmul", "--count=2"});
  ASSERT_TRUE(arm.contains("arm_id")) << arm.dump();

  // Dispatches 0..3 alternate matmul_bf16 / softmax: dispatches 0 and 2 match.
  RunResult agent = RunProcess({BinaryPath("synthetic_agent"), "--socket=" + d.agent_socket(),
                         "--kernels=matmul_bf16,softmax", "--dispatches=4",
                         "--region-mib=2,0.5", "--seed=7", "--mutate", "--wait-arm-ms=5000"});
  ASSERT_EQ(agent.exit_code, 0) << agent.err;
  std::map<uint64_t, std::string> capture_by_dispatch;
  for (const auto& line : JsonLines(agent.out)) {
    ASSERT_FALSE(line.contains("error")) << line.dump();
    capture_by_dispatch[line["dispatch"].get<uint64_t>()] = line["capture_id"];
  }
  ASSERT_EQ(capture_by_dispatch.size(), 2u) << agent.out;
  ASSERT_TRUE(capture_by_dispatch.count(0) && capture_by_dispatch.count(2)) << agent.out;

  nlohmann::json list = d.CtlJson({"captures"});
  ASSERT_EQ(list["captures"].size(), 2u) << list.dump();
  for (const auto& c : list["captures"]) {
    EXPECT_TRUE(absl::StrContains(c["kernel"].get<std::string>(), "matmul")) << c.dump();
  }
  nlohmann::json arms = d.CtlJson({"arms", "--all"});
  ASSERT_EQ(arms["arms"].size(), 1u);
  EXPECT_EQ(arms["arms"][0]["state"], "done") << arms.dump();
  EXPECT_EQ(arms["arms"][0]["selector"]["match"], "substring") << arms.dump();

  nlohmann::json show = d.CtlJson({"show", capture_by_dispatch[2]});
  const auto& manifest = show["manifest"];
  EXPECT_EQ(manifest["pre"]["regions"].size(), 2u);
  // The second capture re-sends mostly the same kinds of bytes: some dedup.
  EXPECT_GT(U64(manifest["stats"]["zero_bytes"]), 0u) << manifest["stats"].dump();

  RunResult verify = d.Ctl({"verify", "--rehash"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  RunResult human = d.Ctl({"show", capture_by_dispatch[0]});
  EXPECT_EQ(human.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(human.out, "matmul_bf16")) << human.out;

  ASSERT_EQ(d.Stop(SIGTERM).exit_code, 0);

  // With the daemon gone, open its store directly and compare every byte.
  store::StoreOptions options;
  options.dir = d.store();
  options.chunk_size = kChunk;
  auto s = store::Store::Open(options);
  ASSERT_TRUE(s.ok()) << s.status();
  for (const auto& [dispatch, id] : capture_by_dispatch) {
    auto m = (*s)->GetManifest(id);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(m->pre().regions_size(), 2);
    std::map<uint64_t, std::string> pre_bytes;
    for (const auto& region : m->pre().regions()) {
      uint32_t r = static_cast<uint32_t>((region.va() - agent::testing::SyntheticVa(0)) >> 32);
      std::string expected =
          agent::testing::SyntheticBytes(kSeed, r, dispatch, region.data().size());
      std::string got = ReadRegion(**s, region, "");
      EXPECT_TRUE(got == expected) << id << " pre region " << r << " differs";
      pre_bytes[region.va()] = got;
    }
    ASSERT_GT(m->post().regions_size(), 0) << "--mutate must produce a post-dispatch diff";
    for (const auto& region : m->post().regions()) {
      EXPECT_TRUE(region.diff());
      uint32_t r = static_cast<uint32_t>((region.va() - agent::testing::SyntheticVa(0)) >> 32);
      std::string expected =
          agent::testing::SyntheticBytes(kSeed, r, dispatch + 1, region.data().size());
      EXPECT_TRUE(ReadRegion(**s, region, pre_bytes[region.va()]) == expected)
          << id << " post region " << r << " differs";
      // Only the mutated quarter changes: the diff must be smaller than the region.
      EXPECT_LT(static_cast<uint64_t>(region.changed_chunks_size()) * kChunk,
                region.data().size());
    }
  }
}

// Lists regular files whose name starts with tmp- anywhere under `dir`.
void FindTempFiles(const std::string& dir, std::vector<std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string path = dir + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      FindTempFiles(path, out);
    } else if (absl::StartsWith(name, "tmp-")) {
      out->push_back(path);
    }
  }
  closedir(d);
}

TEST_F(FullStackTest, KillDashNineDuringIngestNeverExposesAPartialCapture) {
  // Several kill points: as soon as an ingest is in flight, and a little later.
  for (int delay_ms : {0, 40, 150}) {
    SCOPED_TRACE(absl::StrCat("kill delay ", delay_ms, " ms"));
    std::string dir = MakeTempDir("kc_kill9");
    {
      Daemon d(dir);
      ASSERT_EQ(d.Ctl({"arm", "--kernel=big", "--count=3"}).exit_code, 0);
      Background agent({BinaryPath("synthetic_agent"), "--socket=" + d.agent_socket(),
                        "--kernels=big_kernel", "--dispatches=3", "--region-mib=48,48",
                        "--seed=3", "--mutate", "--wait-arm-ms=5000"});
      bool in_flight = WaitFor(
          [&] {
            RunResult st = d.Ctl({"--json", "status"});
            auto j = nlohmann::json::parse(st.out, nullptr, false);
            return !j.is_discarded() && U64(j.value("ingests_in_flight", nlohmann::json(0))) > 0;
          },
          std::chrono::seconds(20));
      ASSERT_TRUE(in_flight) << "no ingest observed in flight";
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      RunResult killed = d.Stop(SIGKILL);
      EXPECT_EQ(killed.signal, SIGKILL);
      // The application side must survive its daemon dying.
      RunResult agent_result = agent.Stop(0, std::chrono::seconds(30));
      EXPECT_FALSE(agent_result.timed_out);
      EXPECT_EQ(agent_result.signal, 0) << agent_result.err;

      Daemon restarted(dir);
      nlohmann::json list = restarted.CtlJson({"captures"});
      // Whatever is listed must be complete: every listed capture verifies.
      RunResult verify = restarted.Ctl({"verify", "--rehash"});
      EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
      for (const auto& c : list.value("captures", nlohmann::json::array())) {
        nlohmann::json show = restarted.CtlJson({"show", c["capture_id"].get<std::string>()});
        EXPECT_EQ(show["manifest"]["pre"]["regions"].size(), 2u);
      }
      std::vector<std::string> temps;
      FindTempFiles(restarted.store(), &temps);
      EXPECT_TRUE(temps.empty()) << "left-over temp file: " << temps.front();
      EXPECT_EQ(restarted.Stop(SIGTERM).exit_code, 0);
    }
    RemoveTree(dir);
  }
}

TEST_F(FullStackTest, BadRequestsGetClearErrorsAndTheDaemonKeepsServing) {
  Daemon d(dir_);
  RunResult bad_regex = d.Ctl({"arm", "--match=regex", "--kernel=(unclosed"});
  EXPECT_EQ(bad_regex.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(absl::AsciiStrToLower(bad_regex.err), "regex")) << bad_regex.err;

  RunResult traversal = d.Ctl({"show", "../../etc/passwd"});
  EXPECT_EQ(traversal.exit_code, 2) << traversal.err;
  RunResult unknown = d.Ctl({"show", "cap-0123456789ab"});
  EXPECT_EQ(unknown.exit_code, 3) << unknown.err;
  RunResult rm_unknown = d.Ctl({"rm", "cap-0123456789ab"});
  EXPECT_EQ(rm_unknown.exit_code, 3) << rm_unknown.err;
  RunResult bad_import = d.Ctl({"import", dir_ + "/does-not-exist"});
  EXPECT_NE(bad_import.exit_code, 0);
  EXPECT_FALSE(bad_import.err.empty());
  RunResult bad_disarm = d.Ctl({"disarm", "arm-nope"});
  EXPECT_EQ(bad_disarm.exit_code, 3) << bad_disarm.err;

  // A client that sends garbage to the agent socket is dropped, nothing else.
  RunResult garbage = RunProcess({"/bin/sh", "-c",
                           "head -c 4096 /dev/urandom | python3 -c \"import socket,sys;"
                           "s=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);"
                           "s.sendall(sys.stdin.buffer.read());s.close()\" " +
                               d.agent_socket()});
  EXPECT_EQ(garbage.exit_code, 0) << garbage.err;

  EXPECT_EQ(d.Ctl({"status"}).exit_code, 0);
  EXPECT_TRUE(d.proc().Running());
}

}  // namespace
}  // namespace kerncap::testing
