// End to end tests of the reproducer generator on real code objects: a small
// multi-file CUDA application compiled here with nvcc (-cubin -lineinfo
// -arch=sm_90) and a HIP one compiled with clang-15 for gfx90a (-g), each
// wrapped in a capture (.kcap), generated into a project, and the project's
// Makefile run (recompile, asm, help), also after moving the project and the
// application's tree elsewhere. Skips (GTEST_SKIP, with the reason) when the
// compilers are missing. Replay itself needs a GPU and is not run here.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/digest.h"
#include "common/file_util.h"
#include "daemon/import/reference_capture.h"
#include "daemon/store/store.h"
#include "daemon/store/store_test_util.h"
#include "gtest/gtest.h"
#include "reproducer/generator/generator.h"
#include "reproducer/generator/kernel_code.h"
#include "reproducer/generator/path_util.h"
#include "reproducer/generator/tool_runner.h"
#include "reproducer/replay/core/replay_test_util.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct TempDir {
  TempDir() {
    std::string t = (fs::temp_directory_path() / "kerncap-repro-test-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() {
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

ToolResult Exec(const std::vector<std::string>& argv, const std::string& cwd = "") {
  auto r = RunTool(argv, cwd, 300);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ToolResult{};
}

std::string Make() { return FindTool("make"); }

// Files under `dir`, relative, sorted.
std::vector<std::string> Tree(const std::string& dir) {
  std::vector<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// No absolute path in a Makefile, except the documented EXT_<n> defaults and
// the kerncap-nvrtc that was verified (NVRTC; recompile uses nvcc without it).
void ExpectNoAbsolutePaths(const std::string& makefile) {
  static const std::regex kAbs(R"((^|[\s='"])/[A-Za-z0-9_.])");
  for (absl::string_view line : absl::StrSplit(makefile, '\n')) {
    if (absl::StartsWith(line, "EXT_") || absl::StartsWith(line, "#") ||
        absl::StartsWith(line, "NVRTC ?= ")) {
      continue;
    }
    std::string l(line);
    EXPECT_FALSE(std::regex_search(l, kAbs)) << "absolute path in Makefile line: " << l;
  }
}

// The application: a kernel in src/, headers in include/ (one including
// another), a compile_commands.json in build/ as CMake writes it.
struct App {
  std::string root;
  std::string tu;
  explicit App(const std::string& dir, bool hip) : root(dir + "/app") {
    Write(root + "/include/detail/math.cuh",
          "#pragma once\n__device__ inline float kc_mul(float a, float b) { return a * b; }\n");
    Write(root + "/include/scale.cuh",
          "#pragma once\n#include \"detail/math.cuh\"\n#ifndef EXTRA\n#define EXTRA 0.0f\n#endif\n"
          "__device__ inline float scale_one(float x, float s) { return kc_mul(x, s) + EXTRA; }\n");
    Write(root + "/include/unused.cuh", "#pragma once\n");
    tu = root + (hip ? "/src/kern.hip" : "/src/kern.cu");
    Write(tu,
          "#include <stdint.h>\n#include \"scale.cuh\"\n"
          "extern \"C\" __global__ void scale(float* out, const float* in, float s, int n) {\n"
          "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "  if (i < n) out[i] = scale_one(in[i], s);\n}\n");
  }
  void WriteDatabase(const std::vector<std::string>& argv) {
    json args = argv;
    Write(root + "/build/compile_commands.json",
          json::array({{{"directory", root + "/build"},
                        {"file", absl::StrCat("../src/", fs::path(tu).filename().string())},
                        {"arguments", args}}})
              .dump(2));
  }
};

// A capture of `code` (one code object) as a .kcap; the kernel is `scale`
// unless named.
std::string MakeKcap(const std::string& dir, const std::string& code, bool hip,
                     const std::string& mangled = "scale", const std::string& demangled = "scale") {
  replay::testing::KcapBuilder b(1 << 16);
  v1::CaptureManifest m;
  m.set_format_version(1);
  m.set_capture_id("cap-0123456789ab");
  m.set_created_unix_ms(1767225600000);
  m.set_source(v1::SOURCE_AGENT);
  m.mutable_process()->set_pid(4242);
  m.mutable_process()->set_hostname("node17");
  m.mutable_process()->add_cmdline("./app");
  m.mutable_process()->add_cmdline("--n=1024");
  m.mutable_driver()->set_driver_version("580.159.04");
  m.mutable_kernel()->set_mangled_name(mangled);
  m.mutable_kernel()->set_demangled_name(demangled);
  m.mutable_kernel()->set_platform(hip ? v1::PLATFORM_HSA : v1::PLATFORM_CUDA);
  m.mutable_kernel()->set_arch(hip ? "gfx90a:xnack-" : "sm_90");
  m.mutable_device()->set_arch(hip ? "gfx90a" : "sm_90");
  for (uint32_t v : {4u, 1u, 1u}) m.mutable_launch()->add_grid(v);
  for (uint32_t v : {256u, 1u, 1u}) m.mutable_launch()->add_block(v);
  v1::CodeObject* co = m.add_code_objects();
  co->set_digest(Sha256(code).ToBytes());
  co->set_format(hip ? v1::CODE_OBJECT_HSACO : v1::CODE_OBJECT_CUBIN);
  *co->mutable_data() = b.Add(code);
  m.mutable_kernel()->set_code_object_digest(co->digest());
  const uint64_t out_va = 0x7f0000000000, in_va = 0x7f0000100000;
  for (uint64_t va : {out_va, in_va}) {
    v1::Region* r = m.mutable_pre()->add_regions();
    r->set_va(va);
    r->set_kind(v1::REGION_DEVICE);
    *r->mutable_data() = b.Add(std::string(4096, '\x01'));
  }
  std::string blob(24, '\0');
  uint64_t out_arg = out_va, in_arg = in_va + 64;
  float s = 2.0f;
  int n = 1024;
  std::memcpy(blob.data(), &out_arg, 8);
  std::memcpy(blob.data() + 8, &in_arg, 8);
  std::memcpy(blob.data() + 16, &s, 4);
  std::memcpy(blob.data() + 20, &n, 4);
  m.set_argument_blob(blob);
  struct A {
    uint32_t off, size;
    v1::ArgumentKind kind;
  };
  for (A a : {A{0, 8, v1::ARG_POINTER}, A{8, 8, v1::ARG_POINTER}, A{16, 4, v1::ARG_BY_VALUE},
              A{20, 4, v1::ARG_BY_VALUE}}) {
    v1::Argument* arg = m.add_arguments();
    arg->set_offset(a.off);
    arg->set_size(a.size);
    arg->set_kind(a.kind);
  }
  std::string path = dir + "/capture.kcap";
  absl::Status st = b.Write(path, m);
  EXPECT_TRUE(st.ok()) << st;
  return path;
}

json LoadProject(const std::string& dir) { return json::parse(Read(dir + "/kerncap.json")); }

class CudaGeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nvcc_ = FindTool("nvcc", {"/usr/local/cuda/bin"});
    if (nvcc_.empty())
      GTEST_SKIP() << "nvcc not found (CUDA toolkit missing): CUDA generator tests skipped";
    if (Make().empty()) GTEST_SKIP() << "make not found";
    app_ = std::make_unique<App>(tmp_.path, /*hip=*/false);
    app_->WriteDatabase({nvcc_, "-O3", "-lineinfo", "-I../include", "-DEXTRA=1.0f", "-gencode",
                         "arch=compute_90,code=sm_90", "-c", "../src/kern.cu", "-o", "kern.o"});
  }
  // Compiles the application's kernel the way its build would (from build/).
  std::string Cubin(bool lineinfo) {
    std::string out = tmp_.path + (lineinfo ? "/k.cubin" : "/k_noline.cubin");
    std::vector<std::string> argv = {nvcc_,           "-cubin",       "-arch=sm_90", "-O3",
                                     "-I../include",  "-DEXTRA=1.0f", "-o",          out,
                                     "../src/kern.cu"};
    if (lineinfo) argv.insert(argv.begin() + 3, "-lineinfo");
    ToolResult r = Exec(argv, app_->root + "/build");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Read(out);
  }
  GenerateOptions Options(const std::string& out) {
    GenerateOptions o;
    o.out_dir = out;
    o.tools.nvcc = nvcc_;
    return o;
  }
  ToolResult MakeIn(const std::string& dir, const std::vector<std::string>& targets) {
    std::vector<std::string> argv = {Make(), "-C", dir, "NVCC=" + nvcc_};
    argv.insert(argv.end(), targets.begin(), targets.end());
    return Exec(argv);
  }

  TempDir tmp_;
  std::string nvcc_;
  std::unique_ptr<App> app_;
};

TEST_F(CudaGeneratorTest, SourceProjectRecompilesAndIsRelocatable) {
  const std::string kcap = MakeKcap(tmp_.path, Cubin(true), false);
  const std::string out = tmp_.path + "/out/scale";
  auto r = GenerateProjectFromKcap(kcap, Options(out));
  ASSERT_TRUE(r.ok()) << r.status();
  json p = LoadProject(out);

  EXPECT_EQ(p["schema_version"], 1);
  EXPECT_EQ(p["kind"], "source");
  EXPECT_EQ(p["kernel"]["mangled"], "scale");
  EXPECT_EQ(p["kernel"]["platform"], "cuda");
  EXPECT_EQ(p["kernel"]["arch"], "sm_90");
  EXPECT_EQ(p["launch"]["grid"], json({4, 1, 1}));
  EXPECT_EQ(p["launch"]["block"], json({256, 1, 1}));
  // Pointer arguments resolved to their regions.
  EXPECT_EQ(p["arguments"][0]["pointer"]["region"]["base"], "0x7f0000000000");
  EXPECT_EQ(p["arguments"][0]["pointer"]["region"]["kind"], "device");
  EXPECT_EQ(p["arguments"][1]["pointer"]["region"]["base"], "0x7f0000100000");
  EXPECT_EQ(p["arguments"][1]["pointer"]["offset"], 64);
  EXPECT_FALSE(p["arguments"][2].contains("pointer"));
  EXPECT_EQ(p["provenance"]["capture_id"], "cap-0123456789ab");
  EXPECT_EQ(p["provenance"]["host"], "node17");
  EXPECT_EQ(p["provenance"]["pid"], 4242);
  EXPECT_EQ(p["provenance"]["command_line"], json({"./app", "--n=1024"}));
  EXPECT_EQ(p["provenance"]["driver"]["driver_version"], "580.159.04");
  EXPECT_EQ(p["provenance"]["captured_at"], "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(p["source"]["outcome"], "found");
  EXPECT_EQ(p["source"]["translation_unit"]["project"], "src/src/kern.cu");
  EXPECT_EQ(p["source"]["include_closure"]["method"], "preprocessor");
  EXPECT_EQ(p["compile"]["origin"], "compile_commands");
  EXPECT_EQ(p["code_object"]["file"], "code/kernel.cubin");
  for (const auto& w : p["compile"]["command"]) {
    EXPECT_FALSE(absl::StartsWith(w.get<std::string>(), "/")) << w;
  }
  const std::string cmd = p["compile"]["command"].dump();
  EXPECT_TRUE(absl::StrContains(cmd, "\"-Isrc/include\"")) << cmd;
  EXPECT_TRUE(absl::StrContains(cmd, "\"-DEXTRA=1.0f\"")) << cmd;
  EXPECT_TRUE(absl::StrContains(cmd, "\"-arch=sm_90\"")) << cmd;
  EXPECT_FALSE(absl::StrContains(cmd, "gencode")) << cmd;

  // src/: the unit and its application headers; no toolkit or system
  // header, nothing the kernel does not include.
  EXPECT_EQ(Tree(out + "/src"), (std::vector<std::string>{"include/detail/math.cuh",
                                                          "include/scale.cuh", "src/kern.cu"}));
  std::vector<std::string> listed;
  for (const auto& f : p["files"]) listed.push_back(f["path"]);
  std::vector<std::string> tree = Tree(out);
  tree.erase(std::find(tree.begin(), tree.end(), "kerncap.json"));
  EXPECT_EQ(listed, tree);
  EXPECT_EQ(Read(out + "/code/kernel.cubin"), Cubin(true));
  EXPECT_EQ(Read(out + "/capture.kcap"), Read(kcap));
  ExpectNoAbsolutePaths(Read(out + "/Makefile"));
  std::vector<std::string> siblings;
  for (const auto& e : fs::directory_iterator(tmp_.path + "/out")) {
    siblings.push_back(e.path().filename().string());
  }
  EXPECT_EQ(siblings, std::vector<std::string>{"scale"}) << "no temp folder left next to it";

  ToolResult help = MakeIn(out, {"help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  for (const char* t : {"recompile", "run", "validate", "bench", "asm", "ptx", "asm-build"}) {
    EXPECT_TRUE(absl::StrContains(help.out, t)) << t << " missing from make help:\n" << help.out;
  }
  ToolResult rc = MakeIn(out, {"recompile"});
  ASSERT_EQ(rc.exit_code, 0) << rc.out << rc.err;
  std::string built = Read(out + "/build/kernel.cubin");
  ASSERT_GT(built.size(), 4u);
  EXPECT_EQ(built.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_TRUE(absl::StrContains(built, "scale"));

  // Moved: the project elsewhere, the application's tree gone.
  const std::string moved = tmp_.path + "/elsewhere/deeper/proj";
  fs::create_directories(fs::path(moved).parent_path());
  fs::rename(out, moved);
  fs::rename(app_->root, tmp_.path + "/app-gone");
  ToolResult again = MakeIn(moved, {"clean", "recompile"});
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_EQ(Read(moved + "/build/kernel.cubin").substr(0, 4),
            "\x7f"
            "ELF");
  // The minimal unit (minimal_unit.h) verified for this kernel: kernel.cu
  // is the edit target and recompile compiles it alone.
  ASSERT_TRUE(p.contains("edit")) << p.dump(2);
  EXPECT_EQ(p["edit"]["file"], "kernel.cu") << p["edit"].dump(2);
  EXPECT_EQ(p["edit"]["unit"], "minimal");
  EXPECT_EQ(p["edit"]["minimal_unit"]["outcome"], "verified");
  EXPECT_EQ(p["edit"]["recompile_full"], "src/src/kern.cu");
  EXPECT_TRUE(absl::StrContains(rc.out, "recompile: kernel.cu, the minimal unit")) << rc.out;
  // Its compiler: kerncap-nvrtc, which built the kernel nvcc builds at
  // generation; make recompile ran it and built the captured kernel.
  EXPECT_EQ(p["edit"]["compiler"]["tool"], "nvrtc") << p["edit"].dump(2);
  EXPECT_EQ(p["edit"]["compiler"]["verified"], true);
  EXPECT_EQ(p["edit"]["compiler"]["reason"], "");
  EXPECT_GT(p["edit"]["compiler"]["seconds"]["nvrtc"].get<double>(), 0);
  EXPECT_GT(p["edit"]["compiler"]["seconds"]["nvcc"].get<double>(), 0);
  EXPECT_TRUE(absl::StrContains(rc.out, "the minimal unit, with kerncap-nvrtc")) << rc.out;
  EXPECT_TRUE(absl::StrContains(rc.out, "/kerncap-nvrtc --nvcc=")) << rc.out;
  auto captured_print = KernelFingerprint(Read(moved + "/code/kernel.cubin"), "scale");
  auto nvrtc_print = KernelFingerprint(built, "scale");
  ASSERT_TRUE(captured_print.ok() && nvrtc_print.ok());
  EXPECT_TRUE(*captured_print == *nvrtc_print) << DescribeDifference(*captured_print, *nvrtc_print);
  // COMPILER=nvcc keeps nvcc, building the same kernel.
  ToolResult with_nvcc = MakeIn(moved, {"clean", "recompile", "COMPILER=nvcc"});
  ASSERT_EQ(with_nvcc.exit_code, 0) << with_nvcc.out << with_nvcc.err;
  EXPECT_TRUE(absl::StrContains(with_nvcc.out, "the minimal unit, with nvcc (COMPILER=nvcc"))
      << with_nvcc.out;
  EXPECT_FALSE(absl::StrContains(with_nvcc.out, "kerncap-nvrtc --nvcc")) << with_nvcc.out;
  auto nvcc_print = KernelFingerprint(Read(moved + "/build/kernel.cubin"), "scale");
  ASSERT_TRUE(nvcc_print.ok());
  EXPECT_TRUE(*nvcc_print == *nvrtc_print);
  // Without the kerncap-nvrtc the Makefile names (a copy on another
  // machine): nvcc, saying so.
  ToolResult no_tool = MakeIn(moved, {"clean", "recompile", "NVRTC=/nonexistent/kerncap-nvrtc"});
  ASSERT_EQ(no_tool.exit_code, 0) << no_tool.out << no_tool.err;
  EXPECT_TRUE(absl::StrContains(no_tool.out, "with nvcc (kerncap-nvrtc not found")) << no_tool.out;
  ASSERT_EQ(MakeIn(moved, {"recompile"}).exit_code, 0);
  // An edit in src/ is what recompile-full compiles; recompile says it is
  // not in its build.
  Write(
      moved + "/src/include/detail/math.cuh",
      "#pragma once\n__device__ inline float kc_mul(float a, float b) { return a * b * 3.0f; }\n");
  // Newer than the build output whatever the file system's clock granularity.
  fs::last_write_time(moved + "/src/include/detail/math.cuh",
                      fs::file_time_type::clock::now() + std::chrono::seconds(5));
  ToolResult stale = MakeIn(moved, {"recompile"});
  EXPECT_EQ(stale.exit_code, 0) << stale.err;
  EXPECT_TRUE(absl::StrContains(stale.err, "edits under src/ need make recompile-full"))
      << stale.out << stale.err;
  ToolResult full = MakeIn(moved, {"recompile-full"});
  EXPECT_EQ(full.exit_code, 0) << full.err;
  EXPECT_TRUE(absl::StrContains(full.out, "src/src/kern.cu")) << full.out;
  // An edit of kernel.cu is what recompile compiles.
  std::string unit = Read(moved + "/kernel.cu");
  ASSERT_TRUE(absl::StrContains(unit, "__global__")) << unit;
  Write(moved + "/kernel.cu", unit + "\n// edited\n");
  fs::last_write_time(moved + "/kernel.cu",
                      fs::file_time_type::clock::now() + std::chrono::seconds(10));
  ToolResult edited = MakeIn(moved, {"recompile"});
  EXPECT_EQ(edited.exit_code, 0) << edited.err;
  EXPECT_TRUE(absl::StrContains(edited.out, "kerncap-nvrtc --nvcc"))
      << "edit did not trigger a rebuild:\n"
      << edited.out << Read(moved + "/Makefile");
  EXPECT_TRUE(absl::StrContains(edited.out, "kernel.cu")) << edited.out;
  // PTX from the source, rebuilt with ptxas.
  ToolResult ptx = MakeIn(moved, {"ptx"});
  ASSERT_EQ(ptx.exit_code, 0) << ptx.err;
  EXPECT_TRUE(absl::StrContains(Read(moved + "/build/kernel.ptx"), ".entry scale"));
  std::string ptxas = FindTool("ptxas", {"/usr/local/cuda/bin"});
  if (!ptxas.empty()) {
    ToolResult ab = Exec({Make(), "-C", moved, "PTXAS=" + ptxas, "asm-build"});
    EXPECT_EQ(ab.exit_code, 0) << ab.err;
    EXPECT_EQ(Read(moved + "/build/kernel.cubin").substr(0, 4),
              "\x7f"
              "ELF");
  }
}

TEST_F(CudaGeneratorTest, NvrtcThatCannotBeUsedFallsBackToNvccWithTheReason) {
  // A kerncap-nvrtc that refuses the flags as the real one does (exit 9,
  // the flag named): the minimal unit stays, compiled by nvcc, and the
  // project says why in kerncap.json and recompile's first line.
  const std::string fake = tmp_.path + "/bin/kerncap-nvrtc";
  Write(fake,
        "#!/bin/sh\necho 'kerncap-nvrtc: refused flag -Xfancy: not known to kerncap-nvrtc' >&2\n"
        "exit 9\n");
  fs::permissions(fake, fs::perms::owner_all);
  const std::string out = tmp_.path + "/out";
  GenerateOptions o = Options(out);
  o.tools.nvrtc = fake;
  auto r = GenerateProjectFromKcap(MakeKcap(tmp_.path, Cubin(true), false), o);
  ASSERT_TRUE(r.ok()) << r.status();
  json p = LoadProject(out);
  EXPECT_EQ(p["edit"]["unit"], "minimal") << p["edit"].dump(2);
  EXPECT_EQ(p["edit"]["compiler"]["tool"], "nvcc");
  EXPECT_EQ(p["edit"]["compiler"]["verified"], false);
  EXPECT_EQ(p["edit"]["compiler"]["reason"],
            "kerncap-nvrtc refused the flags: refused flag -Xfancy: not known to kerncap-nvrtc");
  EXPECT_TRUE(absl::StrContains(p["edit"]["note"].get<std::string>(), "alone with nvcc"));
  const std::string mk = Read(out + "/Makefile");
  EXPECT_FALSE(absl::StrContains(mk, "NVRTC ?=")) << mk;
  ToolResult rc = MakeIn(out, {"recompile"});
  ASSERT_EQ(rc.exit_code, 0) << rc.out << rc.err;
  EXPECT_TRUE(
      absl::StrContains(rc.out,
                        "the minimal unit, with nvcc (not NVRTC: kerncap-nvrtc refused the flags: "
                        "refused flag -Xfancy"))
      << rc.out;
  const std::string summary = SummarizeProject(*r);
  EXPECT_TRUE(absl::StrContains(summary, "with nvcc (not NVRTC: kerncap-nvrtc refused")) << summary;
}

TEST_F(CudaGeneratorTest, AsmGivesSass) {
  const std::string nvdisasm = FindTool("nvdisasm", {"/usr/local/cuda/bin"});
  const std::string cuobjdump = FindTool("cuobjdump", {"/usr/local/cuda/bin"});
  if (nvdisasm.empty() && cuobjdump.empty()) {
    GTEST_SKIP() << "neither nvdisasm nor cuobjdump is installed: SASS cannot be produced here";
  }
  const std::string out = tmp_.path + "/out";
  auto r = GenerateProjectFromKcap(MakeKcap(tmp_.path, Cubin(true), false), Options(out));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(absl::StrContains(Read(out + "/code/kernel.sass"), "scale"));
  std::vector<std::string> argv = {Make(), "-C", out};
  if (!nvdisasm.empty()) argv.push_back("NVDISASM=" + nvdisasm);
  if (!cuobjdump.empty()) argv.push_back("CUOBJDUMP=" + cuobjdump);
  argv.push_back("asm");
  ToolResult a = Exec(argv);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const std::string sass = Read(out + "/build/kernel.sass");
  EXPECT_TRUE(absl::StrContains(sass, "scale")) << sass.substr(0, 500);
  EXPECT_TRUE(std::regex_search(sass, std::regex(R"(\b(FMUL|FFMA|LDG|STG)\b)")))
      << sass.substr(0, 500);
}

TEST_F(CudaGeneratorTest, AsmWithoutDisassemblerSaysSo) {
  const std::string out = tmp_.path + "/out";
  auto r = GenerateProjectFromKcap(MakeKcap(tmp_.path, Cubin(true), false), Options(out));
  ASSERT_TRUE(r.ok()) << r.status();
  ToolResult a = Exec({Make(), "-C", out, "NVDISASM=/nonexistent/nvdisasm",
                       "CUOBJDUMP=/nonexistent/cuobjdump", "asm"});
  EXPECT_NE(a.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(a.err, "neither")) << a.err;
}

TEST_F(CudaGeneratorTest, NoLineInfoIsClassifiedAndBinaryOnly) {
  const std::string out = tmp_.path + "/out";
  auto r = GenerateProjectFromKcap(MakeKcap(tmp_.path, Cubin(false), false), Options(out));
  ASSERT_TRUE(r.ok()) << r.status();
  json p = LoadProject(out);
  EXPECT_EQ(p["kind"], "binary");
  EXPECT_EQ(p["source"]["outcome"], "no_line_info");
  EXPECT_TRUE(absl::StrContains(p["source"]["message"].get<std::string>(), "-lineinfo"));
  EXPECT_EQ(p["compile"]["present"], false);
  EXPECT_FALSE(fs::exists(out + "/src"));
  EXPECT_TRUE(fs::exists(out + "/code/kernel.cubin"));
  ToolResult help = MakeIn(out, {"help"});
  for (const char* t : {"run", "validate", "bench"}) EXPECT_TRUE(absl::StrContains(help.out, t));
  ToolResult rc = MakeIn(out, {"recompile"});
  EXPECT_NE(rc.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(rc.err, "no DWARF line table")) << rc.err;
  ExpectNoAbsolutePaths(Read(out + "/Makefile"));
}

TEST_F(CudaGeneratorTest, WrongDirectoryIsClassifiedAndHintRemaps) {
  const std::string kcap = MakeKcap(tmp_.path, Cubin(true), false);
  const std::string original_tu = app_->tu;
  const std::string moved = tmp_.path + "/checkout/app";
  fs::create_directories(tmp_.path + "/checkout");
  fs::rename(app_->root, moved);

  // No hint: the recorded paths are gone.
  GenerateOptions o = Options(tmp_.path + "/out1");
  auto r = GenerateProjectFromKcap(kcap, o);
  ASSERT_TRUE(r.ok()) << r.status();
  json p = LoadProject(tmp_.path + "/out1");
  EXPECT_EQ(p["source"]["outcome"], "sources_not_found");
  std::string msg = p["source"]["message"];
  EXPECT_TRUE(absl::StrContains(msg, original_tu)) << msg;
  EXPECT_TRUE(absl::StrContains(msg, "--source-dir")) << msg;

  // A wrong hint: named, with the paths tried.
  const std::string wrong = tmp_.path + "/elsewhere";
  fs::create_directories(wrong);
  o = Options(tmp_.path + "/out2");
  o.source_dir = wrong;
  r = GenerateProjectFromKcap(kcap, o);
  ASSERT_TRUE(r.ok()) << r.status();
  p = LoadProject(tmp_.path + "/out2");
  EXPECT_EQ(p["source"]["outcome"], "sources_not_found");
  msg = p["source"]["message"];
  EXPECT_TRUE(absl::StrContains(msg, wrong + "/src/kern.cu")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, "wrong folder")) << msg;

  // The right hint: remapped, compile command from the moved database.
  o = Options(tmp_.path + "/out3");
  o.source_dir = tmp_.path + "/checkout";
  r = GenerateProjectFromKcap(kcap, o);
  ASSERT_TRUE(r.ok()) << r.status();
  p = LoadProject(tmp_.path + "/out3");
  ASSERT_EQ(p["source"]["outcome"], "found") << p["source"].dump(2);
  EXPECT_EQ(p["source"]["remap"]["to"], tmp_.path + "/checkout");
  EXPECT_EQ(p["compile"]["origin"], "compile_commands");
  EXPECT_EQ(Tree(tmp_.path + "/out3/src"),
            (std::vector<std::string>{"app/include/detail/math.cuh", "app/include/scale.cuh",
                                      "app/src/kern.cu"}));
  ToolResult rc = MakeIn(tmp_.path + "/out3", {"recompile"});
  EXPECT_EQ(rc.exit_code, 0) << rc.out << rc.err;
}

TEST_F(CudaGeneratorTest, NoCompileCommandFallsBackToDocumentedDefault) {
  const std::string kcap = MakeKcap(tmp_.path, Cubin(true), false);
  fs::remove(app_->root + "/build/compile_commands.json");
  const std::string out = tmp_.path + "/out";
  auto r = GenerateProjectFromKcap(kcap, Options(out));
  ASSERT_TRUE(r.ok()) << r.status();
  json p = LoadProject(out);
  EXPECT_EQ(p["source"]["outcome"], "found");
  EXPECT_EQ(p["compile"]["origin"], "default");
  EXPECT_TRUE(
      absl::StrContains(p["compile"]["reason"].get<std::string>(), "no compile_commands.json"));
  EXPECT_EQ(p["source"]["include_closure"]["method"], "scan");
  const std::string cmd = p["compile"]["command"].dump();
  EXPECT_TRUE(absl::StrContains(cmd, "\"-Isrc/include\"")) << cmd;
  EXPECT_TRUE(absl::StrContains(cmd, "\"-lineinfo\"")) << cmd;
  ToolResult rc = MakeIn(out, {"recompile"});
  EXPECT_EQ(rc.exit_code, 0) << rc.out << rc.err;
}

TEST_F(CudaGeneratorTest, OutputFolderRulesAndFailedGenerationLeavesNothing) {
  const std::string kcap = MakeKcap(tmp_.path, Cubin(true), false);
  const std::string out = tmp_.path + "/out";
  Write(out + "/keep.txt", "mine");
  auto r = GenerateProjectFromKcap(kcap, Options(out));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Tree(out), std::vector<std::string>{"keep.txt"});
  GenerateOptions o = Options(out);
  o.force = true;
  r = GenerateProjectFromKcap(kcap, o);  // not a reproducer: --force does not apply
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_EQ(Tree(out), std::vector<std::string>{"keep.txt"});
  fs::remove(out + "/keep.txt");
  ASSERT_TRUE(GenerateProjectFromKcap(kcap, Options(out)).ok());
  Write(out + "/src/src/kern.cu", "edited");
  r = GenerateProjectFromKcap(kcap, o);  // an earlier reproducer is replaced
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(Read(out + "/src/src/kern.cu"), "edited");
  EXPECT_TRUE(fs::exists(out + "/kerncap.json"));

  // A capture without code objects fails after the stage began: nothing at
  // --out, no temp folder next to it.
  replay::testing::KcapBuilder b(1 << 16);
  v1::CaptureManifest m;
  m.set_capture_id("cap-000000000001");
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  m.mutable_kernel()->set_arch("sm_90");
  ASSERT_TRUE(b.Write(tmp_.path + "/bad.kcap", m).ok());
  const std::string out2 = tmp_.path + "/fresh/out2";
  r = GenerateProjectFromKcap(tmp_.path + "/bad.kcap", Options(out2));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "no code object")) << r.status();
  EXPECT_FALSE(fs::exists(out2));
  EXPECT_TRUE(Tree(tmp_.path + "/fresh").empty());
}

// CMake's CUDA rules (Unix Makefiles generator): include folders and
// defines in an options file next to the target's objects, named relative to
// the build folder. They reach the recompile command.
TEST_F(CudaGeneratorTest, OptionsFileOfCMakeIsExpanded) {
  Write(app_->root + "/build/CMakeFiles/kern.dir/includes_CUDA.rsp",
        "-I\"" + app_->root + "/include\" --options-file CMakeFiles/kern.dir/defines.rsp\n");
  Write(app_->root + "/build/CMakeFiles/kern.dir/defines.rsp", "-DEXTRA=1.0f\n");
  app_->WriteDatabase({nvcc_, "-O3", "-lineinfo", "--options-file",
                       "CMakeFiles/kern.dir/includes_CUDA.rsp", "-gencode",
                       "arch=compute_90,code=sm_90", "-c", "../src/kern.cu", "-o", "kern.o"});
  const std::string out = tmp_.path + "/out";
  auto r = GenerateProjectFromKcap(MakeKcap(tmp_.path, Cubin(true), false), Options(out));
  ASSERT_TRUE(r.ok()) << r.status();
  json p = LoadProject(out);
  ASSERT_EQ(p["source"]["outcome"], "found") << p["source"].dump(2);
  EXPECT_EQ(p["source"]["include_closure"]["method"], "preprocessor")
      << p["source"]["include_closure"].dump();
  const std::string cmd = p["compile"]["command"].dump();
  EXPECT_TRUE(absl::StrContains(cmd, "\"-Isrc/include\"")) << cmd;
  EXPECT_TRUE(absl::StrContains(cmd, "\"-DEXTRA=1.0f\"")) << cmd;
  EXPECT_FALSE(absl::StrContains(cmd, "options-file")) << cmd;
  ASSERT_EQ(p["compile"]["option_files"].size(), 2u) << p["compile"].dump(2);
  EXPECT_EQ(p["compile"]["option_files"][0]["expanded"], true);
  EXPECT_EQ(Tree(out + "/src"), (std::vector<std::string>{"include/detail/math.cuh",
                                                          "include/scale.cuh", "src/kern.cu"}));
  ToolResult rc = MakeIn(out, {"recompile"});
  EXPECT_EQ(rc.exit_code, 0) << rc.out << rc.err;

  // An options file that is gone: said in kerncap.json and the warnings.
  fs::remove(app_->root + "/build/CMakeFiles/kern.dir/defines.rsp");
  const std::string out2 = tmp_.path + "/out2";
  r = GenerateProjectFromKcap(MakeKcap(tmp_.path, Cubin(true), false), Options(out2));
  ASSERT_TRUE(r.ok()) << r.status();
  p = LoadProject(out2);
  ASSERT_EQ(p["compile"]["option_files"].size(), 2u);
  EXPECT_EQ(p["compile"]["option_files"][1]["expanded"], false);
  EXPECT_TRUE(absl::StrContains(p["compile"]["option_files"][1]["error"].get<std::string>(),
                                "cannot be read"));
  EXPECT_TRUE(absl::StrContains(p["warnings"].dump(), "defines.rsp")) << p["warnings"].dump();
}

// A template kernel defined in a header that two units include, each
// instantiating it differently: the line table names only the header; the
// unit is the entry whose device compile gives the captured kernel.
TEST_F(CudaGeneratorTest, HeaderKernelUnitIsTheEntryThatInstantiatesIt) {
  Write(app_->root + "/include/scale_kernel.cuh",
        "#pragma once\n#include \"scale.cuh\"\n"
        "template <int kMul>\n__global__ void scale(float* out, const float* in, float s, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) out[i] = scale_one(in[i], s) * kMul;\n}\n");
  for (int k : {1, 2}) {
    Write(absl::StrCat(app_->root, "/src/use", k, ".cu"),
          absl::StrCat("#include \"scale_kernel.cuh\"\nvoid run", k,
                       "(float* o, const float* i) { scale<", k, "><<<1, 32>>>(o, i, 1.0f, 32); }\n"));
  }
  json entries = json::array();
  for (int k : {1, 2}) {
    entries.push_back({{"directory", app_->root + "/build"},
                       {"file", absl::StrCat("../src/use", k, ".cu")},
                       {"arguments", {nvcc_, "-O3", "-lineinfo", "-I../include", "-DEXTRA=1.0f",
                                      "-c", absl::StrCat("../src/use", k, ".cu"), "-o",
                                      absl::StrCat("use", k, ".o")}}});
  }
  Write(app_->root + "/build/compile_commands.json", entries.dump(2));
  const std::string cubin = tmp_.path + "/use2.cubin";
  ToolResult c = Exec({nvcc_, "-cubin", "-arch=sm_90", "-O3", "-lineinfo", "-I../include",
                       "-DEXTRA=1.0f", "-o", cubin, "../src/use2.cu"},
                      app_->root + "/build");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const std::string mangled = "_Z5scaleILi2EEvPfPKffi";
  ASSERT_TRUE(absl::StrContains(Read(cubin), mangled));
  const std::string out = tmp_.path + "/out";
  GenerateOptions o = Options(out);
  o.source_dir = app_->root;
  auto r = GenerateProjectFromKcap(
      MakeKcap(tmp_.path, Read(cubin), false, mangled,
               "void scale<2>(float*, float const*, float, int)"),
      o);
  ASSERT_TRUE(r.ok()) << r.status();
  json p = LoadProject(out);
  ASSERT_EQ(p["source"]["outcome"], "found") << p["source"].dump(2);
  for (const auto& f : p["source"]["line_table_files"]) {
    EXPECT_FALSE(absl::EndsWith(f.get<std::string>(), ".cu")) << "the line table names " << f;
  }
  EXPECT_EQ(p["source"]["translation_unit"]["project"], "src/src/use2.cu") << p["source"].dump(2);
  EXPECT_EQ(p["source"]["unit_selection"]["method"], "device_compile")
      << p["source"]["unit_selection"].dump(2);
  EXPECT_EQ(p["source"]["unit_selection"]["ambiguous"], false);
  EXPECT_EQ(p["compile"]["origin"], "compile_commands");
  ToolResult rc = MakeIn(out, {"recompile"});
  ASSERT_EQ(rc.exit_code, 0) << rc.out << rc.err;
  EXPECT_TRUE(absl::StrContains(Read(out + "/build/kernel.cubin"), mangled));
}

// A .cu #included by another .cu that defines the macro it needs: the unit
// is the outer file (the database's entry), the inner one is copied with it.
TEST_F(CudaGeneratorTest, UnitIncludedByAnotherUnitIsCompiledThroughIt) {
  Write(app_->root + "/src/kernels/scale_impl.cu",
        "extern \"C\" __global__ void scale(float* out, const float* in, float s, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) out[i] = in[i] * s * KC_FACTOR;\n}\n");
  Write(app_->root + "/src/main.cu",
        "#define KC_FACTOR 3.0f\n#include \"kernels/scale_impl.cu\"\nint main() { return 0; }\n");
  json entries = json::array({{{"directory", app_->root + "/build"},
                               {"file", "../src/main.cu"},
                               {"command", nvcc_ + " -O2 -lineinfo -o main ../src/main.cu"}}});
  Write(app_->root + "/build/compile_commands.json", entries.dump(2));
  const std::string cubin = tmp_.path + "/main.cubin";
  ToolResult c = Exec({nvcc_, "-cubin", "-arch=sm_90", "-O2", "-lineinfo", "-o", cubin,
                       "../src/main.cu"},
                      app_->root + "/build");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const std::string out = tmp_.path + "/out";
  auto r = GenerateProjectFromKcap(MakeKcap(tmp_.path, Read(cubin), false), Options(out));
  ASSERT_TRUE(r.ok()) << r.status();
  json p = LoadProject(out);
  ASSERT_EQ(p["source"]["outcome"], "found") << p["source"].dump(2);
  EXPECT_EQ(p["source"]["translation_unit"]["project"], "src/src/main.cu") << p["source"].dump(2);
  EXPECT_EQ(p["compile"]["origin"], "compile_commands");
  EXPECT_EQ(p["source"]["headers"], json({"src/src/kernels/scale_impl.cu"}));
  ToolResult rc = MakeIn(out, {"recompile"});
  ASSERT_EQ(rc.exit_code, 0) << rc.out << rc.err;
}

// The toolkit that built the cubin (its notes) is recorded; make recompile
// says when the nvcc it runs is another version.
TEST_F(CudaGeneratorTest, ToolkitIsRecordedAndRecompileSaysWhenItDiffers) {
  ToolResult v = Exec({nvcc_, "--version"});
  std::smatch m;
  ASSERT_TRUE(std::regex_search(v.out, m, std::regex(R"(release ([0-9.]+), V([0-9.]+))")))
      << v.out;
  const std::string version = m[2].str();
  const std::string out = tmp_.path + "/out";
  auto r = GenerateProjectFromKcap(MakeKcap(tmp_.path, Cubin(true), false), Options(out));
  ASSERT_TRUE(r.ok()) << r.status();
  json p = LoadProject(out);
  const json& t = p["toolkit"];
  ASSERT_TRUE(t["application"].is_object()) << t.dump(2);
  EXPECT_EQ(t["application"]["tool"], "ptxas");
  EXPECT_EQ(t["application"]["version"], version);
  EXPECT_EQ(t["application"]["release"], m[1].str());
  EXPECT_EQ(t["application"]["ptx_arch"], "compute_90");
  EXPECT_TRUE(absl::StrContains(t["application"]["tool_options"].get<std::string>(), "sm_90"));
  EXPECT_EQ(t["reproducer"]["version"], version);
  EXPECT_EQ(t["same"], true);
  EXPECT_TRUE(absl::StrContains(Read(out + "/Makefile"), "APP_CUDA_VERSION := " + version));
  ToolResult same = MakeIn(out, {"recompile"});
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_FALSE(absl::StrContains(same.err, "notice:")) << same.err;
  // Another toolkit's nvcc (its --version says so; it compiles the same).
  const std::string other = tmp_.path + "/other-nvcc";
  Write(other, "#!/bin/sh\nif [ \"$1\" = --version ]; then\n"
               "  echo 'Cuda compilation tools, release 12.4, V12.4.131'; exit 0\nfi\n"
               "exec " + nvcc_ + " \"$@\"\n");
  fs::permissions(other, fs::perms::owner_all);
  ToolResult diff = Exec({Make(), "-C", out, "NVCC=" + other, "clean", "recompile"});
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_TRUE(absl::StrContains(diff.err, "notice: " + other + " is CUDA 12.4.131 but the "
                                          "application was built with CUDA " + version))
      << diff.err;
  // That nvcc has no libnvrtc beside it: kerncap-nvrtc says so (exit 3) and
  // recompile falls back to it.
  EXPECT_TRUE(absl::StrContains(diff.err, "notice: kerncap-nvrtc found no NVRTC for " + other))
      << diff.err;
  EXPECT_TRUE(absl::StrContains(diff.out, "with nvcc (COMPILER=nvcc")) << diff.out;
}

// kerncapctl repro on a .kcap: generated locally, no daemon.
TEST_F(CudaGeneratorTest, KerncapctlReproOnKcapFile) {
  const char* build = std::getenv("KERNCAP_BUILD_DIR");
  const std::string ctl = build == nullptr ? "" : std::string(build) + "/bin/kerncapctl";
  if (ctl.empty() || !FileExists(ctl)) GTEST_SKIP() << "kerncapctl binary not built";
  const std::string kcap = MakeKcap(tmp_.path, Cubin(true), false);
  const std::string out = tmp_.path + "/proj";
  // No daemon is running on this socket: a .kcap must not need one.
  ToolResult r =
      Exec({ctl, "--socket=" + tmp_.path + "/none.sock", "--json", "repro", kcap, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["out_dir"], out);
  EXPECT_EQ(j["project"]["source"]["outcome"], "found");
  EXPECT_TRUE(FileExists(out + "/Makefile"));
  r = Exec({ctl, "repro", kcap, "--out", out});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "--force")) << r.err;
  r = Exec({ctl, "repro", kcap, "--out", out, "--force", "--binary"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "reproducer written to")) << r.out;
  EXPECT_EQ(LoadProject(out)["kind"], "binary");
}

class HipGeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clang_ = FindTool("clang-15");
    if (clang_.empty()) clang_ = FindTool("clang", {"/usr/lib/llvm-15/bin"});
    bitcode_ = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode";
    if (clang_.empty() || !FileExists("/usr/include/hip/hip_runtime.h") ||
        !FileExists(bitcode_ + "/ockl.bc")) {
      GTEST_SKIP() << "clang-15, HIP headers or ROCm device libraries missing: HIP generator "
                      "test skipped";
    }
    if (Make().empty()) GTEST_SKIP() << "make not found";
    app_ = std::make_unique<App>(tmp_.path, /*hip=*/true);
  }
  std::vector<std::string> Flags() {
    return {"-O2",
            "-g",
            "-nogpuinc",
            "-include",
            "/usr/include/hip/hip_runtime.h",
            "--rocm-device-lib-path=" + bitcode_,
            "-B" + DirName(clang_),
            "-I../include",
            "-DEXTRA=1.0f"};
  }
  // The application's build of src/kern.hip: a device code object with -g
  // (line table) at `hsaco`, its command recorded in compile_commands.json.
  // Empty on failure (the compiler's error is reported).
  std::string BuildCodeObject(const std::string& hsaco) {
    std::vector<std::string> argv = {clang_, "-x", "hip", "--cuda-device-only",
                                     "--no-gpu-bundle-output", "--offload-arch=gfx90a"};
    for (const std::string& f : Flags()) argv.push_back(f);
    std::vector<std::string> db = argv;
    db.insert(db.end(), {"-c", "../src/kern.hip", "-o", "kern.o"});
    app_->WriteDatabase(db);
    argv.insert(argv.end(), {"-o", hsaco, "../src/kern.hip"});
    ToolResult c = Exec(argv, app_->root + "/build");
    EXPECT_EQ(c.exit_code, 0) << c.err;
    return c.exit_code == 0 ? hsaco : "";
  }
  TempDir tmp_;
  std::string clang_, bitcode_;
  std::unique_ptr<App> app_;
};

TEST_F(HipGeneratorTest, RecompilesThroughVfsOverlayAfterMove) {
  const std::string hsaco = BuildCodeObject(tmp_.path + "/k.hsaco");
  ASSERT_FALSE(hsaco.empty());

  const std::string out = tmp_.path + "/out";
  GenerateOptions o;
  o.out_dir = out;
  o.tools.clang = clang_;
  auto r = GenerateProjectFromKcap(MakeKcap(tmp_.path, Read(hsaco), true), o);
  ASSERT_TRUE(r.ok()) << r.status();
  json p = LoadProject(out);
  EXPECT_EQ(p["kernel"]["platform"], "hip");
  EXPECT_EQ(p["kernel"]["arch"], "gfx90a");
  ASSERT_EQ(p["source"]["outcome"], "found") << p["source"].dump(2);
  EXPECT_EQ(p["source"]["translation_unit"]["project"], "src/src/kern.hip");
  EXPECT_EQ(p["compile"]["origin"], "compile_commands");
  EXPECT_EQ(Tree(out + "/src"), (std::vector<std::string>{"include/detail/math.cuh",
                                                          "include/scale.cuh", "src/kern.hip"}));
  EXPECT_EQ(p["code_object"]["file"], "code/kernel.hsaco");
  const std::string cmd = p["compile"]["command"].dump();
  EXPECT_TRUE(absl::StrContains(cmd, "\"-include\",\"hip/hip_runtime.h\"")) << cmd;
  EXPECT_TRUE(absl::StrContains(cmd, "--rocm-device-lib-path=$(EXT_")) << cmd;
  EXPECT_TRUE(absl::StrContains(cmd, "\"-ivfsoverlay\",\"vfs.yaml\"")) << cmd;
  if (!FindTool("llvm-objdump-15").empty()) {
    EXPECT_TRUE(absl::StrContains(Read(out + "/code/kernel.s"), "scale"));
  }

  // The overlay: original paths onto src/, relative to the overlay file.
  const std::string yaml = Read(out + "/vfs.yaml");
  EXPECT_TRUE(absl::StrContains(yaml, "'overlay-relative': 'true'")) << yaml;
  EXPECT_TRUE(absl::StrContains(yaml, "'external-contents': \"src/include/scale.cuh\"") ||
              absl::StrContains(yaml, "'external-contents': \"/src/include/scale.cuh\""))
      << yaml;
  EXPECT_TRUE(absl::StrContains(yaml, app_->root + "/include")) << yaml;
  ExpectNoAbsolutePaths(Read(out + "/Makefile"));

  const std::string moved = tmp_.path + "/far/away/proj";
  fs::create_directories(fs::path(moved).parent_path());
  fs::rename(out, moved);
  fs::rename(app_->root, tmp_.path + "/app-gone");
  ToolResult rc = Exec({Make(), "-C", moved, "CLANG=" + clang_, "recompile"});
  ASSERT_EQ(rc.exit_code, 0) << rc.out << rc.err;
  const std::string built = Read(moved + "/build/kernel.hsaco");
  ASSERT_GT(built.size(), 20u);
  EXPECT_EQ(built.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(static_cast<unsigned char>(built[18]), 224) << "EM_AMDGPU expected";
  EXPECT_TRUE(absl::StrContains(built, "scale"));
  // The overlay itself: the original path of a header reads the copy.
  Write(tmp_.path + "/probe.c",
        absl::StrCat("#include \"", app_->root, "/include/detail/math.cuh\"\n"));
  ToolResult pp = Exec(
      {clang_, "-E", "-P", "-D__device__=", "-ivfsoverlay", "vfs.yaml", tmp_.path + "/probe.c"},
      moved);
  EXPECT_EQ(pp.exit_code, 0) << pp.err;
  EXPECT_TRUE(absl::StrContains(pp.out, "kc_mul")) << pp.out;
  // The assembly loop starts with make asm (AsmBuildSplicesTheEditedKernelBack).
  ToolResult ab = Exec({Make(), "-C", moved, "asm-build"});
  EXPECT_EQ(ab.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(ab.err, "no build/module.s yet: run make asm first")) << ab.err;
}

// make asm cuts the captured kernel out of clang -S of the unit (which also
// defines another kernel and a device function); the edited copy goes back
// in with make asm-build, assembled and linked into build/kernel.hsaco.
TEST_F(HipGeneratorTest, AsmBuildSplicesTheEditedKernelBack) {
  const char* build = std::getenv("KERNCAP_BUILD_DIR");
  const std::string kasm = build == nullptr ? "" : std::string(build) + "/bin/kerncap-asm";
  if (kasm.empty() || !FileExists(kasm)) GTEST_SKIP() << "kerncap-asm binary not built";
  std::string objdump = FindTool("llvm-objdump-15");
  if (objdump.empty()) objdump = FindTool("llvm-objdump", {"/usr/lib/llvm-15/bin"});
  if (objdump.empty()) GTEST_SKIP() << "llvm-objdump missing: the rebuilt code object cannot be read";
  Write(app_->tu, Read(app_->tu) +
                      "__device__ __attribute__((noinline)) float kc_twice(float x) {\n"
                      "  return 2.0f * x;\n}\n"
                      "extern \"C\" __global__ void shift(float* p, int n) {\n"
                      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "  if (i < n) p[i] = kc_twice(p[i]) + 1.0f;\n}\n");
  const std::string hsaco = BuildCodeObject(tmp_.path + "/k.hsaco");
  ASSERT_FALSE(hsaco.empty());
  const std::string out = tmp_.path + "/proj";
  GenerateOptions o;
  o.out_dir = out;
  o.tools.clang = clang_;
  auto r = GenerateProjectFromKcap(MakeKcap(tmp_.path, Read(hsaco), true), o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(LoadProject(out)["source"]["outcome"], "found");
  auto make = [&](const std::string& target) {
    return Exec({Make(), "--no-print-directory", "-C", out, "CLANG=" + clang_,
                 "KERNCAP_ASM=" + kasm, "LLVM_OBJDUMP=" + objdump, target});
  };
  // The statements of a file (comment lines and blanks dropped).
  auto statements = [](const std::string& text) {
    std::vector<std::string> v;
    for (absl::string_view l : absl::StrSplit(text, '\n')) {
      absl::string_view t = absl::StripAsciiWhitespace(l);
      if (!t.empty() && t[0] != ';') v.emplace_back(l);
    }
    return v;
  };
  auto has = [](const std::vector<std::string>& lines, const std::string& needle) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return absl::StrContains(l, needle); });
  };

  ToolResult a = make("asm");
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  EXPECT_TRUE(absl::StrContains(Read(out + "/build/kernel.s"), "<scale>:"));
  const std::string module = Read(out + "/build/module.s");
  EXPECT_TRUE(absl::StrContains(module, "\nshift:")) << "the module holds the whole unit";
  const std::string cut = Read(out + "/asm/kernel.s");
  const std::vector<std::string> st = statements(cut);
  EXPECT_TRUE(has(st, "scale:")) << cut;
  EXPECT_TRUE(has(st, ".amdhsa_kernel scale")) << cut;
  EXPECT_TRUE(has(st, "scale.kd")) << "the kernel's metadata item:\n" << cut;
  for (const char* other : {"shift", "kc_twice", "amdhsa.target", ".amdgpu_metadata"}) {
    EXPECT_FALSE(has(st, other)) << other << " in asm/kernel.s:\n" << cut;
  }

  // The edit: two instructions at the kernel's entry, one naming v60.
  std::vector<std::string> lines = absl::StrSplit(cut, '\n');
  auto label = std::find_if(lines.begin(), lines.end(),
                            [](const std::string& l) { return absl::StartsWith(l, "scale:"); });
  ASSERT_NE(label, lines.end());
  const size_t label_line = static_cast<size_t>(label - lines.begin()) + 1;  // 1-based
  lines.insert(label + 1, {"\ts_nop 7", "\tv_mov_b32_e32 v60, 0"});
  const std::string edited = absl::StrJoin(lines, "\n");
  Write(out + "/asm/kernel.s", edited);
  ToolResult b = make("asm-build");
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_TRUE(absl::StrContains(b.err, ".amdhsa_next_free_vgpr")) << b.err;
  EXPECT_TRUE(absl::StrContains(Read(out + "/build/module.edited.s"),
                                ".amdhsa_next_free_vgpr 61\n"));
  const std::string built = Read(out + "/build/kernel.hsaco");
  ASSERT_GT(built.size(), 20u);
  EXPECT_EQ(static_cast<unsigned char>(built[18]), 224) << "EM_AMDGPU expected";
  ToolResult dis = Exec({objdump, "-d", "-t", "--mcpu=gfx90a", out + "/build/kernel.hsaco"});
  ASSERT_EQ(dis.exit_code, 0) << dis.err;
  const size_t at = dis.out.find("<scale>:\n");
  ASSERT_NE(at, std::string::npos) << dis.out;
  std::vector<std::string> body = absl::StrSplit(dis.out.substr(at), '\n');
  ASSERT_GT(body.size(), 3u);
  EXPECT_TRUE(absl::StrContains(body[1], "s_nop 7")) << body[1];
  EXPECT_TRUE(absl::StrContains(body[2], "v_mov_b32_e32 v60, 0")) << body[2];
  for (const char* sym : {"<shift>:", "scale.kd", "shift.kd", "kc_twice"}) {
    EXPECT_TRUE(absl::StrContains(dis.out, sym)) << sym << " missing from the rebuilt module";
  }
  // The metadata note: both kernels, the edited one's count raised.
  std::string readelf = FindTool("llvm-readelf-15");
  if (readelf.empty()) readelf = FindTool("llvm-readelf", {"/usr/lib/llvm-15/bin"});
  if (!readelf.empty()) {
    ToolResult notes = Exec({readelf, "--notes", out + "/build/kernel.hsaco"});
    ASSERT_EQ(notes.exit_code, 0) << notes.err;
    const size_t item = notes.out.find("scale.kd");
    ASSERT_NE(item, std::string::npos) << notes.out;
    const std::string rest = notes.out.substr(item, notes.out.find("\n  - ", item) - item);
    EXPECT_TRUE(std::regex_search(rest, std::regex(R"(\.vgpr_count: +61\n)"))) << notes.out;
    EXPECT_TRUE(absl::StrContains(notes.out, "shift.kd")) << notes.out;
  }

  // make asm again: the disassembly is of the rebuilt object, the edit is kept.
  a = make("asm");
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  EXPECT_TRUE(absl::StrContains(a.out, "asm/kernel.s exists: kept")) << a.out;
  EXPECT_EQ(Read(out + "/asm/kernel.s"), edited);
  EXPECT_TRUE(absl::StrContains(Read(out + "/build/kernel.s"), "s_nop 7"));
  EXPECT_FALSE(absl::StrContains(Read(out + "/build/kernel.orig.s"), "s_nop 7"));

  // Broken edits: an unknown instruction is reported at its asm/kernel.s
  // line; a removed marker is named.
  std::vector<std::string> bad = lines;
  bad.insert(bad.begin() + static_cast<long>(label_line), "\tv_no_such_instruction v0");
  Write(out + "/asm/kernel.s", absl::StrJoin(bad, "\n"));
  ToolResult e = make("asm-build");
  EXPECT_NE(e.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(e.err, absl::StrCat("asm/kernel.s:", label_line + 1, ":")))
      << e.err;
  EXPECT_TRUE(absl::StrContains(e.err, "error")) << e.err;
  Write(out + "/asm/kernel.s",
        absl::StrReplaceAll(edited, {{";;kerncap-end function scale\n", ""}}));
  e = make("asm-build");
  EXPECT_NE(e.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(e.err, "kerncap-asm: asm/kernel.s:")) << e.err;
  EXPECT_TRUE(absl::StrContains(e.err, ";;kerncap-end function scale marker is missing")) << e.err;
}

// A capture folder of the reference Kerncap tool, imported into a store
// (daemon/import), then generated from the store as kerncapd does.
TEST_F(HipGeneratorTest, ImportedReferenceCaptureFindsSources) {
  const std::string folder = tmp_.path + "/ref/capture";
  fs::create_directories(folder + "/memory");
  ASSERT_FALSE(BuildCodeObject(folder + "/kernel.hsaco").empty());
  json slot = {{"offset", 0}, {"size", 8}, {"value_kind", "global_buffer"}, {"name", "out"}};
  Write(folder + "/metadata.json", json({{"kernel_name", "scale [clone .kd]"},
                                         {"kernel_symbol", "scale"},
                                         {"gpu_arch", "gfx90a"},
                                         {"grid", {{"x", 1024}, {"y", 1}, {"z", 1}}},
                                         {"block", {{"x", 256}, {"y", 1}, {"z", 1}}},
                                         {"kernarg_slots", {slot}}})
                                       .dump());
  Write(folder + "/dispatch.json", json({{"agent_name", "gfx90a"},
                                         {"grid", {1024, 1, 1}},
                                         {"block", {256, 1, 1}},
                                         {"kernarg_size", 8},
                                         {"mangled_name", "scale"}})
                                       .dump());
  Write(folder + "/memory_regions.json",
        json({{"regions", {{{"base", "0x7f0000000000"}, {"size", 4096}}}}}).dump());
  Write(folder + "/memory/region_7f0000000000.bin", std::string(4096, '\x02'));
  std::string kernarg(8, '\0');
  uint64_t va = 0x7f0000000100;
  std::memcpy(kernarg.data(), &va, 8);
  Write(folder + "/kernarg_raw.bin", kernarg);
  Write(folder + "/capture_complete", "ok\n");

  auto st = store::Store::Open(store::testing::SmallOptions(tmp_.path + "/store"));
  ASSERT_TRUE(st.ok()) << st.status();
  store::Store& store = **st;
  auto id = import::ImportReferenceCapture(folder, store);
  ASSERT_TRUE(id.ok()) << id.status();
  CaptureAccess access;
  auto m = store.GetManifest(*id);
  ASSERT_TRUE(m.ok());
  access.manifest = *m;
  access.read_bytes = [&store](const v1::ChunkList& l) -> absl::StatusOr<std::string> {
    std::string b(l.size(), '\0');
    absl::Status rs = store.ReadChunkList(l, b.data(), b.size());
    if (!rs.ok()) return rs;
    return b;
  };
  access.write_kcap = [](const std::string& path) { return absl::OkStatus(); };
  GenerateOptions o;
  o.out_dir = tmp_.path + "/out";
  o.tools.clang = clang_;
  auto r = GenerateProject(access, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->project["provenance"]["capture_source"], "SOURCE_REFERENCE_IMPORT");
  EXPECT_EQ(r->project["kernel"]["arch"], "gfx90a");
  EXPECT_EQ(r->project["source"]["outcome"], "found") << r->project["source"].dump(2);
  EXPECT_EQ(r->project["arguments"][0]["pointer"]["offset"], 0x100);
  ToolResult rc = Exec({Make(), "-C", o.out_dir, "CLANG=" + clang_, "recompile"});
  EXPECT_EQ(rc.exit_code, 0) << rc.out << rc.err;
}

}  // namespace
}  // namespace kerncap::repro
