// End-to-end on a real GPU: for each test program of agent/cuda/gpu_tests,
// start kerncapd on a temp store, arm the program's documented kernel, run
// the program under the agent (CUDA_INJECTION64_PATH), wait for the capture,
// export it to a .kcap and replay it with `kerncap-replay validate`, which
// must PASS; the application must exit normally. Refusal cases (texture
// objects kerncap cannot replay faithfully) must show their reason in the
// arm's status and store no capture.
//
// Binaries: $KERNCAP_BUILD_DIR/{bin/kerncapd,bin/kerncapctl,bin/kerncap-replay,
// lib/libkerncap_agent.so,gpu_tests/<program>} (a build tree or the GPU
// bundle, deploy/gpu/bundle.sh). With $KERNCAP_GPU_LOG_DIR set, every case's
// daemon log, program output, capture summary and replay report are kept in
// $KERNCAP_GPU_LOG_DIR/<case>/. Skips (GTEST_SKIP) without a GPU.
//
// Python cases (PyTorch eager, Triton) run tests/gpu/python/<script> —
// $KERNCAP_BUILD_DIR/python/<script> in the bundle, else the source tree —
// with $KERNCAP_PYTHON or the first python3 on PATH; they skip when there is
// no python3, or when the script exits 77 (no torch/triton/device). The cuBLAS
// case finds libcublas.so.13 on the library path or in $KERNCAP_CUBLAS_DIR
// (deploy/gpu/run_gpu_tests.sh looks for it), else it skips.
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/subprocess.h"

namespace kerncap {
namespace {

using std::chrono::seconds;
namespace fs = std::filesystem;

// Why there is no usable GPU, or "" when there is one.
std::string NoGpuReason() {
  void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return absl::StrCat("no libcuda.so.1 (", ::dlerror(), ")");
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(::dlsym(h, "cuInit"));
  auto count = reinterpret_cast<CountFn>(::dlsym(h, "cuDeviceGetCount"));
  if (init == nullptr || count == nullptr) return "libcuda.so.1 lacks cuInit";
  int r = init(0);
  if (r != 0) return absl::StrCat("cuInit failed (CUresult ", r, ")");
  int n = 0;
  if (count(&n) != 0 || n == 0) return "no CUDA device";
  return "";
}

std::string BuildDir() {
  const char* b = std::getenv("KERNCAP_BUILD_DIR");
  return b != nullptr ? b : "build";
}

// $KERNCAP_PYTHON, else the first python3 on PATH; "" when there is none.
std::string FindPython() {
  const char* p = std::getenv("KERNCAP_PYTHON");
  if (p != nullptr && *p != '\0') return p;
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(std::string(dir)) / "python3";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

// `name` on PATH, or "".
std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(std::string(dir)) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

// The bundle's python/<script>, else the source tree's tests/gpu/python/.
std::string PythonScript(const std::string& script) {
  fs::path bundled = fs::path(BuildDir()) / "python" / script;
  if (fs::exists(bundled)) return bundled.string();
  return (fs::path(KERNCAP_GPU_PYTHON_DIR) / script).string();
}

struct Case {
  std::string name;        // test case name
  std::string program = {};  // agent/cuda/gpu_tests/<program>
  std::vector<std::string> arm = {};  // kerncapctl arm arguments
  // Extra validate arguments; "{NAME}" is replaced by the hex pointer the
  // program printed as "NAME=0x..." (e.g. {sums}).
  std::vector<std::string> validate = {};
  bool also_daemon_path = false;  // replay a second time straight from kerncapd
  bool bench = false;             // also run kerncap-replay bench
  std::string python_script = {};  // non-empty: run tests/gpu/python/<this> instead
  bool kerncapctl_validate = false;  // also validate through `kerncapctl validate`
  // Kernels inside CUDA graphs and refusals:
  int captures = 1;  // captures to wait for; each is shown, exported and validated
  bool exact_captures = false;  // and no more than that once the program has ended
  std::vector<std::string> show_contains = {};  // in `kerncapctl show` of every capture
  std::vector<std::string> show_lacks = {};     // never in it
  std::vector<std::string> arms_contain = {};   // in `kerncapctl --json arms --all` afterwards
  // The program arms itself when it is ready (after warm-up), running
  // $KERNCAP_TEST_CTL (kerncapctl and its --socket flag, space-separated)
  // with its own `arm ...` arguments; `arm` is then unused.
  bool arm_in_app = false;
  // Also `kerncapctl repro` the first capture and run the project's
  // `make validate` one-shot and through `make serve` (resident mode).
  bool repro = false;
  // Texture/surface objects the capture must hold and the replay recreate
  // (validate's and bench's "texture_objects").
  int texture_objects = 0;
  // A CUDA 12 runtime program staged by deploy/gpu/stage_cuda12.sh:
  // $KERNCAP_BUILD_DIR/cuda12/bin/<program> (skips when it is not staged).
  bool cuda12 = false;
  bool preload = false;  // load the agent with LD_PRELOAD, not CUDA_INJECTION64_PATH
  // More environment for the program; "{BUILD}" stands for $KERNCAP_BUILD_DIR.
  std::map<std::string, std::string> env = {};
  std::vector<std::string> stderr_contains = {};  // in the program's stderr (the agent's log)
};

std::ostream& operator<<(std::ostream& o, const Case& c) { return o << c.name; }

std::vector<Case> Cases() {
  return {
      // Its output buffer is fresh (zeroed) device memory: named by its zero
      // fingerprint from the first capture on, not sent over PCIe.
      {.name = "vector_add",
       .program = "vector_add",
       .arm = {"--kernel=vector_add"},
       .also_daemon_path = true,
       .bench = true,
       .kerncapctl_validate = true,
       .show_contains = {"4.00 MiB  zero or held from earlier captures"}},
      {"inplace_scale_2nd", "inplace_scale", {"--kernel=inplace_scale", "--nth=2"}, {}, false,
       true},
      // Float atomics accumulate in a run-dependent order: sums need a tolerance;
      // the int counts stay exact.
      {"histogram_atomics_2nd",
       "histogram_atomics",
       {"--kernel=histogram", "--nth=2"},
       {"--region-dtype={sums}:f32", "--rtol=1e-5", "--atol=1e-6"}},
      {"batched_pointer_array", "pointer_structs", {"--kernel=batched_axpy"}, {}},
      {"struct_of_pointers", "pointer_structs", {"--kernel=struct_args"}, {}},
      {"struct_of_pointers_relocated", "pointer_structs", {"--kernel=struct_args"},
       {"--force-relocate"}},
      {"linked_list", "linked_list", {"--kernel=list_sum"}, {}},
      {"linked_list_relocated", "linked_list", {"--kernel=list_sum"}, {"--force-relocate"}},
      {"globals_3rd", "globals_update", {"--kernel=apply_globals", "--nth=3"}, {}},
      {"dynamic_smem_96k", "dynamic_smem", {"--kernel=smem_reverse"}, {}},
      {"pipeline_stage3_5th", "pipeline", {"--kernel=stage3_normalize", "--nth=5"}, {}},
      {"cooperative_grid_sync", "cooperative", {"--kernel=coop_reduce"}, {}},
      {"two_threads_3rd", "two_threads", {"--kernel=target_kernel", "--nth=3"}, {}},
      {"fork_parent", "fork_app", {"--kernel=parent_kernel"}, {}},
      {"multi_gpu_device1", "multi_gpu", {"--kernel=per_device_fill", "--device=1"}, {}},
      // Driver-API JIT: PTX loaded with cuModuleLoadData, a .global written
      // between launches.
      {"ptx_jit_2nd", "ptx_jit", {"--kernel=jit_saxpy", "--nth=2"}, {}, false, false, "", true},
      // Binary-only cuBLAS: kernel names unknown in advance (nvjet_*, *xmma_gemm*,
      // *sgemm*); the program launches nothing else, count=1 takes the first.
      {"cublas_sgemm",
       "cublas_gemm",
       {"--kernel=gemm|Gemm|nvjet|xmma", "--match=regex", "--count=1"},
       {"--dtype=f32", "--rtol=1e-5", "--atol=1e-5"}},
      // Texture objects over linear and pitched memory: recreated at replay
      // from the recorded descriptors, the handle patched into the arguments.
      {.name = "texture_linear",
       .program = "texture_linear",
       .arm = {"--kernel=tex_linear_gather"},
       .bench = true,
       .texture_objects = 1},
      {.name = "texture_linear_relocated",
       .program = "texture_linear",
       .arm = {"--kernel=tex_linear_gather"},
       .validate = {"--force-relocate"},
       .texture_objects = 1},
      {.name = "texture_in_struct",
       .program = "texture_linear",
       .arm = {"--kernel=tex_struct_gather"},
       .texture_objects = 1},
      {.name = "texture_pitch2d_2nd",
       .program = "texture_pitch2d",
       .arm = {"--kernel=tex_bilinear", "--nth=2"},
       .bench = true,
       .texture_objects = 1},
      {.name = "texture_pitch2d_relocated",
       .program = "texture_pitch2d",
       .arm = {"--kernel=tex_bilinear"},
       .validate = {"--force-relocate"},
       .texture_objects = 1},
      {"torch_eager_add",
       "",
       {"--kernel=add|Add", "--match=regex", "--count=1"},
       {"--dtype=f32", "--rtol=1e-6", "--atol=1e-6"},
       false,
       false,
       "torch_add.py"},
      {"triton_add",
       "",
       {"--kernel=kc_triton_add"},
       {"--dtype=f32", "--rtol=1e-6", "--atol=1e-6"},
       false,
       false,
       "triton_add.py"},
      // Kernels inside CUDA graphs (the agent runs the graph launch node by
      // node and captures the selected node; "(i of n in order)" is the
      // node's place in the flattened order, certain for these chains).
      {.name = "graph_stream_capture_2nd",
       .program = "graph_stream_capture",
       .arm = {"--kernel=gs_axpy", "--nth=2"},
       .also_daemon_path = true,
       .bench = true,
       .kerncapctl_validate = true,
       .show_contains = {"graph", "(3 of 5 in order)", "launch 2"},
       .repro = true},
      {.name = "graph_explicit_child_node_3rd",
       .program = "graph_explicit",
       .arm = {"--kernel=ex_child_mul", "--nth=3"},
       .show_contains = {"(3 of 8 in order)", "launch 3"}},
      {.name = "graph_nth_node_5th_launch",
       .program = "graph_nth_node",
       .arm = {"--kernel=gn_step", "--nth=19"},
       .show_contains = {"(4 of 5 in order)", "launch 5"}},
      {.name = "graph_decode_loop_step6",
       .program = "graph_decode_loop",
       .arm = {"--kernel=dl_mlp", "--nth=6"},
       .show_contains = {"(2 of 3 in order)", "launch 2"}},
      {.name = "graph_two_streams_10th",
       .program = "graph_two_streams",
       .arm = {"--kernel=ts_target", "--nth=10"},
       .show_contains = {"(1 of 2 in order)", "launch 10"}},
      // Refused graphs pass through, the arm says why (once per graph) and
      // stays active: the direct launch at the end is captured.
      {.name = "graph_refusals_then_direct",
       .program = "graph_refusals",
       .arm = {"--kernel=rf_", "--count=1"},
       .show_lacks = {"of exec"},
       .arms_contain = {"memory allocation", "device launch"}},
      // PyTorch: torch.compile(mode="reduce-overhead") replays CUDA graphs;
      // an Inductor Triton kernel and the cuBLAS GEMM are captured from
      // inside them. A torch.cuda.CUDAGraph decode loop (one graph per
      // batch size).
      {.name = "torch_compile_reduce_overhead",
       .validate = {"--dtype=f32", "--rtol=1e-5", "--atol=1e-5"},
       .python_script = "torch_graphs.py",
       .captures = 2,
       .show_contains = {"of exec"},
       .arm_in_app = true},
      // A CUDA 12 runtime application (libcudart.so.12 and a cubin of the
      // CUDA 12 ptxas, from the pip wheels) on this host's driver: the agent
      // takes the driver's CUPTI under CUDA_INJECTION64_PATH, and the wheel's
      // CUPTI 12 when told to (KERNCAP_AGENT_CUPTI) under LD_PRELOAD.
      {.name = "cuda12_runtime_2nd",
       .program = "cuda12_axpy",
       .arm = {"--kernel=kc12_axpy", "--nth=2"},
       .kerncapctl_validate = true,
       .cuda12 = true,
       .stderr_contains = {"CUPTI "}},
      {.name = "cuda12_runtime_cupti12_preload",
       .program = "cuda12_axpy",
       .arm = {"--kernel=kc12_axpy", "--nth=2"},
       .cuda12 = true,
       .preload = true,
       .env = {{"KERNCAP_AGENT_CUPTI", "{BUILD}/cuda12/nvidia/cuda_cupti/lib"}},
       .stderr_contains = {"CUPTI 12 from "}},
      {.name = "torch_cuda_graph_decode",
       .validate = {"--dtype=f32", "--rtol=1e-5", "--atol=1e-5"},
       .python_script = "torch_cuda_graph_decode.py",
       .show_contains = {"of exec"},
       .arm_in_app = true},
      // The captured launch is the program's last GPU work: its device
      // snapshot is still draining when the program returns from main (or
      // resets the device); the agent holds the runtime's teardown until the
      // drain is done, so the program ends normally and the capture validates.
      {.name = "exit_while_draining",
       .program = "exit_after_launch",
       .arm = {"--kernel=touch_few"},
       .env = {{"KERNCAP_AGENT_EXIT_FLUSH_MS", "20000"}},
       .stderr_contains = {"waiting for a capture's device snapshot to drain"}},
      {.name = "device_reset_while_draining",
       .program = "exit_after_launch",
       .arm = {"--kernel=touch_few"},
       .env = {{"EXIT_MODE", "reset"}, {"KERNCAP_AGENT_EXIT_FLUSH_MS", "20000"}},
       .stderr_contains = {"waiting for a capture's device snapshot to drain"}},
      // Per-shape arms: one capture per distinct launch shape (3 of 12
      // dispatches; the buffer pointer moves between rounds and must not
      // make new shapes), each validated.
      {.name = "per_shape_scalars",
       .program = "launch_shapes",
       .arm = {"--kernel=shaped_scale", "--per-shape", "--count=8"},
       .captures = 3,
       .exact_captures = true,
       .show_contains = {"  shape "}},
      {.name = "per_shape_launch",
       .program = "launch_shapes",
       .arm = {"--kernel=shaped_scale", "--per-shape=launch"},
       .captures = 3,
       .exact_captures = true,
       .show_contains = {"  shape "}},
  };
}

// A temp dir, kerncapd on it (StartDaemon) and kerncapctl for one case.
template <typename Param>
class GpuDaemonTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    static const std::string reason = NoGpuReason();
    if (!reason.empty()) GTEST_SKIP() << "no GPU: " << reason;
    tmp_ = testing::MakeTempDir("kc_gpu_e2e");
    const char* logs = std::getenv("KERNCAP_GPU_LOG_DIR");
    if (logs != nullptr) {
      log_dir_ = (fs::path(logs) / this->GetParam().name).string();
      fs::create_directories(log_dir_);
    }
  }
  void TearDown() override {
    if (daemon_) daemon_->Stop(SIGTERM);
    if (daemon_ && !log_dir_.empty()) Keep("kerncapd.log", daemon_->Stderr());
    daemon_.reset();
    if (!tmp_.empty()) testing::RemoveTree(tmp_);
  }

  void Keep(const std::string& file, const std::string& text) {
    if (log_dir_.empty()) return;
    std::ofstream(fs::path(log_dir_) / file) << text;
  }
  std::string Bin(const std::string& name) { return absl::StrCat(BuildDir(), "/bin/", name); }
  std::vector<std::string> Ctl(std::vector<std::string> args) {
    std::vector<std::string> v = {Bin("kerncapctl"), "--socket=" + tmp_ + "/ctl.sock"};
    v.insert(v.end(), args.begin(), args.end());
    return v;
  }
  // kerncapd on tmp_, serving once this returns true.
  bool StartDaemon() {
    daemon_ = std::make_unique<testing::Background>(std::vector<std::string>{
        Bin("kerncapd"), "--store=" + tmp_ + "/store", "--socket=" + tmp_ + "/ctl.sock",
        "--agent-socket=" + tmp_ + "/agent.sock", "--log-level=debug"});
    return testing::WaitFor([&] { return fs::exists(tmp_ + "/ctl.sock"); }, seconds(20));
  }
  // The environment that runs a program under the agent, talking to our kerncapd.
  std::map<std::string, std::string> AgentEnv() {
    return {{"CUDA_INJECTION64_PATH", absl::StrCat(BuildDir(), "/lib/libkerncap_agent.so")},
            {"KERNCAP_AGENT_SOCKET", tmp_ + "/agent.sock"},
            {"KERNCAP_AGENT_LOG", "debug"}};
  }

  std::string tmp_;
  std::string log_dir_;
  std::unique_ptr<testing::Background> daemon_;
};

class GpuEndToEndTest : public GpuDaemonTest<Case> {
 protected:
  // Shows, exports and validates one capture of the case (bench and the
  // other paths for the first only). Output files get `suffix`.
  void ValidateCapture(const std::string& capture_id, const std::string& suffix,
                       const std::string& app_out, bool first);
};

TEST_P(GpuEndToEndTest, CaptureReplayValidates) {
  const Case& c = GetParam();
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  if (c.cuda12) {
    command = {absl::StrCat(BuildDir(), "/cuda12/bin/", c.program)};
    if (!fs::exists(command[0])) {
      GTEST_SKIP() << command[0] << " is not staged (deploy/gpu/stage_cuda12.sh)";
    }
  } else if (c.python_script.empty()) {
    command = {absl::StrCat(BuildDir(), "/gpu_tests/", c.program)};
  } else {
    const std::string python = FindPython();
    if (python.empty()) GTEST_SKIP() << "no python3 ($KERNCAP_PYTHON or PATH) for " << c.name;
    command = {python, PythonScript(c.python_script)};
    env["TRITON_CACHE_DIR"] = tmp_ + "/triton-cache";  // a fresh, writable cache
    env["PYTHONUNBUFFERED"] = "1";
  }
  const std::string agent = absl::StrCat(BuildDir(), "/lib/libkerncap_agent.so");
  ASSERT_TRUE(fs::exists(command.back())) << command.back();
  ASSERT_TRUE(fs::exists(agent)) << agent;
  const std::string what = c.python_script.empty() ? c.program : c.python_script;

  ASSERT_TRUE(StartDaemon()) << "kerncapd did not start: " << daemon_->Stderr();

  if (c.arm_in_app) {
    env["KERNCAP_TEST_CTL"] = absl::StrCat(Bin("kerncapctl"), " --socket=", tmp_, "/ctl.sock");
  } else {
    std::vector<std::string> arm = {"--json", "arm"};
    arm.insert(arm.end(), c.arm.begin(), c.arm.end());
    testing::RunResult armed = testing::RunProcess(Ctl(arm), seconds(30));
    Keep("arm.json", armed.out + armed.err);
    ASSERT_EQ(armed.exit_code, 0) << armed.out << armed.err;
  }

  for (const auto& [k, v] : AgentEnv()) env[k] = v;
  if (c.preload) {
    env["LD_PRELOAD"] = env["CUDA_INJECTION64_PATH"];
    env.erase("CUDA_INJECTION64_PATH");
  }
  for (auto [k, v] : c.env) {
    for (size_t at; (at = v.find("{BUILD}")) != std::string::npos;) v.replace(at, 7, BuildDir());
    env[k] = v;
  }
  testing::RunResult app = testing::RunProcess(command, seconds(180), env);
  Keep("program.stdout", app.out);
  Keep("program.stderr", app.err);
  if (app.exit_code == 77) GTEST_SKIP() << what << ": " << app.out;
  ASSERT_FALSE(app.timed_out) << what << " hung under the agent";
  ASSERT_EQ(app.exit_code, 0) << what << " did not exit normally under the agent (signal "
                              << app.signal << ")\n" << app.out << app.err;
  for (const std::string& want : c.stderr_contains) {
    EXPECT_NE(app.err.find(want), std::string::npos)
        << what << "'s stderr does not say \"" << want << "\":\n" << app.err;
  }

  std::vector<std::string> capture_ids;
  testing::WaitFor(
      [&] {
        testing::RunResult r = testing::RunProcess(Ctl({"--json", "captures"}), seconds(20));
        if (r.exit_code != 0) return false;
        auto j = nlohmann::json::parse(r.out, nullptr, false);
        if (j.is_discarded() || !j.contains("captures") || !j["captures"].is_array()) return false;
        capture_ids.clear();
        for (const auto& cap : j["captures"]) {
          std::string id = cap.value("capture_id", "");
          if (!id.empty()) capture_ids.push_back(id);
        }
        Keep("captures.json", r.out);
        return static_cast<int>(capture_ids.size()) >= c.captures;
      },
      seconds(30));
  ASSERT_GE(static_cast<int>(capture_ids.size()), c.captures)
      << "captures did not appear; program stderr:\n" << app.err;
  if (c.exact_captures) {
    std::this_thread::sleep_for(seconds(2));  // anything still on its way lands
    testing::RunResult r = testing::RunProcess(Ctl({"--json", "captures"}), seconds(20));
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(static_cast<int>(j["captures"].size()), c.captures) << r.out;
  }

  if (!c.arms_contain.empty()) {
    testing::RunResult arms = testing::RunProcess(Ctl({"--json", "arms", "--all"}), seconds(30));
    Keep("arms.json", arms.out + arms.err);
    for (const std::string& want : c.arms_contain) {
      EXPECT_NE(arms.out.find(want), std::string::npos)
          << "`kerncapctl arms` does not say \"" << want << "\":\n" << arms.out;
    }
  }
  for (size_t k = 0; k < capture_ids.size(); ++k) {
    SCOPED_TRACE(capture_ids[k]);
    ValidateCapture(capture_ids[k], k == 0 ? "" : absl::StrCat(k), app.out, k == 0);
  }
}

void GpuEndToEndTest::ValidateCapture(const std::string& capture_id, const std::string& suffix,
                                      const std::string& app_out, bool first) {
  const Case& c = GetParam();
  const std::string what = c.python_script.empty() ? c.program : c.python_script;
  testing::RunResult show = testing::RunProcess(Ctl({"show", capture_id}), seconds(30));
  Keep("show" + suffix + ".txt", show.out + show.err);
  for (const std::string& want : c.show_contains) {
    EXPECT_NE(show.out.find(want), std::string::npos)
        << "`kerncapctl show` does not say \"" << want << "\":\n" << show.out;
  }
  for (const std::string& bad : c.show_lacks) {
    EXPECT_EQ(show.out.find(bad), std::string::npos)
        << "`kerncapctl show` says \"" << bad << "\":\n" << show.out;
  }
  const std::string kcap = tmp_ + "/capture" + suffix + ".kcap";
  testing::RunResult exp =
      testing::RunProcess(Ctl({"export", capture_id, "--out", kcap}), seconds(120));
  ASSERT_EQ(exp.exit_code, 0) << exp.out << exp.err;

  std::vector<std::string> val = {Bin("kerncap-replay"), "validate", kcap, "--json"};
  for (std::string a : c.validate) {
    std::smatch m;
    static const std::regex kPlaceholder(R"(\{(\w+)\})");
    if (std::regex_search(a, m, kPlaceholder)) {
      std::smatch v;
      const std::regex printed(m[1].str() + R"(=(0x[0-9a-fA-F]+))");
      ASSERT_TRUE(std::regex_search(app_out, v, printed))
          << what << " did not print " << m[1].str() << "=0x...";
      a = std::regex_replace(a, kPlaceholder, v[1].str());
    }
    val.push_back(a);
  }
  testing::RunResult rep = testing::RunProcess(val, seconds(120));
  Keep("validate" + suffix + ".json", rep.out);
  Keep("validate" + suffix + ".stderr", rep.err);
  auto report = nlohmann::json::parse(rep.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << "validate printed no JSON:\n" << rep.out << rep.err;
  EXPECT_EQ(report.value("result", ""), "pass") << absl::StrJoin(val, " ") << "\n" << rep.out
                                                << rep.err;
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
  std::printf("[ %s ] %s: relocated=%s launch %.4f ms, %d regions, restore %.3f s\n",
              report.value("result", "?").c_str(), c.name.c_str(),
              report.value("relocated", false) ? "yes" : "no", report.value("launch_ms", 0.0),
              report.value("regions_compared", 0), report.value("restore_seconds", 0.0));
  // Texture objects: recreated (a new handle in the replay), not replayed
  // with the application's meaningless handle.
  const nlohmann::json textures = report.value("texture_objects", nlohmann::json::array());
  EXPECT_EQ(static_cast<int>(textures.size()), c.texture_objects) << rep.out;
  for (const nlohmann::json& t : textures) {
    EXPECT_FALSE(t.value("replay_handle", "").empty()) << t;
    std::printf("[ %s ] %s: %s object %s recreated as %s over %s %s+%llu\n",
                report.value("result", "?").c_str(), c.name.c_str(),
                t.value("type", "?").c_str(), t.value("captured_handle", "?").c_str(),
                t.value("replay_handle", "?").c_str(), t.value("resource", "?").c_str(),
                t.value("replay_ptr", "?").c_str(),
                static_cast<unsigned long long>(t.value("bytes", 0ull)));
  }

  if (!first) return;
  if (c.kerncapctl_validate) {
    // The same validation driven by kerncapctl (which execs kerncap-replay
    // with --daemon=unix:<its socket>).
    std::vector<std::string> kv = Ctl({"validate", capture_id.substr(0, 12), "--json"});
    kv.insert(kv.end(), val.begin() + 4, val.end());  // the case's tolerance flags
    testing::RunResult k = testing::RunProcess(kv, seconds(120));
    Keep("kerncapctl_validate.json", k.out + k.err);
    EXPECT_EQ(k.exit_code, 0) << absl::StrJoin(kv, " ") << "\n" << k.out << k.err;
    auto kj = nlohmann::json::parse(k.out, nullptr, false);
    EXPECT_FALSE(kj.is_discarded()) << k.out << k.err;
    if (!kj.is_discarded()) {
      EXPECT_EQ(kj.value("result", ""), "pass") << k.out;
    }
  }
  if (c.also_daemon_path) {
    testing::RunResult d = testing::RunProcess({Bin("kerncap-replay"), "validate", "--json",
                                         "--daemon=unix:" + tmp_ + "/ctl.sock",
                                         capture_id.substr(0, 10)},
                                        seconds(120));
    Keep("validate_daemon.json", d.out + d.err);
    EXPECT_EQ(d.exit_code, 0) << "validate --daemon: " << d.out << d.err;
  }
  if (c.bench) {
    testing::RunResult b = testing::RunProcess(
        {Bin("kerncap-replay"), "bench", kcap, "--json", "--warmup=3", "--iterations=20",
         "--cold-l2"},
        seconds(120));
    Keep("bench.json", b.out + b.err);
    ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
    auto bj = nlohmann::json::parse(b.out, nullptr, false);
    ASSERT_FALSE(bj.is_discarded());
    EXPECT_EQ(bj.value("iterations", 0), 20);
    EXPECT_GT(bj.value("median_ms", 0.0), 0.0);
    // The timed launches read the recreated texture objects too.
    EXPECT_EQ(static_cast<int>(bj.value("texture_objects", nlohmann::json::array()).size()),
              c.texture_objects)
        << b.out;
    std::printf("[ bench ] %s: median %.4f ms (min %.4f, max %.4f, stddev %.4f), restore_each=%s\n",
                c.name.c_str(), bj.value("median_ms", 0.0), bj.value("min_ms", 0.0),
                bj.value("max_ms", 0.0), bj.value("stddev_ms", 0.0),
                bj.value("restore_each", false) ? "yes" : "no");
  }
  if (c.repro) {
    const std::string dir = tmp_ + "/repro";
    testing::RunResult g =
        testing::RunProcess(Ctl({"repro", capture_id, "--out", dir}), seconds(120));
    Keep("repro.txt", g.out + g.err);
    ASSERT_EQ(g.exit_code, 0) << g.out << g.err;
    const std::string make = FindOnPath("make");
    if (make.empty()) {
      std::printf("[ note ] %s: no make on PATH; reproducer generated, not run\n", c.name.c_str());
      return;
    }
    auto run_make = [&](const std::string& target) {
      testing::RunResult r = testing::RunProcess(
          {make, "-C", dir, target, "KERNCAP_REPLAY=" + Bin("kerncap-replay")}, seconds(180));
      Keep("make_" + target + ".txt", r.out + r.err);
      return r;
    };
    testing::RunResult v = run_make("validate");
    EXPECT_EQ(v.exit_code, 0) << "make validate of the reproducer:\n" << v.out << v.err;
    testing::RunResult serve = run_make("serve");
    ASSERT_EQ(serve.exit_code, 0) << "make serve:\n" << serve.out << serve.err;
    testing::RunResult rv = run_make("validate");  // through the resident server
    EXPECT_EQ(rv.exit_code, 0) << "make validate with make serve running:\n" << rv.out << rv.err;
    run_make("serve-stop");
    std::printf("[ repro ] %s: make validate %s, resident validate %s\n", c.name.c_str(),
                v.exit_code == 0 ? "pass" : "FAIL", rv.exit_code == 0 ? "pass" : "FAIL");
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, GpuEndToEndTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Dispatches kerncap must not capture: the agent refuses them, the arm's
// status says why (kerncapctl arms), no capture appears, and the
// application runs on undisturbed.
struct RefusalCase {
  std::string name;
  std::string program;           // agent/cuda/gpu_tests/<program>
  std::string kernel;            // armed with --kernel=<kernel> --count=1
  std::string reason;            // must appear in the arm's skipped reason
};

std::ostream& operator<<(std::ostream& o, const RefusalCase& c) { return o << c.name; }

std::vector<RefusalCase> RefusalCases() {
  return {
      {"texture_over_cuda_array", "texture_refused", "tex_array_read", "reads a CUDA array"},
      {"surface_over_cuda_array", "texture_refused", "surf_array_write",
       "the surface object"},
      {"texture_handles_in_memory", "texture_refused", "tex_handles_in_memory",
       "passed through device memory are not supported"},
      {"texture_descriptor_past_its_allocation", "texture_refused", "tex_oversized",
       "not inside one live allocation"},
  };
}

class GpuRefusalTest : public GpuDaemonTest<RefusalCase> {};

TEST_P(GpuRefusalTest, RefusedWithTheReasonInTheArmsStatus) {
  const RefusalCase& c = GetParam();
  const std::string program = absl::StrCat(BuildDir(), "/gpu_tests/", c.program);
  ASSERT_TRUE(fs::exists(program)) << program;
  ASSERT_TRUE(StartDaemon()) << "kerncapd did not start: " << daemon_->Stderr();
  testing::RunResult armed = testing::RunProcess(
      Ctl({"--json", "arm", "--kernel=" + c.kernel, "--count=1"}), seconds(30));
  Keep("arm.json", armed.out + armed.err);
  ASSERT_EQ(armed.exit_code, 0) << armed.out << armed.err;
  const std::string arm_id = nlohmann::json::parse(armed.out, nullptr, false).value("arm_id", "");
  ASSERT_FALSE(arm_id.empty()) << armed.out;

  testing::RunResult app = testing::RunProcess({program}, seconds(180), AgentEnv());
  Keep("program.stdout", app.out);
  Keep("program.stderr", app.err);
  if (app.exit_code == 77) GTEST_SKIP() << c.program << ": " << app.out;
  ASSERT_FALSE(app.timed_out) << c.program << " hung under the agent";
  ASSERT_EQ(app.exit_code, 0) << c.program << " was disturbed by the agent\n" << app.out << app.err;

  nlohmann::json arm;
  testing::WaitFor(
      [&] {
        testing::RunResult r = testing::RunProcess(Ctl({"--json", "arms", "--all"}), seconds(20));
        auto j = nlohmann::json::parse(r.out, nullptr, false);
        if (j.is_discarded() || !j.contains("arms")) return false;
        for (const nlohmann::json& a : j["arms"]) {
          if (a.value("arm_id", "") == arm_id && a.contains("skipped") && !a["skipped"].empty()) {
            arm = a;
            Keep("arms.json", r.out);
            return true;
          }
        }
        return false;
      },
      seconds(30));
  ASSERT_FALSE(arm.is_null()) << "the arm shows no refused dispatch; program stderr:\n" << app.err;
  const nlohmann::json& skip = arm["skipped"][0];
  const std::string reason = skip.value("reason", "");
  EXPECT_NE(reason.find("texture/surface objects: "), std::string::npos) << reason;
  EXPECT_NE(reason.find(c.reason), std::string::npos) << reason;
  EXPECT_NE(skip.value("kernel", "").find(c.kernel), std::string::npos) << skip;
  EXPECT_FALSE(skip.value("retried", true));
  EXPECT_EQ(arm.value("captured", -1), 0) << arm;

  // Where a user looks: `kerncapctl arms` prints the reason, and no capture
  // was stored.
  testing::RunResult text = testing::RunProcess(Ctl({"arms", "--all"}), seconds(20));
  Keep("arms.txt", text.out + text.err);
  EXPECT_NE(text.out.find("not captured: texture/surface objects: "), std::string::npos) << text.out;
  testing::RunResult caps = testing::RunProcess(Ctl({"--json", "captures"}), seconds(20));
  auto cj = nlohmann::json::parse(caps.out, nullptr, false);
  EXPECT_TRUE(!cj.is_discarded() && (!cj.contains("captures") || cj["captures"].empty()))
      << caps.out;
  std::printf("[ refused ] %s: %s\n", c.name.c_str(), reason.c_str());
}

INSTANTIATE_TEST_SUITE_P(Programs, GpuRefusalTest, ::testing::ValuesIn(RefusalCases()),
                         [](const ::testing::TestParamInfo<RefusalCase>& i) {
                           return i.param.name;
                         });

}  // namespace
}  // namespace kerncap
