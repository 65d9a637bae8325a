// Live substitution on a real GPU, end to end: kerncapd on a temp store;
// substitute_app (agent/cuda/gpu_tests) under the agent, which checks every
// result itself; a capture of its kc_scale_add for the preflight; then, while
// the application runs,
//   1. `kerncapctl substitute --preflight=CAPTURE --ab --count=N --wait` with
//      substitute_variant.cubin (same results, ~20 us slower per block): the
//      preflight passes, N dispatches run the variant, both device times come
//      back and the variant's is the larger one (so it really ran);
//   2. substitute_bad_layout.cubin (an extra parameter): refused by the
//      agent's layout check, nothing substituted;
// and the application must still exit 0 (its own check passed throughout).
//
// Binaries: $KERNCAP_BUILD_DIR/{bin/kerncapd,bin/kerncapctl,bin/kerncap-replay,
// lib/libkerncap_agent.so,gpu_tests/substitute_app} and the two cubins in
// gpu_tests/ (a build tree) or substitute/ (the GPU bundle). With
// $KERNCAP_GPU_LOG_DIR set, the outputs are kept in $KERNCAP_GPU_LOG_DIR/substitute/.
// Skips (GTEST_SKIP) without a GPU.
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/subprocess.h"

namespace kerncap {
namespace {

namespace fs = std::filesystem;
using testing::Background;
using testing::RunProcess;
using testing::RunResult;
using testing::WaitFor;

std::string NoGpuReason() {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return absl::StrCat("no libcuda.so.1 (", ::dlerror(), ")");
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(::dlsym(h, "cuInit"));
  auto count = reinterpret_cast<CountFn>(::dlsym(h, "cuDeviceGetCount"));
  if (init == nullptr || count == nullptr) return "libcuda.so.1 lacks cuInit";
  if (init(0) != 0) return "cuInit failed";
  int n = 0;
  if (count(&n) != 0 || n == 0) return "no CUDA device";
  return "";
}

std::string BuildDir() {
  const char* b = std::getenv("KERNCAP_BUILD_DIR");
  return b != nullptr ? b : "build";
}

std::string Cubin(const std::string& name) {
  for (const char* dir : {"gpu_tests", "substitute"}) {
    fs::path p = fs::path(BuildDir()) / dir / name;
    if (fs::exists(p)) return p.string();
  }
  return "";
}

uint64_t U64(const nlohmann::json& v) {
  if (v.is_null()) return 0;
  return v.is_string() ? std::stoull(v.get<std::string>()) : v.get<uint64_t>();
}

void Keep(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("KERNCAP_GPU_LOG_DIR");
  if (dir == nullptr) return;
  fs::create_directories(fs::path(dir) / "substitute");
  std::ofstream(fs::path(dir) / "substitute" / name) << text;
}

class SubstituteGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = NoGpuReason();
    if (!why.empty()) GTEST_SKIP() << why;
    dir_ = testing::MakeTempDir("kc_subgpu");
    daemon_ = std::make_unique<Background>(std::vector<std::string>{
        Bin("kerncapd"), "--store=" + dir_ + "/store", "--socket=" + Sock(),
        "--agent-socket=" + AgentSock()});
    ASSERT_TRUE(WaitFor([&] { return Ctl({"status"}).exit_code == 0; }))
        << daemon_->Stderr();
  }
  void TearDown() override {
    if (daemon_) {
      RunResult d = daemon_->Stop(SIGTERM);
      Keep("kerncapd.log", d.err);
    }
    if (!dir_.empty()) testing::RemoveTree(dir_);
  }
  std::string Bin(const std::string& name) { return BuildDir() + "/bin/" + name; }
  std::string Sock() { return dir_ + "/ctl.sock"; }
  std::string AgentSock() { return dir_ + "/agent.sock"; }
  RunResult Ctl(std::vector<std::string> args, int timeout_s = 120) {
    args.insert(args.begin(), {Bin("kerncapctl"), "--socket=" + Sock()});
    return RunProcess(args, std::chrono::seconds(timeout_s));
  }
  std::vector<std::string> AppEnv() {
    return {"CUDA_INJECTION64_PATH=" + BuildDir() + "/lib/libkerncap_agent.so",
            "KERNCAP_AGENT_SOCKET=" + AgentSock()};
  }
  std::vector<std::string> App(const std::vector<std::string>& args,
                               const std::string& program = "substitute_app") {
    // posix_spawn does not search PATH (tests/integration/subprocess.cc).
    std::vector<std::string> argv = {"/usr/bin/env"};
    for (const std::string& e : AppEnv()) argv.push_back(e);
    argv.push_back(BuildDir() + "/gpu_tests/" + program);
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  // `kerncapctl kernels --sample` of a live application (`argv`, which runs
  // until the file `stop` exists, its process name `process`): a 2 s sample
  // as JSON and a 1 s one as text with `text_flags`, kept as
  // PREFIXkernels_sample.{json,txt}; the application is then stopped and
  // must exit 0 having printed `app_ok`. *agent: the one sampled agent.
  void SampleLiveApp(const std::vector<std::string>& argv, const std::string& stop,
                     const std::string& process, const std::vector<std::string>& text_flags,
                     const std::string& prefix, const std::string& app_ok,
                     nlohmann::json* agent, RunResult* text) {
    Background app(argv);
    ASSERT_TRUE(WaitFor([&] {
      return absl::StrContains(Ctl({"--json", "agents"}).out, process);
    }, std::chrono::seconds(60))) << "the application's agent did not connect";
    RunResult r = Ctl({"--json", "kernels", "--process=" + process, "--sample=2s"});
    Keep(prefix + "kernels_sample.json", r.out + "\n---\n" + r.err);
    std::vector<std::string> text_args = {"kernels", "--process=" + process, "--sample=1s"};
    text_args.insert(text_args.end(), text_flags.begin(), text_flags.end());
    *text = Ctl(text_args);
    Keep(prefix + "kernels_sample.txt", text->out + "\n---\n" + text->err);
    std::ofstream(stop) << "stop\n";
    RunResult done = app.Stop(0, std::chrono::seconds(60));
    Keep(prefix + "app_sampled.txt", done.out + done.err);
    EXPECT_EQ(done.exit_code, 0) << done.out << done.err;
    EXPECT_TRUE(absl::StrContains(done.out, app_ok)) << done.out;

    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto doc = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << r.out;
    ASSERT_EQ(doc["agents"].size(), 1u) << r.out;
    *agent = doc["agents"][0];
    EXPECT_EQ(agent->value("sampled", false), true) << agent->dump();
  }

  std::string dir_;
  std::unique_ptr<Background> daemon_;
};

TEST_F(SubstituteGpuTest, VariantRunsInTheLiveAppAndAbReportsBothDeviceTimes) {
  const std::string variant = Cubin("substitute_variant.cubin");
  const std::string bad = Cubin("substitute_bad_layout.cubin");
  ASSERT_FALSE(variant.empty() || bad.empty()) << "substitute_*.cubin not built";

  // A capture of the kernel for the preflight.
  ASSERT_EQ(Ctl({"arm", "--kernel=kc_scale_add", "--count=1"}).exit_code, 0);
  RunResult first = RunProcess(App({"5"}), std::chrono::seconds(120));
  Keep("capture_run.txt", first.out + first.err);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  std::string capture;
  ASSERT_TRUE(WaitFor([&] {
    RunResult l = Ctl({"--json", "captures", "--kernel=kc_scale_add"});
    auto j = nlohmann::json::parse(l.out, nullptr, false);
    if (j.is_discarded() || !j.contains("captures") || j["captures"].empty()) return false;
    capture = j["captures"][0]["capture_id"];
    return true;
  }, std::chrono::seconds(60)));

  // The live application.
  const std::string stop = dir_ + "/stop";
  Background app(App({"0", stop}));
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(Ctl({"--json", "agents"}).out, "substitute_app");
  }, std::chrono::seconds(60))) << "the application's agent did not connect";

  RunResult r = Ctl({"--json", "substitute", "--kernel=kc_scale_add", "--code-object=" + variant,
                     "--preflight=" + capture, "--process=substitute_app", "--ab", "--count=200",
                     "--wait"}, 300);
  Keep("substitute_ab.json", r.out + "\n---\n" + r.err);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto info = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(info.is_discarded()) << r.out;
  EXPECT_TRUE(absl::StrContains(info["preflight"].get<std::string>(), ": pass")) << info.dump();
  ASSERT_EQ(info["agents"].size(), 1u) << info.dump();
  const auto& a = info["agents"][0];
  EXPECT_EQ(a["state"], "ended") << a.dump(2);
  EXPECT_EQ(U64(a["variant_launches"]), 200u) << a.dump(2);
  EXPECT_EQ(U64(a["original_launches"]), 200u) << a.dump(2);
  EXPECT_GT(U64(a["variant"]["samples"]), 150u) << a.dump(2);
  EXPECT_GT(U64(a["original"]["samples"]), 150u) << a.dump(2);
  const double v = a["variant"]["mean_us"].get<double>();
  const double o = a["original"]["mean_us"].get<double>();
  EXPECT_GT(o, 0.0) << a.dump(2);
  EXPECT_GT(v, o + 5.0) << "the variant spins ~20 us; its device time must show it: "
                        << a.dump(2);
  bool layout_checked = false;
  for (const auto& c : a["checks"]) {
    layout_checked = layout_checked || absl::StrContains(c.get<std::string>(), "parameter layout");
  }
  EXPECT_TRUE(layout_checked) << a.dump(2);
  RunResult text = Ctl({"substitutions", "--all"});
  Keep("substitutions.txt", text.out);

  // A variant with another parameter layout is refused; nothing substituted.
  r = Ctl({"--json", "substitute", "--kernel=kc_scale_add", "--code-object=" + bad,
           "--no-preflight", "--process=substitute_app", "--count=10", "--wait"}, 120);
  Keep("substitute_bad_layout.json", r.out + "\n---\n" + r.err);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto refused = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(refused.is_discarded()) << r.out;
  EXPECT_EQ(refused["agents"][0]["state"], "refused") << refused.dump(2);
  EXPECT_TRUE(absl::StrContains(refused["agents"][0]["reason"].get<std::string>(),
                                "parameter layouts differ"))
      << refused.dump(2);
  EXPECT_EQ(U64(refused["agents"][0]["variant_launches"]), 0u);

  // The application's own check passed throughout.
  std::ofstream(stop) << "stop\n";
  RunResult done = app.Stop(0, std::chrono::seconds(60));
  Keep("app.txt", done.out + done.err);
  EXPECT_EQ(done.exit_code, 0) << done.out << done.err;
  EXPECT_TRUE(absl::StrContains(done.out, "every result checked OK")) << done.out;
}

// kerncapctl kernels --sample against the live application: its kernel's
// launches are counted (one launch every ~1 ms), with its one launch
// configuration, and its argument shapes: a = 1 + it % 7 and b = it % 13
// make 91 distinct (a, b) pairs, more than the 64 told apart, so the count
// is capped (the buffers never move); the application keeps passing its
// own checks.
TEST_F(SubstituteGpuTest, KernelsSampleCountsTheLiveApplicationsLaunches) {
  const std::string stop = dir_ + "/stop";
  RunResult text;
  nlohmann::json a;
  ASSERT_NO_FATAL_FAILURE(SampleLiveApp(App({"0", stop}), stop, "substitute_app", {"-o", "wide"},
                                        "", "every result checked OK", &a, &text));
  const nlohmann::json* kernel = nullptr;
  for (const nlohmann::json& k : a["kernels"]) {
    if (k.value("mangled_name", "") == "kc_scale_add") kernel = &k;
  }
  ASSERT_NE(kernel, nullptr) << a.dump();
  EXPECT_GE(kernel->value("launches", 0), 100) << kernel->dump();
  ASSERT_EQ((*kernel)["launch_configs"].size(), 1u) << kernel->dump();
  EXPECT_EQ((*kernel)["launch_configs"][0].value("launches", 0), kernel->value("launches", 0));
  EXPECT_EQ(kernel->value("argument_shapes", 0), 64) << kernel->dump();
  EXPECT_EQ(kernel->value("argument_shapes_capped", false), true) << kernel->dump();
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_TRUE(absl::StrContains(text.out, "kc_scale_add")) << text.out;
}

// kerncapctl kernels --sample against a live application that launches only
// CUDA graphs (graph_decode_loop: one graph per batch size 1/2/4/8 replayed
// step by step, as serving engines do): the graph launches are counted, and
// the kernel nodes of each launch are counted as launches of their kernels,
// with each graph's launch configuration (grid.y = the batch size); the
// application keeps passing its own checks.
TEST_F(SubstituteGpuTest, KernelsSampleCountsTheKernelNodesOfGraphLaunches) {
  const std::string stop = dir_ + "/stop";
  RunResult text;
  nlohmann::json a;
  ASSERT_NO_FATAL_FAILURE(SampleLiveApp(App({"--until=" + stop}, "graph_decode_loop"), stop,
                                        "graph_decode_loop", {}, "graph_",
                                        "over 4 graphs (batch 1/2/4/8)", &a, &text));
  const uint64_t graph_launches = U64(a["graph_launches"]);
  EXPECT_GE(graph_launches, 100u) << a.dump();
  std::map<std::string, const nlohmann::json*> by_name;
  for (const nlohmann::json& k : a["kernels"]) by_name[k.value("mangled_name", "")] = &k;
  for (const char* name : {"_Z8dl_embedPjPKji", "_Z6dl_mlpPjPKji", "_Z9dl_samplePjPKji"}) {
    ASSERT_TRUE(by_name.count(name)) << name << " not sampled: " << a.dump();
    // One node of each kernel per graph: as many launches as graph launches
    // (each record reads the clock: one launch at the window's edge may
    // fall on either side).
    const uint64_t n = U64((*by_name[name])["launches"]);
    EXPECT_LE(std::max(n, graph_launches) - std::min(n, graph_launches), 1u)
        << by_name[name]->dump();
  }
  const nlohmann::json& mlp = *by_name["_Z6dl_mlpPjPKji"];
  std::set<uint64_t> batches;
  for (const nlohmann::json& c : mlp["launch_configs"]) {
    if (c["grid"].is_array() && c["grid"].size() >= 2) batches.insert(U64(c["grid"][1]));
  }
  EXPECT_EQ(batches, (std::set<uint64_t>{1, 2, 4, 8})) << mlp.dump();
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_TRUE(absl::StrContains(text.out, "graph launches, their kernel nodes counted")) << text.out;
}

}  // namespace
}  // namespace kerncap
