#include "reproducer/generator/build_file.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
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
  std::string mk = BuildMakefile(CudaSpec());
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
  std::string mk = BuildMakefile(s);
  EXPECT_TRUE(absl::StrContains(mk, "recompile: no line table")) << mk;
  EXPECT_TRUE(absl::StrContains(mk, "CLANG ?= clang-15"));
  EXPECT_TRUE(absl::StrContains(mk, "--mcpu=$(ARCH)"));
  EXPECT_TRUE(absl::StrContains(mk, "not implemented for HIP yet"));
  EXPECT_FALSE(absl::StrContains(mk, "SRC :="));
  s.has_source = true;
  s.source = "src/k.hip";
  s.vfs_overlay = true;
  mk = BuildMakefile(s);
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

TEST(BuildFileTest, CudaResidentModeText) {
  std::string mk = BuildMakefile(CudaSpec());
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
           "bench:\n\t$(if $(SERVING),$(SUBMIT) --no-validate $(BENCH_FLAGS),"
           "$(KERNCAP_REPLAY) bench $(CAPTURE) $(CODE_OBJECT_FLAG) $(BENCH_FLAGS))\n",
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
    Write("Makefile", BuildMakefile(CudaSpec()));
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

TEST_F(ResidentMakeTest, ServerThatExitsEarlyFails) {
  ToolResult r = Make({"serve"}, "./fake-fail");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_TRUE(absl::StrContains(r.err, "exited with status 77")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "no CUDA device here")) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/build/serve.pid"));
}

}  // namespace
}  // namespace kerncap::repro
