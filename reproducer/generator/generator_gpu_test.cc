// GPU test of a reproducer project (gpu label): a CUDA kernel compiled here
// with nvcc -lineinfo, a capture of one dispatch of it (inputs, and the
// golden outputs the kernel computes), the project generated from it, then
// `make recompile validate` with the real kerncap-replay: the recompiled
// cubin is what runs (--code-object), it validates; a kernel edited in the
// file kerncap.json names (kernel.cu, the minimal unit, when it verified)
// recompiles and then fails validation. Skips without nvcc, make,
// kerncap-replay or a GPU.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "reproducer/generator/generator.h"
#include "reproducer/generator/path_util.h"
#include "reproducer/generator/tool_runner.h"
#include "reproducer/replay/core/replay_test_util.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kOutVa = 0x7f2a00000000;
constexpr uint64_t kInVa = 0x7f2a00200000;
constexpr int kN = 1024;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ReproGpuTest, RecompiledKernelIsReplayedAndValidated) {
  const std::string nvcc = FindTool("nvcc", {"/usr/local/cuda/bin"});
  const std::string make = FindTool("make");
  const char* build = std::getenv("KERNCAP_BUILD_DIR");
  const std::string replay = build == nullptr ? "" : std::string(build) + "/bin/kerncap-replay";
  if (nvcc.empty() || make.empty() || !FileExists(replay)) {
    GTEST_SKIP() << "needs nvcc, make and kerncap-replay";
  }
  std::string t = (fs::temp_directory_path() / "kc-repro-gpu-XXXXXX").string();
  const std::string tmp = ::mkdtemp(t.data());
  const std::string app = tmp + "/app";
  Write(app + "/include/op.cuh",
        "#pragma once\n__device__ inline float op(float x, float s) { return x * s + 1.0f; }\n");
  Write(app + "/src/k.cu",
        "#include \"op.cuh\"\n"
        "extern \"C\" __global__ void scale(float* out, const float* in, float s, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) out[i] = op(in[i], s);\n}\n");
  nlohmann::json db = nlohmann::json::array(
      {{{"directory", app},
        {"file", "src/k.cu"},
        {"arguments", {nvcc, "-O3", "-lineinfo", "-Iinclude", "-c", "src/k.cu"}}}});
  Write(app + "/compile_commands.json", db.dump());
  auto c = RunTool({nvcc, "-cubin", "-arch=sm_90", "-O3", "-lineinfo", "-Iinclude", "-o",
                    tmp + "/k.cubin", "src/k.cu"},
                   app);
  ASSERT_TRUE(c.ok() && c->exit_code == 0) << (c.ok() ? c->err : c.status().ToString());
  const std::string cubin = Read(tmp + "/k.cubin");

  // The capture: in[i] = i/2, out zero before; out[i] = in[i]*2 + 1 after.
  replay::testing::KcapBuilder b(64 << 10);
  std::string in(kN * 4, '\0'), out_pre(kN * 4, '\0'), out_post(kN * 4, '\0');
  for (int i = 0; i < kN; ++i) {
    float x = static_cast<float>(i) * 0.5f, y = x * 2.0f + 1.0f;
    std::memcpy(in.data() + i * 4, &x, 4);
    std::memcpy(out_post.data() + i * 4, &y, 4);
  }
  v1::CaptureManifest m;
  m.set_capture_id("cap-reprogpu0001");
  m.set_post_complete(true);
  m.mutable_kernel()->set_mangled_name("scale");
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  m.mutable_kernel()->set_arch("sm_90");
  v1::Region* o = m.mutable_pre()->add_regions();
  o->set_va(kOutVa);
  o->set_kind(v1::REGION_DEVICE);
  *o->mutable_data() = b.Add(out_pre);
  v1::Region* i = m.mutable_pre()->add_regions();
  i->set_va(kInVa);
  i->set_kind(v1::REGION_DEVICE);
  *i->mutable_data() = b.Add(in);
  *m.mutable_post()->add_regions() = b.Diff(*o, out_pre, out_post);
  *m.mutable_post()->add_regions() = b.Diff(*i, in, in);
  v1::CodeObject* co = m.add_code_objects();
  co->set_format(v1::CODE_OBJECT_CUBIN);
  co->set_digest(Sha256(cubin).ToBytes());
  *co->mutable_data() = b.Add(cubin);
  m.mutable_kernel()->set_code_object_digest(co->digest());
  m.mutable_launch()->add_grid(kN / 256);
  m.mutable_launch()->add_block(256);
  std::string blob(24, '\0');
  float s = 2.0f;
  int n = kN;
  std::memcpy(blob.data(), &kOutVa, 8);
  std::memcpy(blob.data() + 8, &kInVa, 8);
  std::memcpy(blob.data() + 16, &s, 4);
  std::memcpy(blob.data() + 20, &n, 4);
  m.set_argument_blob(blob);
  for (uint32_t off : {0u, 8u, 16u, 20u}) {
    v1::Argument* a = m.add_arguments();
    a->set_offset(off);
    a->set_size(off < 16 ? 8 : 4);
  }
  ASSERT_TRUE(b.Write(tmp + "/capture.kcap", m).ok());

  GenerateOptions g;
  g.out_dir = tmp + "/proj";
  g.tools.nvcc = nvcc;
  auto r = GenerateProjectFromKcap(tmp + "/capture.kcap", g);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->project["source"]["outcome"], "found");
  auto run_make = [&](const std::vector<std::string>& targets) {
    std::vector<std::string> argv = {make, "-C", g.out_dir, "NVCC=" + nvcc,
                                     "KERNCAP_REPLAY=" + replay};
    argv.insert(argv.end(), targets.begin(), targets.end());
    auto res = RunTool(argv, "", 600);
    EXPECT_TRUE(res.ok());
    return res.ok() ? *res : ToolResult{};
  };
  // The captured cubin first: no GPU is a skip (exit 77 from kerncap-replay).
  ToolResult v = run_make({"validate"});
  if (absl::StrContains(v.err, "Error 77")) {
    fs::remove_all(tmp);
    GTEST_SKIP() << "no GPU: " << v.err;
  }
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_FALSE(absl::StrContains(v.out, "--code-object")) << v.out;

  ToolResult rc = run_make({"recompile", "validate"});
  EXPECT_EQ(rc.exit_code, 0) << rc.out << rc.err;
  EXPECT_TRUE(absl::StrContains(rc.out, "--code-object=build/kernel.cubin")) << rc.out;
  EXPECT_TRUE(absl::StrContains(rc.out, "PASS") || absl::StrContains(rc.out, "pass")) << rc.out;

  // The rebuilt, correct variant benches cleanly against the captured binary.
  ToolResult good_bench = run_make({"bench", "BENCH_FLAGS=--iterations=5 --warmup=1"});
  EXPECT_EQ(good_bench.exit_code, 0) << good_bench.out << good_bench.err;
  EXPECT_TRUE(absl::StrContains(good_bench.out, "speedup ")) << good_bench.out;

  // An edit of the file kerncap.json names is what runs: wrong results now.
  // That file is the minimal unit kernel.cu when it verified at generation
  // (minimal_unit.h), else the unit's header under src/.
  const std::string edit_file = r->project["edit"].value("file", "");
  ASSERT_FALSE(edit_file.empty()) << r->project.dump(2);
  // Which compiler make recompile ran (kerncap-nvrtc when it built the same
  // kernel as nvcc at generation), for the log.
  std::cout << "edit.compiler: " << r->project["edit"].value("compiler", nlohmann::json()).dump()
            << "\n";
  const std::string edited_path =
      edit_file == "kernel.cu" ? g.out_dir + "/kernel.cu" : g.out_dir + "/src/include/op.cuh";
  std::string text = ReadAll(edited_path);
  const size_t at = text.find("x * s + 1.0f");
  ASSERT_NE(at, std::string::npos) << edited_path << ":\n" << text;
  text.replace(at, 12, "x * s + 2.0f");
  Write(edited_path, text);
  fs::last_write_time(edited_path, fs::file_time_type::clock::now() + std::chrono::seconds(5));
  ToolResult bad = run_make({"recompile", "validate"});
  EXPECT_NE(bad.exit_code, 0) << bad.out << bad.err;
  EXPECT_TRUE(absl::StrContains(bad.out, "FAIL") || absl::StrContains(bad.out, "fail")) << bad.out;
  // Benching the wrong variant still times both binaries, but says that the
  // variant's times are of a wrong result and fails (never a clean timing of
  // something that does not validate).
  ToolResult bench = run_make({"bench", "BENCH_FLAGS=--iterations=5 --warmup=1"});
  EXPECT_NE(bench.exit_code, 0) << bench.out << bench.err;
  EXPECT_TRUE(absl::StrContains(bench.out, "variant before timing: FAIL")) << bench.out;
  EXPECT_TRUE(absl::StrContains(bench.out, "original before timing: PASS")) << bench.out;
  // A rebuilt code object: benched against the captured binary in the same run.
  EXPECT_TRUE(absl::StrContains(bench.out, "--compare-original")) << bench.out;
  EXPECT_TRUE(absl::StrContains(bench.out, "interleaved ABBA")) << bench.out;
  EXPECT_TRUE(absl::StrContains(bench.out, "speedup ")) << bench.out;
  std::cout << v.out << rc.out << bad.out << bench.out;
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace kerncap::repro
