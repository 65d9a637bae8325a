#include "reproducer/generator/build_file.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "reproducer/generator/tool_runner.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;

// As generator_e2e_test: no absolute path outside EXT_<n> defaults and comments.
void ExpectNoAbsolutePaths(const std::string& makefile) {
  static const std::regex kAbs(R"((^|[\s='"])/[A-Za-z0-9_.])");
  for (absl::string_view line : absl::StrSplit(makefile, '\n')) {
    if (absl::StartsWith(line, "EXT_") || absl::StartsWith(line, "#")) continue;
    std::string l(line);
    EXPECT_FALSE(std::regex_search(l, kAbs)) << "absolute path in Makefile line: " << l;
  }
}

MakefileSpec CudaSpec() {
  MakefileSpec s;
  s.title = "Reproducer of scale";
  s.arch = "sm_90";
  s.captured_code = "code/kernel.cubin";
  s.has_source = true;
  s.source = "src/k.cu";
  s.headers = {"src/a.cuh"};
  s.flags = {"-O3", "-Isrc", "--x=$(EXT_1)"};
  s.external = {{"EXT_1", "/opt/x"}};
  return s;
}

TEST(BuildFileTest, MakeWordEscapes) {
  EXPECT_EQ(MakeWord("-DX=1"), "-DX=1");
  EXPECT_EQ(MakeWord("--p=$(EXT_1)"), "--p=$(EXT_1)");
  EXPECT_EQ(MakeWord("-DC=$HOME"), "'-DC=$$HOME'");
  EXPECT_EQ(MakeWord("-DN=#x"), "'-DN=\\#x'");
}

TEST(BuildFileTest, CudaSourceProject) {
  std::string mk = BuildMakefile(CudaSpec()).value();
  for (const char* needle :
       {"NVCC ?= nvcc", "KERNCAP_REPLAY ?= kerncap-replay", "EXT_1 ?= /opt/x", "ARCH := sm_90",
        "$(NVCC) -cubin -arch=$(ARCH) $(FLAGS) -o $@ $(SRC)", "FLAGS := -O3 -Isrc --x=$(EXT_1)",
        "$(BUILT_CODE): $(SRC) $(HEADERS)", "-ptx -arch=compute_90", "$(PTXAS) -arch=$(ARCH)",
        "--code-object=$(BUILT_CODE)", "validate:", "bench:", "help:", "asm:"}) {
    EXPECT_TRUE(absl::StrContains(mk, needle)) << needle << "\n" << mk;
  }
}

TEST(BuildFileTest, BinaryOnlyAndHip) {
  MakefileSpec s;
  s.lang = Language::kHip;
  s.arch = "gfx90a";
  s.captured_code = "code/kernel.hsaco";
  s.no_source_reason = "no line table";
  s.clang_default = "clang-15";
  std::string mk = BuildMakefile(s).value();
  EXPECT_TRUE(absl::StrContains(mk, "recompile: no line table")) << mk;
  EXPECT_TRUE(absl::StrContains(mk, "CLANG ?= clang-15"));
  EXPECT_TRUE(absl::StrContains(mk, "--mcpu=$(ARCH)"));
  EXPECT_TRUE(absl::StrContains(mk, "asm-build: needs the sources (make asm cuts")) << mk;
  EXPECT_TRUE(absl::StrContains(mk, "no line table"));
  EXPECT_FALSE(absl::StrContains(mk, "not implemented"));
  EXPECT_FALSE(absl::StrContains(mk, "SRC :="));
  EXPECT_FALSE(absl::StrContains(mk, "module.s")) << "binary-only: no clang -S";
  s.has_source = true;
  s.source = "src/k.hip";
  s.vfs_overlay = true;
  mk = BuildMakefile(s).value();
  EXPECT_TRUE(
      absl::StrContains(mk, "--offload-arch=$(ARCH) $(FLAGS) -ivfsoverlay vfs.yaml -o $@ $(SRC)"))
      << mk;
  EXPECT_TRUE(absl::StrContains(mk, "$(SRC) $(HEADERS) vfs.yaml"));
  // Resident mode is CUDA only: no targets, help says so, one-shot replays.
  EXPECT_FALSE(absl::StrContains(mk, "serve:")) << mk;
  EXPECT_FALSE(absl::StrContains(mk, "SERVE_SOCKET")) << mk;
  EXPECT_TRUE(absl::StrContains(mk, "serve/serve-stop (resident mode) are CUDA only")) << mk;
  EXPECT_TRUE(absl::StrContains(
      mk, "validate:\n\t$(KERNCAP_REPLAY) validate $(CAPTURE) $(CODE_OBJECT_FLAG) $(VALIDATE_FLAGS)\n"))
      << mk;
  EXPECT_TRUE(absl::StrContains(mk, "clean:\n\trm -rf $(BUILD)\n")) << mk;
  ExpectNoAbsolutePaths(mk);
}

// Text from the capture cannot add Makefile lines: a title with newlines
// stays one comment line, and an architecture that is not a name is refused.
TEST(BuildFileTest, CaptureTextCannotAddMakefileLines) {
  MakefileSpec s = CudaSpec();
  s.title = "Reproducer of k\nall:\n\ttouch /tmp/kc-owned\r\n";
  const std::string mk = BuildMakefile(s).value();
  EXPECT_TRUE(absl::StartsWith(mk, "# Reproducer of k all: \ttouch /tmp/kc-owned  \n# Generated"))
      << mk.substr(0, 200);
  for (absl::string_view line : absl::StrSplit(mk, '\n')) {
    EXPECT_NE(line, "all:") << "the title added a rule";
  }
  for (const char* arch :
       {"sm_90; touch /tmp/kc-owned", "sm_90\nall:", "$(shell id)", "", "sm 90", "gfx90a:xnack-"}) {
    s = CudaSpec();
    s.arch = arch;
    absl::StatusOr<std::string> r = BuildMakefile(s);
    ASSERT_FALSE(r.ok()) << "arch '" << arch << "' accepted:\n" << *r;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(r.status().message(), "is not an architecture name"))
        << r.status();
  }
  for (const char* arch : {"sm_90", "sm_90a", "gfx90a", "gfx1100"}) {
    s = CudaSpec();
    s.arch = arch;
    EXPECT_TRUE(BuildMakefile(s).ok()) << arch;
  }
}

MakefileSpec HipSpec() {
  MakefileSpec s;
  s.lang = Language::kHip;
  s.title = "Reproducer of scale";
  s.arch = "gfx90a";
  s.captured_code = "code/kernel.hsaco";
  s.has_source = true;
  s.source = "src/k.hip";
  s.headers = {"src/k.h"};
  s.flags = {"-O2", "-Btools"};
  s.vfs_overlay = true;
  s.kernel_symbol = "scale";
  s.clang_default = "clang-15";
  return s;
}

TEST(BuildFileTest, HipAsmLoopText) {
  const std::string mk = BuildMakefile(HipSpec()).value();
  ExpectNoAbsolutePaths(mk);
  for (const char* needle : {
           "KERNEL := scale\n",
           "ASM_KERNEL := asm/kernel.s\n",
           "KERNCAP_ASM ?= kerncap-asm\n",
           "LD_LLD ?= $(shell $(CLANG) $(filter -B%,$(FLAGS)) -print-prog-name=ld.lld)\n",
           "SPLICE_FLAGS ?=\n",
           // make asm: the disassembly, then clang -S through the overlay, the cut.
           "asm:\n\t@mkdir -p $(BUILD)\n\t$(LLVM_OBJDUMP) -d --mcpu=$(ARCH) $(CODE_OBJECT) > "
           "$(BUILD)/kernel.s\n",
           "\t@$(MAKE) --no-print-directory -q $(BUILD)/module.s 2>/dev/null || \\\n"
           "\t  $(MAKE) --no-print-directory $(BUILD)/module.s\n",
           "$(BUILD)/module.s: $(SRC) $(HEADERS) vfs.yaml\n",
           "\t$(CLANG) -x hip --cuda-device-only --no-gpu-bundle-output --offload-arch=$(ARCH) "
           "$(FLAGS) -ivfsoverlay vfs.yaml -S -o $@ $(SRC)\n",
           "$(KERNCAP_ASM) extract --kernel=$(KERNEL) --module=$(BUILD)/module.s "
           "--out=$(BUILD)/kernel.orig.s\n",
           // make asm-build: splice, assemble for the module's target, link.
           "$(KERNCAP_ASM) splice --kernel=$(KERNEL) --module=$(BUILD)/module.s "
           "--edited=$(ASM_KERNEL) --out=$(BUILD)/module.edited.s $(SPLICE_FLAGS)\n",
           "$(CLANG) -x assembler -target amdgcn-amd-amdhsa $$($(KERNCAP_ASM) flags "
           "--module=$(BUILD)/module.s --arch=$(ARCH)) -c -o $(BUILD)/module.edited.o "
           "$(BUILD)/module.edited.s\n",
           "$(LD_LLD) -shared --no-undefined -o $(BUILT_CODE) $(BUILD)/module.edited.o\n",
           "@echo '  asm-build   asm/kernel.s spliced into build/module.s",
       }) {
    EXPECT_TRUE(absl::StrContains(mk, needle)) << needle << "\n" << mk;
  }
  EXPECT_FALSE(absl::StrContains(mk, "not implemented")) << mk;
}

// HIP make asm / asm-build against stand-ins for clang, ld.lld, llvm-objdump
// and kerncap-asm (shell scripts logging their arguments): the recipes'
// order, the kept edits, the errors.
class HipAsmMakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    make_ = FindTool("make");
    if (make_.empty()) GTEST_SKIP() << "make not found";
    char tmpl[] = "/tmp/kc_build_file_hip_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/src");
    Write("Makefile", BuildMakefile(HipSpec()).value());
    Write("src/k.hip", "kernel");
    Write("src/k.h", "header");
    Write("vfs.yaml", "overlay");
    Script("fake-clang",
           "echo \"clang $*\" >> calls.log\n"
           "case \"$*\" in *-print-prog-name=ld.lld*)\n"
           "  case \"$*\" in *-Btools*) echo ./fake-lld ;; *) echo ld.lld ;; esac; exit 0 ;; esac\n"
           "prev=; for a in \"$@\"; do test \"$prev\" = -o && out=$a; prev=$a; done\n"
           "case \"$*\" in *'-x assembler'*)\n"
           "  if grep -q BROKEN build/module.edited.s; then\n"
           "    echo 'asm/kernel.s:3:2: error: invalid instruction' >&2; exit 1; fi\n"
           "  echo object > \"$out\" ;;\n"
           "*) echo module > \"$out\" ;; esac\n");
    Script("fake-asm",
           "echo \"asm $*\" >> calls.log\n"
           "for a in \"$@\"; do case $a in --out=*) out=${a#--out=} ;; esac; done\n"
           "case $1 in extract) echo cut > \"$out\" ;; splice) cat asm/kernel.s > \"$out\" ;;\n"
           "flags) echo -mcpu=gfx90a ;; esac\n");
    Script("fake-lld",
           "echo \"lld $*\" >> calls.log\n"
           "prev=; for a in \"$@\"; do test \"$prev\" = -o && out=$a; prev=$a; done\n"
           "echo hsaco > \"$out\"\n");
    Script("fake-objdump", "echo disassembly\n");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(dir_ + "/" + rel, std::ios::binary) << text;
  }
  void Script(const std::string& rel, const std::string& body) {
    Write(rel, "#!/bin/sh\n" + body);
    ::chmod((dir_ + "/" + rel).c_str(), 0755);
  }
  std::string Read(const std::string& rel) {
    std::ifstream f(dir_ + "/" + rel);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  ToolResult Make(std::vector<std::string> args) {
    std::vector<std::string> argv = {make_,
                                     "--no-print-directory",
                                     "-C",
                                     dir_,
                                     "CLANG=./fake-clang",
                                     "KERNCAP_ASM=./fake-asm",
                                     "LLVM_OBJDUMP=./fake-objdump"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunTool(argv, "", 60);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ToolResult{};
  }
  std::string make_, dir_;
};

TEST_F(HipAsmMakeTest, AsmCutsTheKernelAndAsmBuildLinksIt) {
  ToolResult r = Make({"help"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* t : {"  asm ", "build/module.s", "asm/kernel.s", "  asm-build ", "ld.lld"}) {
    EXPECT_TRUE(absl::StrContains(r.out, t)) << t << " missing from make help:\n" << r.out;
  }
  r = Make({"asm-build"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "no build/module.s yet: run make asm first")) << r.err;
  r = Make({"asm", "KERNCAP_ASM=./no-such-tool"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "asm: ./no-such-tool not found")) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/build/module.s")) << "nothing compiled without the tool";

  r = Make({"asm"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Read("build/kernel.s"), "disassembly\n");
  EXPECT_EQ(Read("build/module.s"), "module\n");
  EXPECT_EQ(Read("asm/kernel.s"), "cut\n");
  const std::string calls = Read("calls.log");
  EXPECT_TRUE(absl::StrContains(calls,
                                "clang -x hip --cuda-device-only --no-gpu-bundle-output "
                                "--offload-arch=gfx90a -O2 -Btools -ivfsoverlay vfs.yaml -S -o "
                                "build/module.s src/k.hip\n"))
      << calls;
  EXPECT_TRUE(absl::StrContains(
      calls, "asm extract --kernel=scale --module=build/module.s --out=build/kernel.orig.s\n"))
      << calls;
  EXPECT_TRUE(absl::StrContains(r.out, "asm/kernel.s (edit it, then make asm-build)")) << r.out;

  // Edited, then the module is older than the sources: recompiled, the edit kept.
  Write("asm/kernel.s", "mine\n");
  fs::last_write_time(dir_ + "/build/module.s",
                      fs::file_time_type::clock::now() - std::chrono::seconds(60));
  r = Make({"asm"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Read("asm/kernel.s"), "mine\n");
  EXPECT_EQ(Read("build/kernel.orig.s"), "cut\n");
  EXPECT_TRUE(absl::StrContains(r.out, "asm/kernel.s exists: kept")) << r.out;
  r = Make({"asm"});  // the module up to date: not compiled again, no make chatter
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(absl::StrContains(r.out, "up to date")) << r.out;
  size_t compiles = 0;
  for (size_t p = 0; (p = Read("calls.log").find(" -S -o ", p)) != std::string::npos; ++p) {
    ++compiles;
  }
  EXPECT_EQ(compiles, 2u);

  r = Make({"asm-build"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Read("build/kernel.hsaco"), "hsaco\n");
  EXPECT_EQ(Read("build/module.edited.s"), "mine\n");
  const std::string after = Read("calls.log");
  EXPECT_TRUE(absl::StrContains(after,
                                "asm splice --kernel=scale --module=build/module.s "
                                "--edited=asm/kernel.s --out=build/module.edited.s\n"))
      << after;
  EXPECT_TRUE(absl::StrContains(after,
                                "clang -x assembler -target amdgcn-amd-amdhsa -mcpu=gfx90a -c -o "
                                "build/module.edited.o build/module.edited.s\n"))
      << after;
  // LD_LLD: the ld.lld clang names when given the flags' -B.
  EXPECT_TRUE(absl::StrContains(after, "clang -Btools -print-prog-name=ld.lld\n")) << after;
  EXPECT_TRUE(absl::StrContains(
      after, "lld -shared --no-undefined -o build/kernel.hsaco build/module.edited.o\n"))
      << after;
  r = Make({"asm-build", "SPLICE_FLAGS=--keep-register-counts"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(Read("calls.log"), "--out=build/module.edited.s "
                                                   "--keep-register-counts\n"));

  // An assembler error names the edited file's line.
  Write("asm/kernel.s", "mine\nBROKEN\n");
  r = Make({"asm-build"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "asm/kernel.s:3:2: error")) << r.err;

  // clean keeps the edits; asm-build then asks for make asm.
  r = Make({"clean"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_FALSE(fs::exists(dir_ + "/build"));
  EXPECT_EQ(Read("asm/kernel.s"), "mine\nBROKEN\n");
  r = Make({"asm-build"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "run make asm first")) << r.err;
  fs::remove(dir_ + "/asm/kernel.s");
  fs::create_directories(dir_ + "/build");
  Write("build/module.s", "module\n");
  r = Make({"asm-build"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "no asm/kernel.s: run make asm first")) << r.err;
}

TEST(BuildFileTest, CudaResidentModeText) {
  std::string mk = BuildMakefile(CudaSpec()).value();
  ExpectNoAbsolutePaths(mk);
  for (const char* needle : {
           "SERVE_SOCKET ?= $(BUILD)/serve.sock",
           "SERVE_PID := $(BUILD)/serve.pid",
           ".PHONY: help recompile run validate bench asm ptx asm-build clean serve serve-stop",
           "\nserve:\n",
           "\nserve-stop:\n",
           "nohup $(KERNCAP_REPLAY) serve $(CAPTURE) --socket=$(SERVE_SOCKET)",
           "echo $$pid > $(SERVE_PID)",
           "while ! test -S $(SERVE_SOCKET); do",
           "$(SERVE_TIMEOUT)",
           "submit --socket=$(SERVE_SOCKET) --shutdown",
           "SERVING = $(shell test -S $(SERVE_SOCKET) && echo yes)",
           "SUBMIT = $(KERNCAP_REPLAY) submit --socket=$(SERVE_SOCKET) $(CODE_OBJECT)",
           // socket there: submit; else the one-shot command
           "validate:\n\t$(if $(SERVING),$(SUBMIT) --iterations=0 $(VALIDATE_FLAGS),"
           "$(KERNCAP_REPLAY) validate $(CAPTURE) $(CODE_OBJECT_FLAG) $(VALIDATE_FLAGS))\n",
           "bench:\n\t$(if $(SERVING),$(SUBMIT) --no-validate $(SUBMIT_COMPARE_FLAG) "
           "$(BENCH_FLAGS),"
           "$(KERNCAP_REPLAY) bench $(CAPTURE) $(CODE_OBJECT_FLAG) $(COMPARE_FLAG) "
           "$(BENCH_FLAGS))\n",
           "BENCH_COMPARE ?= yes\n",
           "@echo '  serve       ",
           "@echo '  serve-stop  ",
       }) {
    EXPECT_TRUE(absl::StrContains(mk, needle)) << needle << "\n" << mk;
  }
}

// The targets run by make against a stand-in kerncap-replay: a shell script
// whose `serve` binds a real Unix socket (python3) after a short delay.
class ResidentMakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    make_ = FindTool("make");
    python_ = FindTool("python3");
    if (make_.empty() || python_.empty()) GTEST_SKIP() << "make or python3 not found";
    char tmpl[] = "/tmp/kc_build_file_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Write("Makefile", BuildMakefile(CudaSpec()).value());
    Write("capture.kcap", "kcap");
    Write("server.py",
          "import os, signal, socket, sys, time\n"
          "path = sys.argv[2]\n"
          "time.sleep(0.3)\n"
          "s = socket.socket(socket.AF_UNIX)\n"
          "s.bind(path)\n"
          "s.listen(4)\n"
          "def stop(*_):\n"
          "    os.unlink(path)\n"
          "    sys.exit(0)\n"
          "signal.signal(signal.SIGTERM, stop)\n"
          "print('serving', path, flush=True)\n"
          "while True:\n"
          "    s.accept()[0].close()\n");
    // submit --shutdown / --info fail (exit 3), so serve-stop falls back
    // to the recorded pid.
    Write("fake-replay",
          "#!/bin/sh\n"
          "echo \"$*\" >> calls.log\n"
          "case \"$1\" in\n"
          "serve) for a in \"$@\"; do case \"$a\" in --socket=*) sock=\"${a#--socket=}\";; esac; "
          "done\n"
          "  exec " + python_ + " server.py serve \"$sock\" ;;\n"
          "submit) case \"$*\" in *--shutdown*|*--info*) exit 3;; esac; exit 0 ;;\n"
          "*) exit 0 ;;\n"
          "esac\n");
    Write("fake-fail", "#!/bin/sh\necho 'no CUDA device here' >&2\nexit 77\n");
    ::chmod((dir_ + "/fake-replay").c_str(), 0755);
    ::chmod((dir_ + "/fake-fail").c_str(), 0755);
  }
  void TearDown() override {
    if (dir_.empty()) return;
    Make({"serve-stop"});  // never leave a stand-in server behind
    fs::remove_all(dir_);
  }
  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(dir_ + "/" + rel, std::ios::binary) << text;
  }
  std::string Calls() {
    std::ifstream f(dir_ + "/calls.log");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  std::string LastCall() {
    std::vector<std::string> lines = absl::StrSplit(Calls(), '\n', absl::SkipEmpty());
    return lines.empty() ? "" : lines.back();
  }
  bool IsSocket(const std::string& rel) {
    struct stat st;
    return ::stat((dir_ + "/" + rel).c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
  }
  ToolResult Make(std::vector<std::string> args, const std::string& replay = "./fake-replay") {
    std::vector<std::string> argv = {make_, "--no-print-directory", "-C", dir_,
                                     "KERNCAP_REPLAY=" + replay};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunTool(argv, "", 60);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return ToolResult{};
    EXPECT_FALSE(r->timed_out) << "make hung (a server holding its output pipes?)";
    return *r;
  }
  std::string make_, python_, dir_;
};

TEST_F(ResidentMakeTest, ServeSubmitStop) {
  ToolResult r = Make({"help"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* t : {"  serve ", "  serve-stop ", "build/serve.sock exists (make serve)"}) {
    EXPECT_TRUE(absl::StrContains(r.out, t)) << t << " missing from make help:\n" << r.out;
  }
  // No server: the one-shot commands.
  r = Make({"validate"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastCall(), "validate capture.kcap");
  r = Make({"bench"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastCall(), "bench capture.kcap");

  r = Make({"serve"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "serves capture.kcap on build/serve.sock")) << r.out;
  EXPECT_TRUE(IsSocket("build/serve.sock"));
  std::ifstream pidf(dir_ + "/build/serve.pid");
  int pid = 0;
  pidf >> pid;
  EXPECT_GT(pid, 0);
  EXPECT_EQ(LastCall(), "serve capture.kcap --socket=build/serve.sock");
  r = Make({"serve"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "already serving")) << r.out;

  // Socket there: submit, with the built code object once there is one.
  r = Make({"validate", "VALIDATE_FLAGS=--rtol=1e-3"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastCall(), "submit --socket=build/serve.sock code/kernel.cubin --iterations=0 --rtol=1e-3");
  Write("build/kernel.cubin", "ELF");
  r = Make({"bench"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // A rebuilt code object: the server times the captured one beside it.
  EXPECT_EQ(LastCall(),
            "submit --socket=build/serve.sock build/kernel.cubin --no-validate --compare-original");
  r = Make({"bench", "BENCH_COMPARE=no"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastCall(), "submit --socket=build/serve.sock build/kernel.cubin --no-validate");

  // clean keeps the server reachable.
  r = Make({"clean"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/build/kernel.cubin"));
  EXPECT_TRUE(IsSocket("build/serve.sock"));
  EXPECT_TRUE(fs::exists(dir_ + "/build/serve.pid"));

  r = Make({"serve-stop"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "killed kerncap-replay serve")) << r.out;
  EXPECT_FALSE(fs::exists(dir_ + "/build/serve.sock"));
  EXPECT_FALSE(fs::exists(dir_ + "/build/serve.pid"));
  // Gone (or a zombie its new parent has not reaped yet).
  for (int i = 0; pid > 0 && i < 40 && ::kill(pid, 0) == 0; ++i) ::usleep(50000);
  if (pid > 0) {
    EXPECT_NE(::kill(pid, 0), 0) << "server still running";
  }
  r = Make({"validate"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastCall(), "validate capture.kcap");
  r = Make({"serve-stop"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.out, "no server running")) << r.out;
}

// make bench without a server: the captured binary alone, or a rebuilt code
// object against it (kerncap-replay bench --compare-original).
TEST_F(ResidentMakeTest, BenchComparesARebuiltCodeObjectWithTheCapturedOne) {
  ToolResult r = Make({"bench"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastCall(), "bench capture.kcap");
  r = Make({"bench", "BENCH_FLAGS=--iterations=7"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastCall(), "bench capture.kcap --iterations=7");
  fs::create_directories(dir_ + "/build");
  Write("build/kernel.cubin", "ELF");
  r = Make({"bench", "BENCH_FLAGS=--iterations=7"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastCall(),
            "bench capture.kcap --code-object=build/kernel.cubin --compare-original "
            "--iterations=7");
  r = Make({"bench", "BENCH_COMPARE=no"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastCall(),
            "bench capture.kcap --code-object=build/kernel.cubin --no-compare-original");
  r = Make({"help"});
  EXPECT_TRUE(absl::StrContains(r.out, "against the captured one, speedup")) << r.out;
}

// HIP: the HSA replay cannot compare yet, so bench with a rebuilt hsaco times
// it alone (explicitly, since kerncap-replay compares by default on CUDA).
TEST_F(ResidentMakeTest, HipBenchTimesTheRebuiltCodeObjectAlone) {
  MakefileSpec hip = CudaSpec();
  hip.lang = Language::kHip;
  hip.arch = "gfx90a";
  hip.captured_code = "code/kernel.hsaco";
  hip.kernel_symbol = "_Z5scalePfi";
  Write("Makefile", BuildMakefile(hip).value());
  ToolResult r = Make({"bench"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastCall(), "bench capture.kcap");
  fs::create_directories(dir_ + "/build");
  Write("build/kernel.hsaco", "ELF");
  r = Make({"bench"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastCall(),
            "bench capture.kcap --code-object=build/kernel.hsaco --no-compare-original");
  Write("Makefile", BuildMakefile(CudaSpec()).value());  // TearDown's serve-stop
}

TEST_F(ResidentMakeTest, ServerThatExitsEarlyFails) {
  ToolResult r = Make({"serve"}, "./fake-fail");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.err, "exited with status 77")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "no CUDA device here")) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/build/serve.pid"));
}

}  // namespace
}  // namespace kerncap::repro

namespace kerncap::repro {
namespace {

// Relocatable device code (CMake's separable compilation): the unit is
// compiled with -rdc=true and device-linked alone into a loadable cubin.
TEST(BuildFileTest, RelocatableDeviceCodeIsDeviceLinked) {
  MakefileSpec s = CudaSpec();
  s.relocatable_device_code = true;
  const std::string mk = BuildMakefile(s).value();
  EXPECT_NE(mk.find("\t$(NVCC) -cubin -arch=$(ARCH) -rdc=true $(FLAGS) -o "
                    "$(BUILD)/kernel.rdc.cubin $(SRC)\n"
                    "\t$(NVCC) -dlink -cubin -arch=$(ARCH) -o $@ $(BUILD)/kernel.rdc.cubin\n"),
            std::string::npos)
      << mk;
  s.relocatable_device_code = false;
  EXPECT_EQ(BuildMakefile(s).value().find("-dlink"), std::string::npos);
}

// The toolkit check: only a version made of digits and dots reaches the
// Makefile; the version line from the cubin cannot break out of its comment.
TEST(BuildFileTest, ToolkitNoticeOnlyForAPlainVersion) {
  MakefileSpec s = CudaSpec();
  s.app_cuda_version = "13.0.88";
  s.app_cuda_version_line = "Cuda compilation tools, release 13.0, V13.0.88\\\n$(shell rm -rf /)";
  std::string mk = BuildMakefile(s).value();
  EXPECT_NE(mk.find("APP_CUDA_VERSION := 13.0.88\n"), std::string::npos) << mk;
  EXPECT_NE(mk.find("\t@$(call TOOLKIT_NOTICE,$(NVCC))\n\t$(NVCC) -cubin"), std::string::npos);
  EXPECT_EQ(mk.find("$(shell rm"), std::string::npos) << mk;
  s.app_cuda_version = "13.0; rm -rf /";
  mk = BuildMakefile(s).value();
  EXPECT_EQ(mk.find("APP_CUDA_VERSION"), std::string::npos);
  EXPECT_EQ(mk.find("TOOLKIT_NOTICE"), std::string::npos);
}

// ---------------------------------------------------------------------------
// Goldens: the generated Makefile, byte for byte, for a grid
// of project shapes (CUDA/HIP; binary-only, whole unit, minimal unit;
// toolkit check, relocatable device code, external paths, a VFS overlay,
// hostile text from the capture). The goldens in testdata/makefiles/ were
// written by the string-concatenating generator this template replaced, so
// a template edit that changes any byte fails here.
// KERNCAP_UPDATE_GOLDEN=1 rewrites them (review the diff before committing).

// The golden grid's bases: the specs above with more of what a real
// capture brings (a header with a space, flags with '$' and '#', a second
// external path, a mangled HIP symbol).
MakefileSpec Cuda() {
  MakefileSpec s = CudaSpec();
  s.title = "Reproducer of scale(float*, int) (capture 0123abcd, sm_90)";
  s.headers.push_back("src/dir with space/b.h");
  s.flags.insert(s.flags.end(), {"-DC=$HOME", "-DN=#x"});
  s.external.emplace_back("EXT_2", "/usr/local/cuda 12/include");
  return s;
}

MakefileSpec Hip() {
  MakefileSpec s = HipSpec();
  s.title = "Reproducer of scale (capture 0123abcd, gfx90a)";
  s.kernel_symbol = "_Z5scalePfi";
  s.llvm_objdump_default = "llvm-objdump-15";
  return s;
}

std::map<std::string, MakefileSpec> GoldenGrid() {
  std::map<std::string, MakefileSpec> g;
  {
    MakefileSpec s = Cuda();
    s.minimal_unit_reason = "kerncap-cuda-slice not found";
    g["cuda_whole_unit"] = s;
  }
  {
    MakefileSpec s = Cuda();
    s.headers.clear();
    s.external.clear();
    g["cuda_whole_unit_no_reason"] = s;
  }
  {
    MakefileSpec s = Cuda();
    s.minimal_unit_reason = std::string("it's $HOME\\path #1\nline two\r") + std::string(400, 'x');
    s.app_cuda_version = "13.0.88";
    s.app_cuda_version_line = "Cuda compilation tools, release 13.0, V13.0.88 $x\\y\n#z";
    s.captured_ptx = "code/kernel.ptx";
    g["cuda_whole_unit_toolkit_ptx"] = s;
  }
  {
    MakefileSpec s = Cuda();
    s.minimal_unit = "kernel.cu";
    s.no_nvrtc_reason = "NVRTC rejected the minimal unit: cannot open source file \"cstdint\"";
    g["cuda_minimal"] = s;
  }
  {
    MakefileSpec s = Cuda();
    s.minimal_unit = "kernel.cu";
    s.nvrtc = "/opt/kerncap dir/bin/kerncap-nvrtc";
    s.app_cuda_version = "13.0.88";
    s.app_cuda_version_line = "Cuda compilation tools, release 13.0, V13.0.88";
    g["cuda_minimal_nvrtc_toolkit"] = s;
  }
  {
    MakefileSpec s = Cuda();
    s.minimal_unit = "kernel.cu";
    s.relocatable_device_code = true;
    s.app_cuda_version = "12.4.131";
    s.app_cuda_version_line = "Cuda compilation tools, release 12.4, V12.4.131";
    g["cuda_minimal_rdc_toolkit"] = s;
  }
  {
    MakefileSpec s = Cuda();
    s.relocatable_device_code = true;
    s.app_cuda_version = "13.0;rm -rf";  // not digits and dots: no check
    g["cuda_whole_unit_rdc_bad_version"] = s;
  }
  {
    MakefileSpec s;
    s.title = "Reproducer of k";
    s.arch = "sm_80";
    s.captured_code = "code/kernel.cubin";
    s.captured_ptx = "code/kernel.ptx";
    s.no_source_reason =
        "no line table: the code object has no 'debug_line' ($x)\nrebuild with -lineinfo";
    s.app_cuda_version = "12.2.140";
    s.app_cuda_version_line = "V12.2.140";
    s.minimal_unit = "kernel.cu";  // ignored without sources
    g["cuda_binary_only"] = s;
  }
  {
    MakefileSpec s = Hip();
    g["hip_source_vfs"] = s;
  }
  {
    MakefileSpec s = Hip();
    s.vfs_overlay = false;
    s.headers.clear();
    s.external = {{"EXT_1", "/opt/rocm/include"}};
    s.flags = {"-O3", "-I$(EXT_1)"};
    g["hip_source_external"] = s;
  }
  {
    MakefileSpec s;
    s.lang = Language::kHip;
    s.arch = "gfx942";
    s.captured_code = "code/kernel.hsaco";
    s.no_source_reason = "binary-only reproducer requested: sources were not looked for";
    s.app_cuda_version = "13.0.88";  // CUDA only: ignored
    g["hip_binary_only"] = s;
  }
  return g;
}

fs::path GoldenDir() {
  return fs::path(KERNCAP_SOURCE_DIR) / "reproducer/generator/testdata/makefiles";
}

TEST(BuildFileGoldenTest, MakefilesMatchTheGoldens) {
  const bool update = std::getenv("KERNCAP_UPDATE_GOLDEN") != nullptr &&
                      std::string(std::getenv("KERNCAP_UPDATE_GOLDEN")) == "1";
  for (const auto& [name, spec] : GoldenGrid()) {
    const std::string mk = BuildMakefile(spec).value();
    const fs::path golden = GoldenDir() / (name + ".golden");
    if (update) {
      std::ofstream(golden, std::ios::binary) << mk;
      continue;
    }
    std::ifstream in(golden, std::ios::binary);
    ASSERT_TRUE(in) << "missing golden " << golden << " (KERNCAP_UPDATE_GOLDEN=1 writes it)";
    std::stringstream want;
    want << in.rdbuf();
    EXPECT_EQ(mk, want.str()) << name << ": the generated Makefile differs from " << golden;
  }
}

// Every golden belongs to a grid entry (a renamed entry leaves no stale file).
TEST(BuildFileGoldenTest, NoStaleGoldens) {
  const std::map<std::string, MakefileSpec> grid = GoldenGrid();
  for (const fs::directory_entry& e : fs::directory_iterator(GoldenDir())) {
    EXPECT_TRUE(grid.count(e.path().stem().string())) << "stale golden " << e.path();
  }
}

}  // namespace
}  // namespace kerncap::repro
