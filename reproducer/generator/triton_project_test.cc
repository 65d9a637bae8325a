// Triton reproducer projects (triton_project.h) on CPU: a synthetic capture
// of an autotuned Triton matmul with the Triton shim's metadata (as the shim
// records it with Triton 3.6: specialised strides, two variants, the chosen
// one's binary being the captured code object), generated into a project.
// Checks the project's files, kerncap.json's triton section, the kernel.py
// slice of a real module file (and the fallbacks to the recorded source),
// and `python3 run.py --dry-run --json`: the call rebuilt from the captured
// argument bytes. Needs python3 for the slicing and run.py parts (skipped,
// saying so, without it). Launching needs a GPU: python_shim/tests/gpu.
#include "reproducer/generator/triton_project.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/digest.h"
#include "gtest/gtest.h"
#include "reproducer/generator/generator.h"
#include "reproducer/generator/line_table.h"
#include "reproducer/generator/tool_runner.h"
#include "reproducer/generator/toolkit_notes_fixture.h"
#include "reproducer/replay/core/replay_test_util.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

struct TempDir {
  TempDir() {
    std::string t = (fs::temp_directory_path() / "kerncap-triton-test-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() {
    if (std::getenv("KERNCAP_TEST_KEEP") != nullptr) {  // for looking at what was generated
      std::fprintf(stderr, "kept %s\n", path.c_str());
      return;
    }
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

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

// The kernel as Triton's JITFunction.src holds it (from "def").
constexpr char kKernelDef[] =
    R"(def kc_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                     stride_cm, stride_cn, alpha, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0) % (GROUP_M * 1024)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BLOCK_K) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    acc = _scale(acc, alpha)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
)";

// The application's module: the kernel among things a reproducer must not
// take (the __main__ block, an import only the application has, an unused
// helper, the autotuner's configs).
std::string ModuleText(const std::string& kernel_def = kKernelDef) {
  return absl::StrCat(R"("""The application's matmul (kerncap test fixture)."""
import os
import sys

import gpu_case as gc
import triton
import triton.language as tl

torch = gc.require_gpu()
GROUP_M = 8
UNUSED_CONSTANT = os.getpid()

CONFIGS = [
    triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=8, num_stages=4),
]


@triton.jit
def _scale(x, alpha):
    return x * alpha


@triton.jit
def _unused_helper(x):
    return x + 1


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
)",
                      kernel_def, R"(

def main():
    a = torch.randn((1024, 512), device="cuda", dtype=torch.float16)
    print(a)


if __name__ == "__main__":
    main()
    sys.exit(0)
)");
}

constexpr uint64_t kA = 0x7f0000000000, kB = 0x7f0000100000, kC = 0x7f0000200000;
// An ELF whose only content is the toolkit note ptxas 13.0 writes: the
// project must say which ptxas built the captured binary.
const std::string kCode = testing::Elf(
    {{".note.nv.tkinfo", testing::Note("NVIDIA Corp", 0x7d0, testing::TkInfo(testing::kPtxas13))}});
const std::string kOtherCode = "\x7f" "ELF fake cubin of kc_matmul_kernel (BLOCK_M=64)";

ordered_json Variant(const std::string& code, int block_m, int warps, int stages, int index) {
  ordered_json sig = ordered_json::object();
  for (const char* p : {"a_ptr", "b_ptr", "c_ptr"}) sig[p] = "*fp16";
  for (const char* p : {"M", "N", "K", "stride_am"}) sig[p] = "i32";
  sig["stride_ak"] = "constexpr";  // == 1: specialised into a constant
  sig["stride_bk"] = "i32";
  sig["stride_bn"] = "constexpr";
  sig["stride_cm"] = "i32";
  sig["stride_cn"] = "constexpr";
  sig["alpha"] = "fp32";
  for (const char* p : {"BLOCK_M", "BLOCK_N", "BLOCK_K"}) sig[p] = "constexpr";
  ordered_json consts = {{"stride_ak", 1}, {"stride_bn", 1},      {"stride_cn", 1},
                         {"BLOCK_M", block_m}, {"BLOCK_N", 64}, {"BLOCK_K", 32}};
  ordered_json spec = ordered_json::object();
  for (const char* p : {"a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk",
                        "stride_cm"}) {
    spec[p] = ordered_json::array({ordered_json::array({"tt.divisibility", 16})});
  }
  const std::string sha = Sha256(code).ToHex();
  ordered_json config = {{"kwargs", {{"BLOCK_M", block_m}, {"BLOCK_N", 64}, {"BLOCK_K", 32}}},
                         {"num_warps", warps},
                         {"num_stages", stages},
                         {"num_ctas", 1}};
  return {
      {"name", "kc_matmul_kernel"},
      {"binary", {{"format", "cubin"}, {"sha256", sha}, {"size", code.size()}}},
      {"triton_hash", "6bb0487b54f40c16541b05285ba84c9558b003732751da8d0a84f7b0ffe766f3"},
      {"target", {{"backend", "cuda"}, {"arch", 90}, {"warp_size", 32}, {"name", "sm_90"}}},
      {"num_warps", warps},
      {"num_ctas", 1},
      {"num_stages", stages},
      {"warp_size", 32},
      {"maxnreg", nullptr},
      {"shared", 49152},
      {"signature", sig},
      {"constexprs", consts},
      {"specialization", spec},
      {"options",
       {{"ptx_version", nullptr}, {"enable_fp_fusion", true}, {"enable_reflect_ftz", true},
        {"launch_cooperative_grid", false}, {"launch_pdl", false},
        {"default_dot_input_precision", "tf32"}, {"max_num_imprecise_acc_default", 1073741824},
        {"debug", false}, {"backend_name", "cuda"}, {"sanitize_overflow", true},
        {"arch", "sm90"}, {"instrumentation_mode", ""}, {"tmem_size", 0},
        {"global_scratch_size", 0}, {"global_scratch_align", 1}, {"profile_scratch_size", 0},
        {"profile_scratch_align", 1}}},
      {"triton_version", "3.6.0"},
      {"via", "compilation_listener"},
      {"cache_hit", false},
      {"compiled_during", "autotune benchmark"},
      {"config", config},
      {"function", "kc_matmul_kernel:24b7aa5a998fd722"},
      {"id", sha},
      {"config_index", index},
  };
}

ordered_json Document(const std::string& module_file, const std::string& recorded_def) {
  ordered_json params = ordered_json::array();
  for (const char* p : {"a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak",
                        "stride_bk", "stride_bn", "stride_cm", "stride_cn", "alpha"}) {
    params.push_back({{"name", p}, {"constexpr", false}});
  }
  for (const char* p : {"BLOCK_M", "BLOCK_N", "BLOCK_K"}) {
    params.push_back({{"name", p}, {"constexpr", true}, {"annotation", "constexpr"}});
  }
  ordered_json v0 = Variant(kOtherCode, 64, 4, 3, 0);
  ordered_json v1 = Variant(kCode, 128, 8, 4, 1);
  ordered_json configs = ordered_json::array({v0["config"], v1["config"]});
  ordered_json doc = {
      {"schema", "kerncap.triton-jit/1"},
      {"kernel_name", "kc_matmul_kernel"},
      {"producer", {{"shim", "0.1.0"}, {"python", "3.11.7"}, {"pid", 25537}, {"triton", "3.6.0"}}},
      // Not the captured binary: the digest match must win over `current`.
      {"current", v0["id"]},
      {"variants", ordered_json::array({v0, v1})},
      {"functions",
       {{"kc_matmul_kernel:24b7aa5a998fd722",
         {{"name", "kc_matmul_kernel"},
          {"qualname", "kc_matmul_kernel"},
          {"module", "kc_app_matmul"},
          {"file", module_file},
          {"first_line", 29},
          {"starting_line", 31},
          {"source_sha256", Sha256(recorded_def).ToHex()},
          {"source_bytes", recorded_def.size()},
          {"source", recorded_def},
          {"source_truncated", false},
          {"params", params}}}}},
      {"autotune",
       {{"kind", "triton.Autotuner"},
        {"function", "kc_matmul_kernel:24b7aa5a998fd722"},
        {"key_args", {"M", "N", "K"}},
        {"configs", configs},
        {"chosen", v1["config"]},
        {"chosen_index", 1},
        {"chosen_for_key", {1024, 768, 512}},
        {"chosen_variant", v1["id"]}}},
  };
  return doc;
}

// The captured launch: 13 Python-level parameters of which 3 strides were
// specialised to constexpr 1, so 10 kernel parameters, plus Triton's two
// scratch pointers.
struct Fixture {
  std::string module_file;
  std::string recorded_def = kKernelDef;
  std::string code = kCode;
  int drop_args = 0;  // leave out the last N kernel parameters
  bool with_metadata = true;
  uint32_t block_x = 256;
};

std::string MakeKcap(const std::string& dir, const Fixture& f) {
  replay::testing::KcapBuilder b(1 << 16);
  v1::CaptureManifest m;
  m.set_format_version(1);
  m.set_capture_id("cap-7f3a00112233");
  m.set_created_unix_ms(1767225600000);
  m.set_source(v1::SOURCE_AGENT);
  m.mutable_process()->set_pid(25537);
  m.mutable_process()->set_hostname("gpu-node");
  m.mutable_kernel()->set_mangled_name("kc_matmul_kernel");
  m.mutable_kernel()->set_demangled_name("kc_matmul_kernel");
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  m.mutable_kernel()->set_arch("sm_90");
  m.mutable_device()->set_arch("sm_90");
  m.mutable_device()->set_ordinal(0);
  for (uint32_t v : {8u, 12u, 1u}) m.mutable_launch()->add_grid(v);
  for (uint32_t v : {f.block_x, 1u, 1u}) m.mutable_launch()->add_block(v);
  v1::CodeObject* co = m.add_code_objects();
  co->set_digest(Sha256(f.code).ToBytes());
  co->set_format(v1::CODE_OBJECT_CUBIN);
  *co->mutable_data() = b.Add(f.code);
  m.mutable_kernel()->set_code_object_digest(co->digest());
  for (uint64_t va : {kA, kB, kC}) {
    v1::Region* r = m.mutable_pre()->add_regions();
    r->set_va(va);
    r->set_kind(v1::REGION_DEVICE);
    *r->mutable_data() = b.Add(std::string(4096, '\x01'));
  }
  std::string blob(72, '\0');
  auto put = [&blob](size_t off, const void* p, size_t n) { std::memcpy(blob.data() + off, p, n); };
  put(0, &kA, 8);
  put(8, &kB, 8);
  put(16, &kC, 8);
  const int32_t ints[6] = {1024, 768, 512, 512, 768, 768};  // M N K stride_am stride_bk stride_cm
  for (int i = 0; i < 6; ++i) put(24 + 4 * i, &ints[i], 4);
  const float alpha = -1.25f;
  put(48, &alpha, 4);
  struct A {
    uint32_t off, size;
    v1::ArgumentKind kind;
  };
  std::vector<A> args = {{0, 8, v1::ARG_POINTER},   {8, 8, v1::ARG_POINTER},
                         {16, 8, v1::ARG_POINTER},  {24, 4, v1::ARG_BY_VALUE},
                         {28, 4, v1::ARG_BY_VALUE}, {32, 4, v1::ARG_BY_VALUE},
                         {36, 4, v1::ARG_BY_VALUE}, {40, 4, v1::ARG_BY_VALUE},
                         {44, 4, v1::ARG_BY_VALUE}, {48, 4, v1::ARG_BY_VALUE},
                         {56, 8, v1::ARG_POINTER},  {64, 8, v1::ARG_POINTER}};
  args.resize(args.size() - f.drop_args);
  m.set_argument_blob(blob);
  for (const A& a : args) {
    v1::Argument* arg = m.add_arguments();
    arg->set_offset(a.off);
    arg->set_size(a.size);
    arg->set_kind(a.kind);
  }
  if (f.with_metadata) {
    m.mutable_kernel()->set_jit_metadata_json(Document(f.module_file, f.recorded_def).dump());
  }
  fs::create_directories(dir);
  std::string path = dir + "/capture.kcap";
  absl::Status st = b.Write(path, m);
  EXPECT_TRUE(st.ok()) << st;
  return path;
}

std::string Python3() { return FindTool("python3"); }

// No absolute path in a generated text file (its shebang aside).
void ExpectNoAbsolutePaths(const std::string& name, const std::string& text,
                           const std::string& tmp) {
  EXPECT_FALSE(absl::StrContains(text, tmp)) << name << " names the generation folder";
  static const std::regex kAbs(R"((^|[\s='"(])/(usr|home|tmp|root|work|opt|var)\b)");
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (n++ == 0 && absl::StartsWith(line, "#!")) continue;
    std::string l(line);
    EXPECT_FALSE(std::regex_search(l, kAbs)) << name << ": absolute path in line: " << l;
  }
}

class TritonProjectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fixture_.module_file = tmp_.path + "/app/kc_app_matmul.py";
    Write(fixture_.module_file, ModuleText());
  }
  absl::StatusOr<GenerateResult> Generate(const std::string& out, ProjectKind kind =
                                                                      ProjectKind::kAuto) {
    GenerateOptions o;
    o.out_dir = out;
    o.kind = kind;
    return GenerateProjectFromKcap(MakeKcap(tmp_.path, fixture_), o);
  }
  // python3 run.py ARGS in `dir`.
  ToolResult RunPy(const std::string& dir, std::vector<std::string> args) {
    std::vector<std::string> argv = {Python3(), "run.py"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunTool(argv, dir, 120);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ToolResult{};
  }

  TempDir tmp_;
  Fixture fixture_;
};

TEST_F(TritonProjectTest, ProjectFilesAndTritonSection) {
  if (Python3().empty()) GTEST_SKIP() << "python3 not found: the module slice cannot be tested";
  const std::string out = tmp_.path + "/out/matmul";
  auto r = Generate(out);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const char* f : {"kerncap.json", "capture.kcap", "code/kernel.cubin", "kernel.py", "run.py",
                        "kerncap_replay.py", "Makefile", "README.md"}) {
    EXPECT_TRUE(fs::exists(out + "/" + f)) << f;
  }
  EXPECT_FALSE(fs::exists(out + "/src"));
  EXPECT_EQ(Read(out + "/code/kernel.cubin"), kCode);
  EXPECT_TRUE((fs::status(out + "/run.py").permissions() & fs::perms::owner_exec) !=
              fs::perms::none);

  json p = json::parse(Read(out + "/kerncap.json"));
  EXPECT_EQ(p, r->project);
  EXPECT_EQ(p["kind"], "triton");
  EXPECT_EQ(p["kernel"]["platform"], "cuda");
  const json& t = p["triton"];
  EXPECT_EQ(t["schema"], "kerncap.triton-jit/1");
  EXPECT_EQ(t["kernel_name"], "kc_matmul_kernel");
  // The captured code object is variant 1 (not `current`, which is 0).
  EXPECT_EQ(t["variant"]["selected_by"], "code_object_digest");
  EXPECT_EQ(t["variant"]["id"], Sha256(kCode).ToHex());
  EXPECT_EQ(t["variant"]["config_index"], 1);
  EXPECT_EQ(t["captured_binary"]["sha256"], Sha256(kCode).ToHex());
  EXPECT_EQ(t["captured_binary"]["format"], "cubin");
  if (HaveDwarfReader()) {  // the notes are read with LLVM's object library
    EXPECT_EQ(t["captured_binary"]["ptxas"]["release"], "13.0");
    EXPECT_EQ(t["captured_binary"]["ptxas"]["version_line"],
              "Cuda compilation tools, release 13.0, V13.0.88");
  }
  EXPECT_EQ(t["constexprs"]["BLOCK_M"], 128);
  EXPECT_EQ(t["signature"]["a_ptr"], "*fp16");
  EXPECT_EQ(t["launch_options"], json({{"num_warps", 8}, {"num_stages", 4}, {"num_ctas", 1}}));
  EXPECT_EQ(t["compile_options"]["enable_fp_fusion"], true);
  EXPECT_EQ(t["compile_options"]["sanitize_overflow"], true);
  EXPECT_EQ(t["compile_options"]["default_dot_input_precision"], "tf32");
  for (const char* derived : {"arch", "backend_name", "global_scratch_size", "ptx_version",
                              "instrumentation_mode"}) {
    EXPECT_FALSE(t["compile_options"].contains(derived)) << derived;
  }
  EXPECT_EQ(t["autotune"]["chosen_index"], 1);
  EXPECT_EQ(t["autotune"]["configs"].size(), 2u);
  EXPECT_EQ(t["config"]["kwargs"]["BLOCK_M"], 128);
  EXPECT_EQ(t["grid"], json({8, 12, 1}));
  EXPECT_EQ(t["binding"]["embedded"], true);

  // The parameter mapping: 16 Python parameters onto 10 of 12 kernel ones.
  const json& ps = t["parameters"];
  ASSERT_EQ(ps.size(), 16u);
  auto param = [&ps](const std::string& n) {
    for (const json& x : ps) {
      if (x["name"] == n) return x;
    }
    ADD_FAILURE() << "no parameter " << n;
    return json();
  };
  EXPECT_EQ(ps[0]["name"], "a_ptr");
  EXPECT_EQ(param("a_ptr")["kind"], "pointer");
  EXPECT_EQ(param("a_ptr")["kernel_args"], json({0}));
  EXPECT_EQ(param("c_ptr")["kernel_args"], json({2}));
  EXPECT_EQ(param("M")["kind"], "scalar");
  EXPECT_EQ(param("M")["kernel_args"], json({3}));
  EXPECT_EQ(param("stride_ak")["kind"], "constexpr");
  EXPECT_EQ(param("stride_ak")["constexpr_declared"], false);
  EXPECT_EQ(param("stride_ak")["value"], 1);
  EXPECT_EQ(param("stride_bk")["kernel_args"], json({7}));
  EXPECT_EQ(param("alpha")["kernel_args"], json({9}));
  EXPECT_EQ(param("alpha")["type"], "fp32");
  EXPECT_EQ(param("BLOCK_M")["constexpr_declared"], true);
  EXPECT_EQ(param("BLOCK_M")["value"], 128);
  EXPECT_EQ(t["kernel_params"]["captured"], 12);
  EXPECT_EQ(t["kernel_params"]["used"], 10);
  EXPECT_EQ(t["kernel_params"]["trailing_extra"], 2);

  // kernel.py: the kernel with @triton.jit only, its helper and constant,
  // nothing of the application's own.
  const json& ks = t["kernel_source"];
  EXPECT_EQ(ks["origin"], "module");
  EXPECT_EQ(ks["file"], "kernel.py");
  EXPECT_EQ(ks["module_matches_capture"], true);
  EXPECT_EQ(ks["module_file"], fixture_.module_file);
  const std::string k = Read(out + "/kernel.py");
  EXPECT_TRUE(absl::StrContains(k, absl::StrCat("@triton.jit\n", kKernelDef))) << k;
  EXPECT_TRUE(absl::StrContains(k, "@triton.jit\ndef _scale(x, alpha):\n    return x * alpha\n"))
      << k;
  EXPECT_TRUE(absl::StrContains(k, "\nGROUP_M = 8\n")) << k;
  EXPECT_TRUE(absl::StrContains(k, "\nimport triton\n")) << k;
  EXPECT_TRUE(absl::StrContains(k, "\nimport triton.language as tl\n")) << k;
  for (const char* absent : {"_unused_helper", "__main__", "def main", "UNUSED_CONSTANT",
                             "CONFIGS = [", "torch = gc"}) {
    EXPECT_FALSE(absl::StrContains(k, absent)) << absent << " in\n" << k;
  }
  // The removed decorator and dropped imports appear only as comments.
  for (absl::string_view line : absl::StrSplit(k, '\n')) {
    if (absl::StartsWith(line, "#")) continue;
    EXPECT_FALSE(absl::StrContains(line, "autotune")) << line;
    EXPECT_FALSE(absl::StrContains(line, "gpu_case")) << line;
    EXPECT_FALSE(absl::StartsWith(line, "import os")) << line;
  }
  EXPECT_TRUE(absl::StrContains(k, "#   @triton.autotune(configs=CONFIGS, key=[\"M\", \"N\", \"K\"])"))
      << k;
  EXPECT_TRUE(absl::StrContains(k, "#   import gpu_case as gc")) << k;
  // It is valid Python (compiled, not run: triton is not needed).
  ToolResult c = *RunTool({Python3(), "-c", "import sys; compile(open(sys.argv[1]).read(), 'k', 'exec')",
                           out + "/kernel.py"});
  EXPECT_EQ(c.exit_code, 0) << c.err;

  // Relative, self-contained files.
  for (const char* f : {"kernel.py", "run.py", "Makefile", "README.md"}) {
    ExpectNoAbsolutePaths(f, Read(out + "/" + f), tmp_.path);
  }
  EXPECT_EQ(Read(out + "/kerncap_replay.py"),
            Read(std::string(KERNCAP_SOURCE_DIR) + "/reproducer/replay/capi/kerncap_replay.py"));
  const std::string mk = Read(out + "/Makefile");
  for (const char* target : {"\nrun:", "\nvalidate:", "\nbench:", "\nhelp:", "\nclean:",
                             "PYTHON ?= python3"}) {
    EXPECT_TRUE(absl::StrContains(mk, target)) << target;
  }
  // Roles in the file list.
  std::map<std::string, std::string> roles;
  for (const json& f : p["files"]) roles[f["path"]] = f["role"];
  EXPECT_EQ(roles["kernel.py"], "source");
  EXPECT_EQ(roles["run.py"], "script");
  EXPECT_EQ(roles["kerncap_replay.py"], "binding");
  EXPECT_EQ(roles["Makefile"], "build");
  const std::string summary = SummarizeProject(*r);
  EXPECT_TRUE(absl::StrContains(summary, "python3 run.py")) << summary;
  EXPECT_TRUE(absl::StrContains(summary, "KERNCAP_REPLAY_LIB")) << summary;
}

TEST_F(TritonProjectTest, DryRunDecodesTheCapturedArguments) {
  if (Python3().empty()) GTEST_SKIP() << "python3 not found: run.py cannot be run";
  const std::string built = tmp_.path + "/out/matmul";
  ASSERT_TRUE(Generate(built).ok());
  // The project works from anywhere (relative paths only).
  const std::string out = tmp_.path + "/moved/matmul";
  fs::create_directories(tmp_.path + "/moved");
  fs::rename(built, out);
  ToolResult r = RunPy(out, {"--dry-run", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json plan = json::parse(r.out)["plan"];
  EXPECT_EQ(plan["function"], "kc_matmul_kernel");
  const json& a = plan["args"];
  EXPECT_EQ(a["a_ptr"], "0x7f0000000000");
  EXPECT_EQ(a["b_ptr"], "0x7f0000100000");
  EXPECT_EQ(a["c_ptr"], "0x7f0000200000");
  EXPECT_EQ(a["M"], 1024);
  EXPECT_EQ(a["N"], 768);
  EXPECT_EQ(a["K"], 512);
  EXPECT_EQ(a["stride_am"], 512);
  EXPECT_EQ(a["stride_bk"], 768);
  EXPECT_EQ(a["stride_cm"], 768);
  EXPECT_EQ(a["alpha"], -1.25);
  EXPECT_EQ(a["stride_ak"], 1);  // specialised constant, passed as captured
  EXPECT_EQ(a.size(), 13u);
  EXPECT_EQ(plan["arg_kinds"]["alpha"], "scalar");
  EXPECT_EQ(plan["arg_kinds"]["stride_cn"], "constexpr");
  EXPECT_EQ(plan["constexprs"], json({{"BLOCK_M", 128}, {"BLOCK_N", 64}, {"BLOCK_K", 32}}));
  EXPECT_EQ(plan["options"], json({{"num_warps", 8}, {"num_stages", 4}, {"num_ctas", 1}}));
  EXPECT_EQ(plan["compile_options"]["enable_fp_fusion"], true);
  EXPECT_EQ(plan["grid"], json({8, 12, 1}));
  EXPECT_EQ(plan["grid_origin"], "captured");
  EXPECT_TRUE(plan["notes"].empty()) << plan["notes"];

  // Another configuration: constexprs and options overridden, the grid
  // kept (with a note saying so), or given.
  r = RunPy(out, {"--dry-run", "--json", "--config", R"({"BLOCK_M": 64, "num_warps": 4})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  plan = json::parse(r.out)["plan"];
  EXPECT_EQ(plan["constexprs"]["BLOCK_M"], 64);
  EXPECT_EQ(plan["options"]["num_warps"], 4);
  EXPECT_EQ(plan["options"]["num_stages"], 4);
  EXPECT_EQ(plan["grid"], json({8, 12, 1}));
  ASSERT_EQ(plan["notes"].size(), 1u);
  EXPECT_TRUE(absl::StrContains(plan["notes"][0].get<std::string>(), "BLOCK_M")) << plan["notes"];
  r = RunPy(out, {"--dry-run", "--json", "--config", R"({"BLOCK_M": 64})", "--grid", "16,12"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  plan = json::parse(r.out)["plan"];
  EXPECT_EQ(plan["grid"], json({16, 12, 1}));
  EXPECT_EQ(plan["grid_origin"], "--grid");
  EXPECT_TRUE(plan["notes"].empty()) << plan["notes"];
  // One of the autotuner's recorded candidates.
  r = RunPy(out, {"--dry-run", "--json", "--candidate", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  plan = json::parse(r.out)["plan"];
  EXPECT_EQ(plan["constexprs"]["BLOCK_M"], 64);
  EXPECT_EQ(plan["options"]["num_warps"], 4);
  EXPECT_EQ(plan["options"]["num_stages"], 3);
  r = RunPy(out, {"--list-configs", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["chosen_index"], 1);
  // The text form names the call.
  r = RunPy(out, {"--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "kc_matmul_kernel[(8, 12, 1)](a_ptr=\"0x7f0000000000\""))
      << r.out;
  // What cannot be: a runtime argument as config, bad JSON, a bad grid.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--config", R"({"M": 5})"},
        std::vector<std::string>{"--config", "{BLOCK_M: 64}"},
        std::vector<std::string>{"--grid", "0,1"},
        std::vector<std::string>{"--candidate", "7"}}) {
    std::vector<std::string> argv = {"--dry-run"};
    argv.insert(argv.end(), bad.begin(), bad.end());
    r = RunPy(out, argv);
    EXPECT_EQ(r.exit_code, 2) << bad[1] << ": " << r.out << r.err;
    EXPECT_TRUE(absl::StartsWith(r.err, "run.py: ")) << r.err;
  }
}

TEST_F(TritonProjectTest, RunReexecutesWithoutAddressRandomisation) {
  if (Python3().empty()) GTEST_SKIP() << "python3 not found: run.py cannot be run";
  const std::string out = tmp_.path + "/out/matmul";
  ASSERT_TRUE(Generate(out).ok());
  // Whether this machine lets a process switch randomisation off (a
  // container's seccomp profile may refuse it; run.py then carries on).
  ToolResult probe = *RunTool({Python3(), "-c",
                               "import ctypes, sys; l = ctypes.CDLL(None); c = l.personality(0xffffffff);"
                               " sys.exit(0 if c != -1 and l.personality(c | 0x40000) != -1 else 1)"});
  const bool can = probe.exit_code == 0;
  // No replay library: run.py gets as far as restoring memory and stops there.
  setenv("KERNCAP_REPLAY_LIB", (tmp_.path + "/none/libkerncap_replay.so").c_str(), 1);
  ToolResult r = RunPy(out, {"--json"});
  ToolResult keep = RunPy(out, {"--json", "--keep-aslr"});
  unsetenv("KERNCAP_REPLAY_LIB");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // replay error (docs/EXIT_CODES.md)
  json j = json::parse(r.out);
  EXPECT_EQ(j["aslr"], can ? "off" : "on") << r.out;
  EXPECT_TRUE(absl::StrContains(j["error"].get<std::string>(), "replay")) << r.out;
  EXPECT_EQ(keep.exit_code, 1) << keep.out << keep.err;
  EXPECT_EQ(json::parse(keep.out)["aslr"], "on") << keep.out;
}

TEST_F(TritonProjectTest, WithoutTheModuleFileUsesTheRecordedSource) {
  fixture_.module_file = tmp_.path + "/gone/kc_app_matmul.py";
  const std::string out = tmp_.path + "/out/matmul";
  auto r = Generate(out);
  ASSERT_TRUE(r.ok()) << r.status();
  const json& ks = r->project["triton"]["kernel_source"];
  EXPECT_EQ(ks["origin"], "recorded_source");
  EXPECT_TRUE(absl::StrContains(ks["note"].get<std::string>(), "not readable")) << ks;
  const std::string k = Read(out + "/kernel.py");
  EXPECT_TRUE(absl::StrContains(k, absl::StrCat("import triton\nimport triton.language as tl\n\n\n"
                                                "@triton.jit\n",
                                                kKernelDef)))
      << k;
  EXPECT_FALSE(absl::StrContains(k, "autotune")) << k;
  EXPECT_FALSE(absl::StrContains(k, "gone")) << k;
  bool warned = false;
  for (const json& w : r->project["warnings"]) {
    warned |= absl::StrContains(w.get<std::string>(), "kernel.py");
  }
  EXPECT_TRUE(warned) << r->project["warnings"];
  ExpectNoAbsolutePaths("kernel.py", k, tmp_.path);
}

TEST_F(TritonProjectTest, WithoutPython3UsesTheRecordedSource) {
  GenerateOptions o;
  o.out_dir = tmp_.path + "/out/matmul";
  o.tools.python3 = tmp_.path + "/no/python3";
  auto r = GenerateProjectFromKcap(MakeKcap(tmp_.path, fixture_), o);
  ASSERT_TRUE(r.ok()) << r.status();
  const json& ks = r->project["triton"]["kernel_source"];
  EXPECT_EQ(ks["origin"], "recorded_source");
  EXPECT_TRUE(absl::StrContains(ks["note"].get<std::string>(), "python3")) << ks;
}

TEST_F(TritonProjectTest, RecordedSourceWithDecoratorsKeepsOnlyTheJit) {
  // Older Triton releases record the decorators with the source.
  fixture_.module_file = tmp_.path + "/gone/kc_app_matmul.py";
  fixture_.recorded_def = absl::StrCat(
      "@triton.autotune(\n    configs=CONFIGS,\n    key=[\"M\"],\n)\n@triton.jit\n", kKernelDef);
  const std::string out = tmp_.path + "/out/matmul";
  auto r = Generate(out);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string k = Read(out + "/kernel.py");
  EXPECT_TRUE(absl::StrContains(k, absl::StrCat("\n@triton.jit\n", kKernelDef))) << k;
  EXPECT_FALSE(absl::StrContains(k, "autotune")) << k;
  EXPECT_FALSE(absl::StrContains(k, "configs=")) << k;
}

TEST_F(TritonProjectTest, ChangedModuleKeepsTheCompiledKernel) {
  if (Python3().empty()) GTEST_SKIP() << "python3 not found";
  // The application was edited after the capture: the kernel that ran is
  // the recorded one; helpers still come from the file.
  std::string edited = kKernelDef;
  edited.replace(edited.find("acc = _scale(acc, alpha)"), 24, "acc = _scale(acc, alpha * 2)");
  Write(fixture_.module_file, ModuleText(edited));
  const std::string out = tmp_.path + "/out/matmul";
  auto r = Generate(out);
  ASSERT_TRUE(r.ok()) << r.status();
  const json& ks = r->project["triton"]["kernel_source"];
  EXPECT_EQ(ks["origin"], "module");
  EXPECT_EQ(ks["module_matches_capture"], false);
  EXPECT_TRUE(absl::StrContains(ks["note"].get<std::string>(), "recorded source")) << ks;
  const std::string k = Read(out + "/kernel.py");
  EXPECT_TRUE(absl::StrContains(k, absl::StrCat("@triton.jit\n", kKernelDef))) << k;
  EXPECT_FALSE(absl::StrContains(k, "alpha * 2")) << k;
  EXPECT_TRUE(absl::StrContains(k, "def _scale(")) << k;
}

// A captured binary no recorded variant has (the shim evicted it, or the
// kernel was compiled before the shim was active) is refused: `current` is a
// guess, and a project built on it would validate another binary.
TEST_F(TritonProjectTest, DigestMismatchIsRefusedNotGuessed) {
  fixture_.code = "\x7f" "ELF a binary no variant recorded";
  const std::string out = tmp_.path + "/out/matmul";
  auto r = Generate(out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  const std::string msg(r.status().message());
  EXPECT_TRUE(absl::StrContains(msg, "none of the 2 variant(s)")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, Sha256(fixture_.code).ToHex().substr(0, 16))) << msg;
  // It lists what was recorded and the autotuner's choice.
  EXPECT_TRUE(absl::StrContains(msg, "BLOCK_M=128 BLOCK_N=64 BLOCK_K=32 num_warps=8 num_stages=4"))
      << msg;
  EXPECT_TRUE(absl::StrContains(msg, "the autotuner chose BLOCK_M=128")) << msg;
  EXPECT_FALSE(fs::exists(out));
  // --native still gives the binary-only/native project of the capture.
  EXPECT_TRUE(Generate(tmp_.path + "/out/native", ProjectKind::kNative).ok());
}

// The variant of the captured binary must describe the captured launch:
// block = num_warps * warp_size.
TEST_F(TritonProjectTest, VariantWhoseNumWarpsIsNotTheCapturedBlockIsRefused) {
  fixture_.block_x = 128;  // the captured variant has num_warps=8: 256 threads
  auto r = Generate(tmp_.path + "/out/matmul");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "num_warps=8 (256 threads per block)"))
      << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "has 128")) << r.status();
}

TEST_F(TritonProjectTest, FewerKernelParametersThanTheSignatureNeedsFail) {
  fixture_.drop_args = 4;  // the scratch pointers and two real parameters
  const std::string out = tmp_.path + "/out/matmul";
  auto r = Generate(out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "stride_cm")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "only 8")) << r.status();
  EXPECT_FALSE(fs::exists(out));
  // Exactly the function's parameters (no scratch pointers) is fine.
  fixture_.drop_args = 2;
  r = Generate(out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->project["triton"]["kernel_params"]["trailing_extra"], 0);
}

TEST_F(TritonProjectTest, KindSelection) {
  // Asked for Triton without metadata: a clear FailedPrecondition, nothing written.
  fixture_.with_metadata = false;
  const std::string out = tmp_.path + "/out/matmul";
  auto r = Generate(out, ProjectKind::kTriton);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "no Triton metadata")) << r.status();
  EXPECT_FALSE(fs::exists(out));
  // With metadata: auto picks Triton; native and binary-only do not.
  fixture_.with_metadata = true;
  r = Generate(out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->project["kind"], "triton");
  GenerateOptions o;
  o.out_dir = tmp_.path + "/out/native";
  o.kind = ProjectKind::kNative;
  r = GenerateProjectFromKcap(MakeKcap(tmp_.path + "/n", fixture_), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->project["kind"], "triton");
  EXPECT_FALSE(r->project.contains("triton"));
  EXPECT_FALSE(fs::exists(o.out_dir + "/run.py"));
  o.out_dir = tmp_.path + "/out/binary";
  o.kind = ProjectKind::kAuto;
  o.binary_only = true;
  r = GenerateProjectFromKcap(MakeKcap(tmp_.path + "/b", fixture_), o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->project["kind"], "binary");
  o.kind = ProjectKind::kTriton;
  o.out_dir = tmp_.path + "/out/both";
  r = GenerateProjectFromKcap(MakeKcap(tmp_.path + "/c", fixture_), o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
}

// kerncapctl repro on a .kcap of a Triton capture: --triton, --native and
// the default, and the run commands it prints.
TEST_F(TritonProjectTest, KerncapctlReproFlags) {
  const char* build = std::getenv("KERNCAP_BUILD_DIR");
  const std::string ctl = build == nullptr ? "" : std::string(build) + "/bin/kerncapctl";
  if (ctl.empty() || FindTool(ctl).empty()) GTEST_SKIP() << "kerncapctl binary not built";
  const std::string kcap = MakeKcap(tmp_.path, fixture_);
  const std::string none = "--socket=" + tmp_.path + "/none.sock";  // no daemon needed
  auto ctl_run = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {ctl, none};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunTool(argv, "", 120);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ToolResult{};
  };
  ToolResult r = ctl_run({"repro", kcap, "--out", tmp_.path + "/p1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "(triton, cuda sm_90")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "python3 run.py --bench")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "KERNCAP_REPLAY_LIB")) << r.out;
  r = ctl_run({"--json", "repro", kcap, "--out", tmp_.path + "/p2", "--triton"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["project"]["kind"], "triton");
  r = ctl_run({"--json", "repro", kcap, "--out", tmp_.path + "/p3", "--native"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(json::parse(r.out)["project"]["kind"], "triton");
  r = ctl_run({"repro", kcap, "--out", tmp_.path + "/p4", "--triton", "--binary"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  // --triton on a capture without Triton metadata: an error that says why.
  fixture_.with_metadata = false;
  const std::string plain = MakeKcap(tmp_.path + "/plain", fixture_);
  r = ctl_run({"repro", plain, "--out", tmp_.path + "/p5", "--triton"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "no Triton metadata")) << r.err;
  EXPECT_FALSE(fs::exists(tmp_.path + "/p5"));
}

// An Inductor (torch.compile) kernel file and a variant recorded through
// torch's static launcher (no compile options recorded).
TEST_F(TritonProjectTest, InductorKernelKeepsRuntimeImportsAndDerivesOptions) {
  if (Python3().empty()) GTEST_SKIP() << "python3 not found";
  const std::string def =
      "def triton_poi_fused_add_0(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):\n"
      "    xoffset = tl.program_id(0) * XBLOCK\n"
      "    xindex = xoffset + tl.arange(0, XBLOCK)[:]\n"
      "    xmask = xindex < xnumel\n"
      "    tmp0 = tl.load(in_out_ptr0 + (xindex), xmask)\n"
      "    tmp1 = tl.load(in_ptr0 + (xindex), xmask)\n"
      "    tmp2 = triton_helpers.maximum(tmp0, tmp1)\n"
      "    tl.store(in_out_ptr0 + (xindex), tmp2, xmask)\n";
  const std::string file = tmp_.path + "/inductor/cq/cqxyz.py";
  Write(file,
        absl::StrCat(
            "\nimport triton\nimport triton.language as tl\n\n"
            "from torch._inductor.runtime import triton_helpers, triton_heuristics\n"
            "from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math\n"
            "from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, "
            "DeviceProperties\n"
            "triton_helpers.set_driver_to_gpu()\n\n"
            "@triton_heuristics.pointwise(\n"
            "    size_hints={'x': 1048576}, \n    filename=__file__,\n"
            "    triton_meta={'signature': {'in_out_ptr0': '*fp32', 'in_ptr0': '*fp32', "
            "'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', "
            "index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, "
            "max_threads_per_multi_processor=2048, warp_size=32), 'constants': {}, "
            "'enable_fp_fusion': True},\n"
            "    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': "
            "'triton_poi_fused_add_0', 'mutated_arg_names': ['in_out_ptr0'], "
            "'assert_indirect_indexing': True, 'is_hip': False},\n"
            "    min_elem_per_thread=0\n)\n@triton.jit\n",
            def));
  ordered_json sig = {{"in_out_ptr0", "*fp32"}, {"in_ptr0", "*fp32"}, {"xnumel", "i32"},
                      {"XBLOCK", "constexpr"}};
  const std::string code = "\x7f" "ELF inductor cubin";
  ordered_json variant = {
      {"name", "triton_poi_fused_add_0"},
      {"binary", {{"format", "cubin"}, {"sha256", Sha256(code).ToHex()}, {"size", code.size()}}},
      {"num_warps", 4},
      {"num_stages", 1},
      {"signature", sig},
      {"constexprs", {{"XBLOCK", 1024}}},
      {"options", ordered_json::object()},
      {"via", "inductor-static-launcher"},
      {"config", {{"kwargs", {{"XBLOCK", 1024}}}, {"num_warps", 4}, {"num_stages", 1}}},
      {"function", "triton_poi_fused_add_0:aa"},
      {"id", Sha256(code).ToHex()}};
  ordered_json doc = {
      {"schema", "kerncap.triton-jit/1"},
      {"kernel_name", "triton_poi_fused_add_0"},
      {"current", Sha256(code).ToHex()},
      {"variants", ordered_json::array({variant})},
      {"functions",
       {{"triton_poi_fused_add_0:aa",
         {{"name", "triton_poi_fused_add_0"},
          {"file", file},
          {"inductor_file", file},
          {"source", def},
          {"source_sha256", Sha256(def).ToHex()},
          {"source_truncated", false},
          {"params",
           {{{"name", "in_out_ptr0"}, {"constexpr", false}},
            {{"name", "in_ptr0"}, {"constexpr", false}},
            {{"name", "xnumel"}, {"constexpr", false}},
            {{"name", "XBLOCK"}, {"constexpr", true}}}}}}}},
      {"autotune",
       {{"kind", "inductor.CachingAutotuner"},
        {"configs", {variant["config"]}},
        {"chosen", variant["config"]},
        {"chosen_index", 0}}},
      {"inductor", {{"kernel_name", "triton_poi_fused_add_0"}, {"file", file}}}};
  replay::testing::KcapBuilder b(1 << 16);
  v1::CaptureManifest m;
  m.set_capture_id("cap-1nduct0r000");
  m.mutable_kernel()->set_mangled_name("triton_poi_fused_add_0");
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  m.mutable_kernel()->set_arch("sm_90");
  m.mutable_kernel()->set_jit_metadata_json(doc.dump());
  for (uint32_t v : {1024u, 1u, 1u}) m.mutable_launch()->add_grid(v);
  v1::CodeObject* co = m.add_code_objects();
  co->set_digest(Sha256(code).ToBytes());
  co->set_format(v1::CODE_OBJECT_CUBIN);
  *co->mutable_data() = b.Add(code);
  std::string blob(40, '\0');
  const uint64_t p0 = kA, p1 = kB;
  const int32_t n = 1 << 20;
  std::memcpy(blob.data(), &p0, 8);
  std::memcpy(blob.data() + 8, &p1, 8);
  std::memcpy(blob.data() + 16, &n, 4);
  m.set_argument_blob(blob);
  for (uint32_t off : {0u, 8u, 16u, 24u, 32u}) {
    v1::Argument* a = m.add_arguments();
    a->set_offset(off);
    a->set_size(off == 16 ? 4 : 8);
  }
  const std::string kcap = tmp_.path + "/inductor.kcap";
  ASSERT_TRUE(b.Write(kcap, m).ok());
  GenerateOptions o;
  o.out_dir = tmp_.path + "/out/inductor";
  auto r = GenerateProjectFromKcap(kcap, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const json& t = r->project["triton"];
  EXPECT_EQ(t["kernel_source"]["origin"], "module");
  EXPECT_EQ(t["compile_options"]["debug"], true);
  EXPECT_EQ(t["compile_options"]["sanitize_overflow"], false);
  EXPECT_EQ(t["compile_options"]["enable_fp_fusion"], true);
  EXPECT_EQ(t["options_from_inductor"].size(), 3u) << t["options_from_inductor"];
  EXPECT_EQ(t["inductor_decorator"]["decorator"], "triton_heuristics.pointwise");
  EXPECT_EQ(t["launch_options"], json({{"num_warps", 4}, {"num_stages", 1}}));
  const std::string k = Read(o.out_dir + "/kernel.py");
  EXPECT_TRUE(absl::StrContains(
      k, "from torch._inductor.runtime import triton_helpers, triton_heuristics\n"))
      << k;
  EXPECT_TRUE(absl::StrContains(k, absl::StrCat("\n@triton.jit\n", def))) << k;
  for (absl::string_view line : absl::StrSplit(k, '\n')) {
    if (absl::StartsWith(line, "#")) continue;
    EXPECT_FALSE(absl::StrContains(line, "pointwise")) << line;
    EXPECT_FALSE(absl::StrContains(line, "set_driver_to_gpu")) << line;
    EXPECT_FALSE(absl::StrContains(line, "__file__")) << line;
  }
  ExpectNoAbsolutePaths("kernel.py", k, tmp_.path);
  ToolResult dr = RunPy(o.out_dir, {"--dry-run", "--json"});
  ASSERT_EQ(dr.exit_code, 0) << dr.err;
  json plan = json::parse(dr.out)["plan"];
  EXPECT_EQ(plan["args"]["xnumel"], 1 << 20);
  EXPECT_EQ(plan["args"]["in_ptr0"], "0x7f0000100000");
  EXPECT_EQ(plan["constexprs"]["XBLOCK"], 1024);
  EXPECT_EQ(plan["grid"], json({1024, 1, 1}));
}

// The real Triton (python_shim's fake driver: compiles, never launches):
// an application's autotuned matmul compiled and recorded by the shim, its
// chosen binary wrapped in a capture, the project generated, and run.py's
// launch path run with a stand-in replay library. run.py must make Triton
// build the very binary that was captured; an edited kernel.py or another
// config must not. Needs a python with triton: $KERNCAP_TRITON_PYTHON, else
// the venv python_shim_test makes in the build folder; skips without.
std::string TritonPython() {
  for (std::string p : {std::string(std::getenv("KERNCAP_TRITON_PYTHON") != nullptr
                                        ? std::getenv("KERNCAP_TRITON_PYTHON")
                                        : ""),
                        std::getenv("KERNCAP_BUILD_DIR") != nullptr
                            ? std::string(std::getenv("KERNCAP_BUILD_DIR")) +
                                  "/python_shim/python_shim_venv/bin/python"
                            : std::string()}) {
    if (p.empty() || FindTool(p).empty()) continue;
    auto r = RunTool({p, "-c", "import triton, triton.backends.nvidia"});
    if (r.ok() && r->exit_code == 0) return p;
  }
  return "";
}

// A scenario of testing/cpu_harness.py captured, as a generated project.
struct HarnessProject {
  std::string app;    // the scenario's application folder (doc.json, launch.json, world.json)
  std::string dir;    // the project
  json launch;
  json project;       // kerncap.json
  std::string cubin;  // the captured binary
};

class TritonCpuHarnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    py_ = TritonPython();
    if (py_.empty()) {
      GTEST_SKIP() << "no python with triton (set KERNCAP_TRITON_PYTHON, or run python_shim_test "
                      "first for its venv)";
    }
    const std::string src = KERNCAP_SOURCE_DIR;
    harness_ = src + "/reproducer/generator/triton/testing/cpu_harness.py";
    ::setenv("PYTHONPATH", (src + "/python_shim/src:" + src + "/python_shim/tests").c_str(), 1);
  }

  // Runs the scenario as the application (its own Triton cache), wraps the
  // captured launch in a .kcap and generates its Triton project.
  HarnessProject Capture(const std::string& scenario) {
    HarnessProject h;
    h.app = tmp_.path + "/" + scenario;
    fs::create_directories(h.app);
    ::setenv("TRITON_CACHE_DIR", (h.app + "/cache-app").c_str(), 1);
    auto r = RunTool({py_, harness_, "capture", scenario, h.app}, "", 600);
    EXPECT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->out + r->err : r.status().ToString());
    if (!r.ok() || r->exit_code != 0) return h;
    h.launch = json::parse(Read(h.app + "/launch.json"));
    h.cubin = Read(h.app + "/kernel.cubin");
    replay::testing::KcapBuilder b(1 << 16);
    v1::CaptureManifest m;
    m.set_capture_id("cap-c0ffee" + scenario.substr(0, 6));
    m.mutable_kernel()->set_mangled_name(h.launch["kernel"].get<std::string>());
    m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
    m.mutable_kernel()->set_arch("sm_90");
    m.mutable_kernel()->set_jit_metadata_json(Read(h.app + "/doc.json"));
    for (const json& g : h.launch["grid"]) m.mutable_launch()->add_grid(g.get<uint32_t>());
    for (const json& g : h.launch["block"]) m.mutable_launch()->add_block(g.get<uint32_t>());
    v1::CodeObject* co = m.add_code_objects();
    co->set_digest(Sha256(h.cubin).ToBytes());
    co->set_format(v1::CODE_OBJECT_CUBIN);
    *co->mutable_data() = b.Add(h.cubin);
    m.mutable_kernel()->set_code_object_digest(co->digest());
    for (const json& reg : h.launch["regions"]) {
      v1::Region* pre = m.mutable_pre()->add_regions();
      pre->set_va(reg["va"].get<uint64_t>());
      pre->set_kind(v1::REGION_DEVICE);
      *pre->mutable_data() = b.Add(std::string(reg["size"].get<size_t>(),
                                               static_cast<char>(reg["fill"].get<int>())));
    }
    std::string blob;
    for (const json& prm : h.launch["params"]) {
      const uint32_t size = prm["size"].get<uint32_t>();
      while (blob.size() % size != 0) blob.push_back('\0');
      v1::Argument* a = m.add_arguments();
      a->set_offset(static_cast<uint32_t>(blob.size()));
      a->set_size(size);
      blob += absl::HexStringToBytes(prm["hex"].get<std::string>());
    }
    m.set_argument_blob(blob);
    const std::string kcap = h.app + "/capture.kcap";
    EXPECT_TRUE(b.Write(kcap, m).ok());
    GenerateOptions o;
    o.out_dir = h.app + "/repro";
    auto g = GenerateProjectFromKcap(kcap, o);
    EXPECT_TRUE(g.ok()) << g.status();
    if (!g.ok()) return h;
    h.dir = o.out_dir;
    h.project = g->project;
    for (const std::string& w : g->project.value("warnings", std::vector<std::string>{})) {
      warnings_.push_back(w);
    }
    // A cold cache: run.py's call compiles for real.
    ::setenv("TRITON_CACHE_DIR", (h.app + "/cache-repro").c_str(), 1);
    return h;
  }

  // run.py ARGS --json in the harness (stand-in replay library and device
  // memory over world.json; `effect` is what the rebuilt kernel writes).
  json Run(const HarnessProject& h, std::vector<std::string> args,
           const json& effect = json::object()) {
    const std::string effect_file = h.app + "/effect.json";
    Write(effect_file, effect.dump());
    ::setenv("KC_HARNESS_WORLD", (h.app + "/world.json").c_str(), 1);
    ::setenv("KC_HARNESS_EFFECT", effect_file.c_str(), 1);
    std::vector<std::string> argv = {py_, harness_, "run", h.dir, "--json"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto res = RunTool(argv, "", 600);
    EXPECT_TRUE(res.ok() && res->exit_code == 0)
        << (res.ok() ? res->out + res->err : res.status().ToString());
    json j = res.ok() ? json::parse(res->out, nullptr, false) : json();
    EXPECT_TRUE(j.is_object()) << (res.ok() ? res->out + res->err : "");
    return j.is_object() ? j : json::object();
  }

  static std::string Hex(uint64_t va) {
    std::ostringstream o;
    o << "0x" << std::hex << va;
    return o.str();
  }

  std::string py_, harness_;
  TempDir tmp_;
  std::vector<std::string> warnings_;
};

// An application's autotuned matmul compiled and recorded by the shim, its
// chosen binary wrapped in a capture, the project generated, and run.py's
// launch path run with a stand-in replay library. run.py must make Triton
// build the very binary that was captured (byte for byte: kernel.py is
// compiled under the module's name and lines); an edited kernel.py or
// another config must not; an unchanged kernel.py that does not rebuild it
// is refused.
TEST_F(TritonCpuHarnessTest, RunPyBuildsTheCapturedBinary) {
  HarnessProject h = Capture("matmul");
  ASSERT_FALSE(h.dir.empty());
  EXPECT_EQ(h.project["triton"]["variant"]["selected_by"], "code_object_digest");
  EXPECT_EQ(h.project["triton"]["kernel_source"]["origin"], "module");
  json j = Run(h, {});
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  EXPECT_EQ(j["binary"]["identical"], true) << j["binary"] << j["notes"];
  EXPECT_EQ(j["binary"]["captured_sha256"], Sha256(h.cubin).ToHex());
  EXPECT_EQ(j["binary"]["expected_same"], true);
  EXPECT_EQ(j["source_mapped"], true) << j["sources"];
  EXPECT_EQ(j["validation"]["pass"], true) << j["validation"];
  EXPECT_EQ(j["harness"]["launches"], 1);
  // The replay library was prepared before the launch and closed after.
  const json& calls = j["harness"]["replay_calls"];
  ASSERT_GE(calls.size(), 4u) << calls;
  EXPECT_EQ(calls[0][0], "open");
  EXPECT_EQ(calls[0][1], "capture.kcap");
  EXPECT_EQ(calls[1][0], "prepare");
  EXPECT_EQ(calls.back()[0], "close");
  // Tolerances go per buffer, with the element type from the signature.
  j = Run(h, {"--rtol", "0.01"});
  json v;
  for (const json& c : j["harness"]["replay_calls"]) {
    if (c[0] == "validate") v = c[1];
  }
  EXPECT_EQ(v["regions"]["2"]["dtype"], "f16") << v;
  EXPECT_EQ(v["regions"]["2"]["rtol"], 0.01) << v;
  EXPECT_TRUE(v["dtype"].is_null()) << v;
  bool c_ptr_row = false;
  for (const json& row : j["validation"]["buffers"]) c_ptr_row |= row["buffer"] == "c_ptr";
  EXPECT_TRUE(c_ptr_row) << j["validation"];

  // A replay that compared nothing is no pass.
  j = Run(h, {}, {{"validate_report", {{"regions_compared", 0}, {"pass", true}}}});
  EXPECT_EQ(j["harness"]["rc"], 8) << j.dump(1);
  EXPECT_TRUE(absl::StrContains(j["notes"].dump(), "nothing was compared")) << j["notes"];

  // Another configuration compiles another binary (and says so).
  j = Run(h, {"--config", R"({"num_warps": 4})"});
  EXPECT_EQ(j["binary"]["same"], false) << j["binary"];
  EXPECT_EQ(j["binary"]["expected_same"], false);
  EXPECT_EQ(j["harness"]["rc"], 0);
  EXPECT_EQ(j["harness"]["launches"], 1);
  // So does an edited kernel.py: a different binary is expected, validated.
  std::string k = Read(h.dir + "/kernel.py");
  const size_t at = k.find("acc = _scale(acc, alpha)");
  ASSERT_NE(at, std::string::npos) << k;
  const std::string pristine = k;
  k.replace(at, 24, "acc = _scale(acc, alpha * 2.0)");
  Write(h.dir + "/kernel.py", k);
  j = Run(h, {});
  EXPECT_EQ(j["binary"]["same"], false) << j["binary"];
  EXPECT_EQ(j["binary"]["edited_sources"], json({"kernel.py"}));
  EXPECT_EQ(j["harness"]["rc"], 0);
  Write(h.dir + "/kernel.py", pristine);

  // A variant specialised otherwise than the JIT would from the values (as
  // Inductor compiles): run.py pins it, which here makes another binary from
  // the unchanged kernel.py: refused (exit 9), nothing validated.
  const std::string kj = h.dir + "/kerncap.json";
  const std::string original = Read(kj);
  json pj = json::parse(original);
  pj["triton"]["specialization"].erase("M");  // M=1024 not marked divisible
  for (json& prm : pj["triton"]["parameters"]) {
    if (prm["name"] == "stride_am") {  // compiled as a constant
      prm = {{"name", "stride_am"}, {"index", prm["index"]}, {"type", "constexpr"},
             {"kind", "constexpr"}, {"constexpr_declared", false}, {"value", 512}};
    }
  }
  Write(kj, pj.dump(1));
  j = Run(h, {});
  EXPECT_EQ(j["harness"]["rc"], 9) << j.dump(1);
  EXPECT_EQ(j["result"], "refused");
  EXPECT_FALSE(j.contains("validation")) << j["validation"];
  const std::string notes = j["notes"].dump();
  EXPECT_TRUE(absl::StrContains(notes, "M=1024: not specialised")) << notes;
  EXPECT_TRUE(absl::StrContains(notes, "stride_am: compiled as the constant 512")) << notes;
  EXPECT_TRUE(absl::StrContains(j["error"].get<std::string>(), "built another binary")) << j["error"];
  j = Run(h, {"--allow-other-binary"});
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  EXPECT_EQ(j["validation"]["pass"], true);
  // A project whose variant is not the captured binary's: refused.
  pj = json::parse(original);
  pj["triton"]["variant"]["selected_by"] = "current";
  Write(kj, pj.dump(1));
  j = Run(h, {});
  EXPECT_EQ(j["harness"]["rc"], 9) << j.dump(1);
  EXPECT_TRUE(absl::StrContains(j.value("error", ""), "selected by \"current\"") ||
              absl::StrContains(j.value("error", ""), "selected by 'current'"))
      << j;
  Write(kj, original);
  j = Run(h, {});
  EXPECT_EQ(j["binary"]["identical"], true) << j["binary"] << j["notes"];
}

// A Triton binary's line table names the .py it was compiled from. The
// native generator (--native, or a capture without the shim's metadata)
// must not turn that into a CUDA project that runs nvcc on a .py: it makes a
// binary-only project and says why.
TEST_F(TritonCpuHarnessTest, NativeProjectOfATritonBinaryIsBinaryOnly) {
  HarnessProject h = Capture("matmul");
  ASSERT_FALSE(h.dir.empty());
  GenerateOptions o;
  o.out_dir = h.app + "/native";
  o.kind = ProjectKind::kNative;
  auto g = GenerateProjectFromKcap(h.app + "/capture.kcap", o);
  ASSERT_TRUE(g.ok()) << g.status();
  const json& p = g->project;
  EXPECT_NE(p["kind"], "triton");
  EXPECT_EQ(p["compile"]["present"], false) << p["compile"];
  EXPECT_NE(p["source"]["outcome"], "found") << p["source"];
  const std::string msg = p["source"].value("message", "");
  EXPECT_TRUE(absl::StrContains(msg, "Python source")) << p["source"];
  EXPECT_TRUE(absl::StrContains(msg, "kc_cpu_matmul.py")) << p["source"];
  EXPECT_TRUE(absl::StrContains(msg, "KERNCAP_TRITON_SHIM")) << p["source"];
  EXPECT_FALSE(fs::exists(o.out_dir + "/src")) << "sources copied";
  const std::string mk = Read(o.out_dir + "/Makefile");
  EXPECT_FALSE(absl::StrContains(mk, "src/kc_cpu_matmul.py")) << mk;
  // make recompile says why instead of running a compiler.
  EXPECT_TRUE(absl::StrContains(mk, "recompile: the kernel was compiled from Python source")) << mk;
}

// --bench hands the rebuilt cubin to the replay library's bench (both
// binaries launched the same way), and refuses a build that cannot run
// under the captured launch.
TEST_F(TritonCpuHarnessTest, BenchTimesBothBinariesThroughTheReplayLibrary) {
  HarnessProject h = Capture("matmul");
  ASSERT_FALSE(h.dir.empty());
  json j = Run(h, {"--bench", "7", "--warmup", "3", "--cold-l2"});
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  json bench_call;
  for (const json& c : j["harness"]["replay_calls"]) {
    if (c[0] == "bench") bench_call = c[1];
  }
  ASSERT_TRUE(bench_call.is_object()) << j["harness"]["replay_calls"];
  EXPECT_EQ(bench_call["iterations"], 7);
  EXPECT_EQ(bench_call["warmup"], 3);
  EXPECT_EQ(bench_call["cold_l2"], true);
  EXPECT_EQ(bench_call["compare_original"], true);
  const std::string variant = bench_call["variant"].get<std::string>();
  EXPECT_EQ(variant, h.dir + "/build/kernel_py.cubin");
  // Triton's cubin of kernel.py: here the captured binary itself.
  EXPECT_EQ(Read(variant), h.cubin);
  EXPECT_EQ(j["bench"]["speedup"], 1.0) << j["bench"];
  EXPECT_EQ(j["bench"]["variant_file"], "build/kernel_py.cubin");
  // No Triton launch is timed: kernel.py ran once (to compile and validate).
  EXPECT_EQ(j["harness"]["launches"], 1);
  // Results that do not revalidate after the timing loop fail the run.
  json effect = {{"bench_report",
                  {{"variant", {{"iterations", 7}, {"median_ms", 0.1}}},
                   {"original", {{"iterations", 7}, {"median_ms", 0.2}}},
                   {"speedup", 2.0},
                   {"validated", {{"variant", "pass"}, {"original", "pass"}}},
                   {"revalidated", {{"variant", "fail"}, {"original", "pass"}}},
                   {"pass", false}}}};
  j = Run(h, {"--bench", "7"}, effect);
  EXPECT_EQ(j["harness"]["rc"], 8) << j.dump(1);
  EXPECT_TRUE(absl::StrContains(j["notes"].dump(), "revalidated variant: fail")) << j["notes"];
  // The validations around the timing compare as run.py's did.
  j = Run(h, {"--bench", "7", "--rtol", "0.01"});
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  for (const json& c : j["harness"]["replay_calls"]) {
    if (c[0] == "bench") {
      EXPECT_EQ(c[1]["validate"]["regions"]["2"]["rtol"], 0.01) << c;
    }
  }
  // Another block (num_warps) cannot run under the captured launch: refused.
  j = Run(h, {"--bench", "7", "--config", R"({"num_warps": 4})"});
  EXPECT_EQ(j["harness"]["rc"], 2) << j.dump(1);
  for (const json& c : j["harness"]["replay_calls"]) EXPECT_NE(c[0], "bench") << c;
}

// More autotuner candidates than the shim keeps: the winner (compiled
// third of 20) is still the captured binary's variant, and run.py rebuilds it.
TEST_F(TritonCpuHarnessTest, AutotunerWithMoreConfigsThanKept) {
  HarnessProject h = Capture("many_configs");
  ASSERT_FALSE(h.dir.empty());
  const json& t = h.project["triton"];
  EXPECT_EQ(t["variant"]["selected_by"], "code_object_digest");
  EXPECT_EQ(t["launch_options"]["num_warps"], h.launch["chosen"]["num_warps"]);
  EXPECT_EQ(t["constexprs"]["BLOCK"], h.launch["chosen"]["kwargs"]["BLOCK"]);
  EXPECT_EQ(t["autotune"]["configs"].size(), 20u);
  EXPECT_EQ(t["autotune"]["chosen_index"], 2);
  json j = Run(h, {});
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  EXPECT_EQ(j["binary"]["identical"], true) << j["binary"];
  EXPECT_EQ(j["validation"]["pass"], true);
}

// Device asserts embed file names and line numbers; the application
// compiled with TRITON_DEBUG=1 and its own ptxas (TRITON_PTXAS_PATH, here a
// wrapper running -O1). run.py, in an environment with neither, must rebuild
// the captured binary byte for byte; without that ptxas it must refuse.
TEST_F(TritonCpuHarnessTest, AssertsDebugAndTheApplicationsPtxas) {
  HarnessProject h = Capture("assert_ptxas");
  ASSERT_FALSE(h.dir.empty());
  const json& t = h.project["triton"];
  EXPECT_EQ(t["compile_options"]["debug"], true) << t["compile_options"];
  const std::string wrapper = h.app + "/app-toolkit/bin/ptxas";
  EXPECT_EQ(t["build"]["ptxas"]["path"], wrapper) << t["build"];
  EXPECT_EQ(t["build"]["env"]["TRITON_PTXAS_PATH"], wrapper) << t["build"];
  ::unsetenv("TRITON_PTXAS_PATH");
  ::unsetenv("TRITON_DEBUG");
  json j = Run(h, {});
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  EXPECT_EQ(j["binary"]["identical"], true) << j["binary"] << j["notes"];
  EXPECT_EQ(j["build"]["ptxas"]["path"], wrapper) << j["build"];
  // The assert messages name the application's file (mapped), not kernel.py.
  EXPECT_TRUE(absl::StrContains(h.cubin, h.app + "/app/kc_cpu_assert.py"));
  // Functions moved around in kernel.py still map to their original lines
  // (by name): the same binary.
  const std::string k = Read(h.dir + "/kernel.py");
  const size_t helper = k.find("@triton.jit\ndef _checked");
  const size_t kernel = k.find("@triton.jit\ndef kc_cpu_assert");
  ASSERT_TRUE(helper != std::string::npos && kernel != std::string::npos && helper < kernel) << k;
  Write(h.dir + "/kernel.py",
        k.substr(0, helper) + k.substr(kernel) + "\n\n" + k.substr(helper, kernel - helper));
  j = Run(h, {});
  EXPECT_EQ(j["binary"]["identical"], true) << j["binary"] << j["notes"];
  // A line added inside the kernel moves the asserts after it: another
  // binary from an edited kernel.py (validated, not refused).
  Write(h.dir + "/kernel.py",
        absl::StrReplaceAll(k, {{"    x = _checked(", "    # an added comment line\n    x = _checked("}}));
  j = Run(h, {});
  EXPECT_EQ(j["binary"]["same"], false) << j["binary"];
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  Write(h.dir + "/kernel.py", k);
  // Without the application's ptxas (a ptxas of the same release is found,
  // but it is not the one that built the binary): refused, saying so.
  fs::rename(wrapper, wrapper + ".gone");
  j = Run(h, {});
  EXPECT_EQ(j["harness"]["rc"], 9) << j.dump(1);
  EXPECT_TRUE(absl::StrContains(j.value("error", ""), "ptxas")) << j.value("error", "");
  fs::rename(wrapper + ".gone", wrapper);
}

// Helpers imported from the application's package (absolute, relative and
// module-alias imports, a constexpr function, constants) are copied into
// deps/; run.py works without the package (and without what its __init__
// imports).
TEST_F(TritonCpuHarnessTest, HelpersFromTheApplicationsPackageAreCopied) {
  HarnessProject h = Capture("helpers_pkg");
  ASSERT_FALSE(h.dir.empty());
  const json& ks = h.project["triton"]["kernel_source"];
  EXPECT_EQ(ks["not_copied"], json::array()) << ks["not_copied"];
  std::map<std::string, json> mods;
  for (const json& mod : ks["modules"]) mods[mod["module"]] = mod;
  ASSERT_TRUE(mods.count("kc_app_pkg.ops.utils") && mods.count("kc_app_pkg.consts")) << ks["modules"];
  EXPECT_EQ(mods["kc_app_pkg.ops.utils"]["path"], "deps/kc_app_pkg/ops/utils.py");
  const std::string utils = Read(h.dir + "/deps/kc_app_pkg/ops/utils.py");
  for (const char* want : {"def scale_helper(x):", "def other_helper(x, y):", "def half_block(b):",
                           "SCALE = tl.constexpr(3.0)", "from ..consts import OFFSET"}) {
    EXPECT_TRUE(absl::StrContains(utils, want)) << want << " in\n" << utils;
  }
  EXPECT_FALSE(absl::StrContains(utils, "application_only")) << utils;
  const std::string consts = Read(h.dir + "/deps/kc_app_pkg/consts.py");
  EXPECT_TRUE(absl::StrContains(consts, "OFFSET = tl.constexpr(0.5)")) << consts;
  EXPECT_FALSE(absl::StrContains(consts, "UNUSED")) << consts;
  // The package folders are empty: the application's __init__ is not copied.
  EXPECT_FALSE(absl::StrContains(Read(h.dir + "/deps/kc_app_pkg/__init__.py"), "import"));
  const std::string k = Read(h.dir + "/kernel.py");
  EXPECT_TRUE(absl::StrContains(k, "\nfrom kc_app_pkg.consts import OFFSET\n")) << k;
  EXPECT_TRUE(absl::StrContains(k, "\nimport kc_app_pkg.ops.utils as U\n")) << k;
  // Nothing of the application remains.
  fs::rename(h.app + "/app", h.app + "/app.gone");
  json j = Run(h, {});
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  // The same code; only the line table differs: ptxas records the size and
  // time of each source file it finds on disk, and the application's files
  // are gone here.
  EXPECT_EQ(j["binary"]["same"], true) << j["binary"] << j["notes"];
  EXPECT_EQ(j["binary"]["captured_code_sha256"], j["binary"]["compiled_code_sha256"]);
  EXPECT_EQ(j["source_mapped"], true) << j["sources"];
  EXPECT_EQ(j["validation"]["pass"], true);
  const json& loaded = j["harness"]["sys_modules"];
  ASSERT_TRUE(loaded.contains("kc_app_pkg.ops.utils")) << loaded;
  EXPECT_EQ(loaded["kc_app_pkg.ops.utils"], h.dir + "/deps/kc_app_pkg/ops/utils.py");
  EXPECT_FALSE(loaded.contains("kc_app_only_dependency")) << loaded;
  // An edited helper is an edit (another binary expected, not refused).
  Write(h.dir + "/deps/kc_app_pkg/ops/utils.py",
        absl::StrReplaceAll(utils, {{"x * SCALE + OFFSET", "x * SCALE - OFFSET"}}));
  j = Run(h, {});
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  EXPECT_EQ(j["binary"]["same"], false);
  EXPECT_EQ(j["binary"]["edited_sources"], json({"deps/kc_app_pkg/ops/utils.py"}));
}

// Device-side TMA descriptors live in Triton's global scratch; the
// application's allocator put it in the same allocation as the tensors.
// run.py must hand Triton the captured scratch, and attribute a difference
// to the buffer that differs, not to the allocation.
TEST_F(TritonCpuHarnessTest, GlobalScratchAndBuffersSharingAnAllocation) {
  HarnessProject h = Capture("scratch_shared");
  ASSERT_FALSE(h.dir.empty());
  const json& t = h.project["triton"];
  const uint64_t scratch = h.launch["global_scratch"].get<uint64_t>();
  EXPECT_EQ(t["scratch"]["global"]["captured"], Hex(scratch)) << t["scratch"];
  EXPECT_EQ(t["scratch"]["global"]["size_per_program"], 256) << t["scratch"];
  EXPECT_EQ(t["scratch"]["global"]["region"], 0);
  // The kernel writes its descriptors (1 KiB for a 2x2 grid) where Triton's
  // launcher put its scratch.
  json effect = {{"scratch", {{"captured", scratch}, {"size", 1024},
                              {"hex", absl::BytesToHexString(std::string(1024, '\xd5'))}}}};
  json j = Run(h, {}, effect);
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  EXPECT_EQ(j["binary"]["identical"], true) << j["binary"];
  ASSERT_EQ(j["harness"]["launch_log"].size(), 1u);
  EXPECT_EQ(j["harness"]["launch_log"][0]["global_scratch"], scratch);
  EXPECT_EQ(j["validation"]["pass"], true) << j["validation"];
  // dst_ptr wrong (src_ptr, dst_ptr and the scratch share region 0).
  const uint64_t dst = 0x7f0000010000;
  effect["corrupt"] = json::array({json::array({dst + 100, "ffff"})});
  j = Run(h, {}, effect);
  EXPECT_EQ(j["harness"]["rc"], 8) << j.dump(1);
  EXPECT_EQ(j["validation"]["failing"], json({"dst_ptr"})) << j["validation"];
  for (const json& row : j["validation"]["buffers"]) {
    if (row["buffer"] == "src_ptr") {
      EXPECT_EQ(row["result"], "identical") << row;
    }
    if (row["buffer"] == "dst_ptr") {
      EXPECT_EQ(row["count"], 2) << row;
    }
  }
  // Other workspace contents (an edited kernel's other descriptors) do not
  // fail the validation; they are reported.
  effect.erase("corrupt");
  effect["scratch"]["hex"] = absl::BytesToHexString(std::string(1024, '\x11'));
  j = Run(h, {}, effect);
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  bool reported = false;
  for (const json& row : j["validation"]["buffers"]) {
    reported |= absl::StrContains(row["result"].get<std::string>(), "workspace");
  }
  EXPECT_TRUE(reported) << j["validation"];
  // A write past dst into the allocation's bytes outside every buffer.
  effect["scratch"]["hex"] = absl::BytesToHexString(std::string(1024, '\xd5'));
  effect["corrupt"] = json::array({json::array({0x7f0000028000ull, "ff"})});
  j = Run(h, {}, effect);
  EXPECT_EQ(j["harness"]["rc"], 8) << j.dump(1);
  ASSERT_EQ(j["validation"]["failing"].size(), 1u) << j["validation"];
  EXPECT_TRUE(absl::StrContains(j["validation"]["failing"][0].get<std::string>(),
                                "outside every argument"))
      << j["validation"];
}

// An fp16 and an fp32 output in one allocation: tolerances apply with each
// buffer's element type, and a failure names the buffer.
TEST_F(TritonCpuHarnessTest, BuffersOfMixedTypesInOneAllocation) {
  HarnessProject h = Capture("shared_mixed");
  ASSERT_FALSE(h.dir.empty());
  const uint64_t y = 0x7f0000000000 + 2 * 1024, z = 0x7f0000000000 + 6 * 1024;
  // y[3] off by 1e-3 (fp32 bytes 0x3f400000 = 0.75 -> 0.751).
  float off = 0.751f;
  std::string bytes(4, '\0');
  std::memcpy(bytes.data(), &off, 4);
  json effect = {{"corrupt", json::array({json::array({y + 12, absl::BytesToHexString(bytes)})})}};
  json j = Run(h, {}, effect);
  EXPECT_EQ(j["harness"]["rc"], 8) << j.dump(1);  // exact: fails, naming y_ptr
  EXPECT_EQ(j["validation"]["failing"], json({"y_ptr"})) << j["validation"];
  j = Run(h, {"--atol", "0.01"}, effect);
  EXPECT_EQ(j["harness"]["rc"], 0) << j.dump(1);
  for (const json& row : j["validation"]["buffers"]) {
    if (row["buffer"] == "y_ptr") {
      EXPECT_EQ(row["result"], "within tolerance") << row;
      EXPECT_EQ(row["dtype"], "f32") << row;
    }
  }
  // z (fp16) far off: fails, and only z.
  effect["corrupt"].push_back(json::array({z + 2, "0078"}));
  j = Run(h, {"--atol", "0.01"}, effect);
  EXPECT_EQ(j["harness"]["rc"], 8) << j.dump(1);
  EXPECT_EQ(j["validation"]["failing"], json({"z_ptr"})) << j["validation"];
}

// Tuples and host tensor descriptors (TMA) map onto several kernel
// parameters; the descriptor's base address is found in the CUtensorMap.
TEST(TritonParameterMapTest, TuplesAndTensorDescriptors) {
  v1::CaptureManifest m;
  v1::Region* r = m.mutable_pre()->add_regions();
  r->set_va(kA);
  r->mutable_data()->set_size(1 << 20);
  // pair: (*fp32, i32); desc: tensordesc<fp16[64, 32]> lowered to TMA:
  // CUtensorMap (128 bytes) + 2 x i32 shape + 2 x i64 strides.
  std::string blob(8 + 4 + 4 + 128 + 8 + 16, '\0');
  const uint64_t p = kA + 256, base = kA + 4096, flags = 0x1234;
  std::memcpy(blob.data(), &p, 8);
  std::memcpy(blob.data() + 16, &flags, 8);  // descriptor word 0: not an address
  std::memcpy(blob.data() + 24, &base, 8);   // word 1: the global address
  m.set_argument_blob(blob);
  struct A {
    uint32_t off, size;
  };
  for (A a : {A{0, 8}, A{8, 4}, A{16, 128}, A{144, 4}, A{148, 4}, A{152, 8}, A{160, 8}}) {
    v1::Argument* arg = m.add_arguments();
    arg->set_offset(a.off);
    arg->set_size(a.size);
  }
  ordered_json variant = {
      {"signature",
       {{"pair", {"*fp32", "i32"}}, {"desc", "tensordesc<fp16[64, 32]>"}, {"B", "constexpr"}}},
      {"constexprs", {{"B", 16}}}};
  ordered_json function = {{"params",
                            {{{"name", "pair"}, {"constexpr", false}},
                             {{"name", "desc"}, {"constexpr", false}},
                             {{"name", "B"}, {"constexpr", true}}}}};
  auto map = MapTritonParameters(m, variant, function);
  ASSERT_TRUE(map.ok()) << map.status();
  const json& ps = map->parameters;
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(ps[0]["kind"], "tuple");
  EXPECT_EQ(ps[0]["elements"][0]["name"], "pair[0]");
  EXPECT_EQ(ps[0]["elements"][0]["kernel_args"], json({0}));
  EXPECT_EQ(ps[0]["elements"][1]["kernel_args"], json({1}));
  EXPECT_EQ(ps[1]["kind"], "tensordesc");
  EXPECT_EQ(ps[1]["layout"], "tma");
  EXPECT_EQ(ps[1]["block_shape"], json({64, 32}));
  EXPECT_EQ(ps[1]["dtype"], "fp16");
  EXPECT_EQ(ps[1]["kernel_args"], json({2, 3, 4, 5, 6}));
  EXPECT_EQ(ps[1]["base"], "0x7f0000001000");
  EXPECT_EQ(ps[1]["region"], 0);
  EXPECT_EQ(ps[2]["value"], 16);
  EXPECT_EQ(map->kernel_params["trailing_extra"], 0);
  // A signature type this generator does not know is refused by name.
  variant["signature"]["desc"] = "weird<3>";
  map = MapTritonParameters(m, variant, function);
  ASSERT_FALSE(map.ok());
  EXPECT_TRUE(absl::StrContains(map.status().message(), "weird<3>")) << map.status();
  // A size that does not match the type is refused too.
  variant["signature"]["desc"] = "i64";
  map = MapTritonParameters(m, variant, function);
  ASSERT_FALSE(map.ok());
  EXPECT_TRUE(absl::StrContains(map.status().message(), "128 bytes")) << map.status();
}

}  // namespace
}  // namespace kerncap::repro
