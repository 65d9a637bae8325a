#include "reproducer/generator/unit_selector.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reproducer/generator/include_closure.h"
#include "reproducer/generator/source_locator.h"
#include "reproducer/generator/tool_runner.h"
#include "common/file_util.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;

class UnitSelectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "kc-unit-XXXXXX").string();
    root_ = ::mkdtemp(t.data());
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string Write(const std::string& rel, const std::string& text) {
    const std::string p = root_ + "/" + rel;
    fs::create_directories(fs::path(p).parent_path());
    std::ofstream(p) << text;
    return p;
  }
  CompileCommand Entry(const std::string& rel, std::vector<std::string> flags = {"-I../include"}) {
    CompileCommand c;
    c.directory = root_ + "/build";
    c.file = root_ + "/" + rel;
    c.argv = {"nvcc"};
    c.argv.insert(c.argv.end(), flags.begin(), flags.end());
    c.argv.insert(c.argv.end(), {"-c", c.file});
    return c;
  }
  std::string root_;
};

// A kernel defined in a header: the unit is the entry that includes it,
// through an include folder, never the header.
TEST_F(UnitSelectorTest, HeaderKernelGoesToTheIncludingEntry) {
  const std::string kern = Write("include/ops/softmax.cuh",
                                 "#pragma once\n#include \"../common.cuh\"\n"
                                 "template <int N> __global__ void softmax(float* p) {}\n");
  const std::string common = Write("include/common.cuh", "#pragma once\n");
  Write("src/other.cu", "#include <common.cuh>\n__global__ void other() {}\n");
  Write("src/softmax.cu", "#include <cuda_runtime.h>\n#include \"ops/softmax.cuh\"\n"
                          "void run() { softmax<4><<<1, 1>>>(nullptr); }\n");
  Write("src/host.cpp", "int main() {}\n");
  std::vector<CompileCommand> db = {Entry("src/host.cpp"), Entry("src/other.cu"),
                                    Entry("src/softmax.cu")};
  UnitQuery q;
  q.line_files = {kern, common};
  q.defining_file = kern;
  UnitChoice c = ChooseUnit(db, q);
  ASSERT_EQ(c.entry, 2) << c.note;
  EXPECT_EQ(c.method, "include_scan");
  EXPECT_FALSE(c.ambiguous);
  // Without the include folder the header is not reachable: no entry.
  db[2] = Entry("src/softmax.cu", {});
  c = ChooseUnit(db, q);
  EXPECT_EQ(c.entry, -1);
  EXPECT_NE(c.note.find("no entry of the database compiles"), std::string::npos) << c.note;
}

// A .cu #included by another .cu: the outer one, which the database
// compiles, not the inner one (no entry of its own).
TEST_F(UnitSelectorTest, UnitIncludedByAnotherUnitGoesToTheOuterOne) {
  const std::string inner = Write("src/kernel_impl.cu", "__global__ void k(float* p) { p[0] = SCALE; }\n");
  Write("src/main.cu", "#define SCALE 2.0f\n#include \"kernel_impl.cu\"\nint main() {}\n");
  std::vector<CompileCommand> db = {Entry("src/main.cu")};
  UnitQuery q;
  q.line_files = {inner};
  q.defining_file = inner;
  UnitChoice c = ChooseUnit(db, q);
  ASSERT_EQ(c.entry, 0) << c.note;
  EXPECT_EQ(c.candidates, std::vector<std::string>{root_ + "/src/main.cu"});
}

// Several entries include the header: the one whose closure covers the line
// table's other files wins; a true tie is said and the first is taken.
TEST_F(UnitSelectorTest, CoverageRanksAndTiesAreAmbiguous) {
  const std::string kern = Write("include/k.cuh", "__global__ void k() {}\n");
  const std::string extra = Write("include/extra.cuh", "__device__ int e() { return 1; }\n");
  Write("src/a.cu", "#include \"k.cuh\"\n");
  Write("src/b.cu", "#include \"k.cuh\"\n#include \"extra.cuh\"\n");
  Write("src/c.cu", "#include \"k.cuh\"\n");
  std::vector<CompileCommand> db = {Entry("src/a.cu"), Entry("src/b.cu"), Entry("src/c.cu")};
  UnitQuery q;
  q.line_files = {kern, extra};
  q.defining_file = kern;
  UnitChoice c = ChooseUnit(db, q);
  EXPECT_EQ(c.entry, 1) << c.note;
  EXPECT_FALSE(c.ambiguous);
  q.line_files = {kern};
  c = ChooseUnit(db, q);
  EXPECT_EQ(c.entry, 0);
  EXPECT_TRUE(c.ambiguous);
  EXPECT_NE(c.note.find("still ambiguous between 3 entries"), std::string::npos) << c.note;
  // The defining file itself has an entry: it is the unit.
  db.push_back(Entry("include/k.cuh"));
  c = ChooseUnit(db, q);
  EXPECT_EQ(c.entry, 3);
  EXPECT_EQ(c.method, "entry");
}

// Hundreds of entries sharing a deep header tree: the scan reads each file
// once, so choosing stays fast.
TEST_F(UnitSelectorTest, ScanScalesToLargeDatabases) {
  std::string chain;
  for (int i = 0; i < 200; ++i) {
    Write(absl::StrCat("include/h", i, ".cuh"),
          i + 1 < 200 ? absl::StrCat("#include \"h", i + 1, ".cuh\"\n") : "\n");
  }
  const std::string kern = Write("include/kern.cuh", "__global__ void kern() {}\n");
  std::vector<CompileCommand> db;
  for (int i = 0; i < 400; ++i) {
    Write(absl::StrCat("src/u", i, ".cu"),
          i == 321 ? "#include <h0.cuh>\n#include <kern.cuh>\n" : "#include <h0.cuh>\n");
    db.push_back(Entry(absl::StrCat("src/u", i, ".cu")));
  }
  UnitQuery q;
  q.line_files = {kern};
  q.defining_file = kern;
  const auto start = std::chrono::steady_clock::now();
  UnitChoice c = ChooseUnit(db, q);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(c.entry, 321) << c.note;
  EXPECT_LT(s, 5.0) << "400 entries x 200 shared headers took " << s << " s";
}

// Template-instance layouts (llama.cpp's mmq-instance-*.cu, CUTLASS and
// FlashAttention instantiation files): one kernel header in many units, each
// instantiating other template arguments. The PTX screen leaves the one unit
// whose PTX has the captured symbol, without a full device compile; when two
// units define the symbol, full compiles pick the one with the captured code.
TEST_F(UnitSelectorTest, TemplateInstanceUnitsAreScreenedByTheirPtx) {
  const std::string nvcc = FindTool("nvcc", {"/usr/local/cuda/bin"});
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found: the device-compile steps need it";
  const std::string kern =
      Write("include/mm.cuh",
            "#pragma once\ntemplate <int kT> __global__ void mm(float* p) {\n"
            "  p[threadIdx.x] = p[threadIdx.x] * kT + BIAS;\n}\n");
  std::vector<CompileCommand> db;
  for (int t = 1; t <= 6; ++t) {
    Write(absl::StrCat("src/inst", t, ".cu"),
          absl::StrCat("#include \"mm.cuh\"\ntemplate __global__ void mm<", t, ">(float*);\n"));
    db.push_back(Entry(absl::StrCat("src/inst", t, ".cu"), {"-I../include", "-DBIAS=1.0f"}));
  }
  fs::create_directories(root_ + "/build");
  auto cubin_of = [&](const CompileCommand& e) {
    std::vector<std::string> argv = {nvcc, "-cubin", "-arch=sm_90"};
    argv.insert(argv.end(), e.argv.begin() + 1, e.argv.end() - 2);  // the flags
    argv.insert(argv.end(), {"-o", root_ + "/captured.cubin", e.file});
    auto r = RunTool(argv, e.directory, 300);
    EXPECT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : r.status().ToString());
    auto bytes = ReadFile(root_ + "/captured.cubin");
    return bytes.ok() ? *bytes : std::string();
  };
  const std::string captured = cubin_of(db[4]);
  ASSERT_FALSE(captured.empty());
  UnitQuery q;
  q.line_files = {kern};
  q.defining_file = kern;
  q.kernel_symbol = "_Z2mmILi5EEvPf";
  q.code_object = captured;
  q.arch = "sm_90";
  q.compiler = nvcc;
  UnitChoice c = ChooseUnit(db, q);
  EXPECT_EQ(c.entry, 4) << c.note;
  EXPECT_EQ(c.method, "device_compile");
  EXPECT_FALSE(c.ambiguous) << c.note;
  EXPECT_NE(c.note.find("the PTX of 1 of 6 candidate(s) defines _Z2mmILi5EEvPf"),
            std::string::npos)
      << c.note;
  EXPECT_EQ(c.note.find("gives the captured code"), std::string::npos) << c.note;

  // A second unit instantiates mm<5> with another BIAS: both PTX have the
  // entry; the full compile of the captured unit's flags decides.
  Write("src/inst7.cu", "#include \"mm.cuh\"\ntemplate __global__ void mm<5>(float*);\n");
  db.insert(db.begin(), Entry("src/inst7.cu", {"-I../include", "-DBIAS=2.0f"}));
  c = ChooseUnit(db, q);
  EXPECT_EQ(c.entry, 5) << c.note;
  EXPECT_NE(c.note.find("the PTX of 2 of 7 candidate(s)"), std::string::npos) << c.note;
  EXPECT_NE(c.note.find("gives the captured code"), std::string::npos) << c.note;

  // No unit defines the symbol: no full compile, the first entry, ambiguous.
  q.kernel_symbol = "_Z2mmILi9EEvPf";
  c = ChooseUnit(db, q);
  EXPECT_EQ(c.entry, 0) << c.note;
  EXPECT_TRUE(c.ambiguous);
  EXPECT_NE(c.note.find("the PTX of none of 7 candidate(s)"), std::string::npos) << c.note;

  // A compiler whose PTX compiles fail rules nothing out: the full compiles
  // decide (an nvcc that rejected -Xcicc -O0 must not make every unit lack
  // the kernel).
  const std::string wrapper = root_ + "/no_ptx_nvcc.sh";
  std::ofstream(wrapper) << "#!/bin/sh\ncase \" $* \" in *\" -ptx \"*) exit 1;; esac\nexec " << nvcc
                         << " \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  UnitQuery w = q;
  w.compiler = wrapper;
  w.kernel_symbol = "_Z2mmILi5EEvPf";
  c = ChooseUnit(db, w);
  EXPECT_EQ(c.entry, 5) << c.note;
  EXPECT_NE(c.note.find("no candidate could be compiled to PTX"), std::string::npos) << c.note;
  EXPECT_NE(c.note.find("gives the captured code"), std::string::npos) << c.note;

  // At most max_compile candidates are compiled, and that is said.
  q.kernel_symbol = "_Z2mmILi5EEvPf";
  q.max_compile = 3;
  c = ChooseUnit(db, q);
  EXPECT_EQ(c.entry, 0) << c.note;  // inst7 (BIAS=2) is among the first three
  EXPECT_NE(c.note.find("4 later candidate(s) not compiled (at most 3)"), std::string::npos)
      << c.note;
}

TEST(IncludeDirsOfTest, AllSpellings) {
  CompileCommand c;
  c.directory = "/b";
  c.argv = {"nvcc", "-Ia", "-I", "/x", "-isystem=/sys", "-isystem", "s2", "--include-path=inc",
            "--include-path", "/p", "-iquote", "q", "-isystem/joined", "-DI=1"};
  EXPECT_EQ(IncludeDirsOf(c), (std::vector<std::string>{"/b/a", "/x", "/sys", "/b/s2", "/b/inc",
                                                        "/p", "/b/q", "/joined"}));
}

TEST(SourceDefinesKernelTest, LaunchIsNotADefinition) {
  // The unit that launches a header's kernel (and defines another kernel)
  // does not define it.
  EXPECT_FALSE(SourceDefinesKernel(
      "__global__ void other() {}\nvoid run() { softmax<<<1, 1>>>(p); softmax <<<2, 2>>>(p); }",
      "softmax"));
  EXPECT_TRUE(SourceDefinesKernel("template <int N>\n__global__ void softmax<N>(float*);",
                                  "softmax"));
}

}  // namespace
}  // namespace kerncap::repro
