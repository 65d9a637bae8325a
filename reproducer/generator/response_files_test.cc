#include "reproducer/generator/response_files.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "reproducer/generator/command_rewriter.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;

class OptionFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "kc-rsp-XXXXXX").string();
    root_ = ::mkdtemp(t.data());
    fs::create_directories(root_ + "/build/CMakeFiles/k.dir");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(root_ + "/" + rel).parent_path());
    std::ofstream(root_ + "/" + rel) << text;
  }
  CompileCommand Cmd(std::vector<std::string> argv) {
    CompileCommand c;
    c.directory = root_ + "/build";
    c.file = root_ + "/src/k.cu";
    c.argv = std::move(argv);
    return c;
  }
  std::string root_;
};

TEST(SplitOptionFilesTest, NvccQuotingIsDoubleQuotesOnly) {
  EXPECT_EQ(SplitNvccOptionsFile("-I\"/a b/inc\"  -DX=\"1\"\n-I'/c' -Id\\ e\n"),
            (std::vector<std::string>{"-I/a b/inc", "-DX=1", "-I'/c'", "-Id\\", "e"}));
  EXPECT_TRUE(SplitNvccOptionsFile(" \n\t").empty());
}

TEST(SplitOptionFilesTest, GnuQuoting) {
  EXPECT_EQ(SplitGnuResponseFile("-I'/a b' \"-DX=c d\" -Ie\\ f\n-O2"),
            (std::vector<std::string>{"-I/a b", "-DX=c d", "-Ie f", "-O2"}));
}

// CMake's CUDA rules: includes and defines in includes_CUDA.rsp, named
// relative to the build folder; a nested file is relative to it as well.
TEST_F(OptionFilesTest, NvccOptionsFilesAreExpandedInPlace) {
  Write("build/CMakeFiles/k.dir/includes_CUDA.rsp",
        "-I\"" + root_ + "/include dir\" -I../include\n--options-file CMakeFiles/more.rsp\n");
  Write("build/CMakeFiles/more.rsp", "-DEXTRA=1 -isystem=/usr/local/cuda/include");
  Write("build/defs.rsp", "-DA=1");
  ExpandedCommand e = ExpandOptionFiles(
      Cmd({"/usr/local/cuda/bin/nvcc", "-O3", "--options-file",
           "CMakeFiles/k.dir/includes_CUDA.rsp", "-optf=defs.rsp", "-c", "../src/k.cu"}));
  EXPECT_EQ(e.command.argv,
            (std::vector<std::string>{"/usr/local/cuda/bin/nvcc", "-O3", "-I" + root_ + "/include dir",
                                      "-I../include", "-DEXTRA=1",
                                      "-isystem=/usr/local/cuda/include", "-DA=1", "-c",
                                      "../src/k.cu"}));
  ASSERT_EQ(e.files.size(), 3u);
  EXPECT_EQ(e.files[0].path, root_ + "/build/CMakeFiles/k.dir/includes_CUDA.rsp");
  EXPECT_EQ(e.files[0].depth, 0);
  EXPECT_EQ(e.files[1].path, root_ + "/build/CMakeFiles/more.rsp");
  EXPECT_EQ(e.files[1].depth, 1);
  for (const OptionFileUse& u : e.files) EXPECT_TRUE(u.error.empty()) << u.error;
  // What the rewriter keeps: nothing of the option files is dropped now.
  CoreFlags core = ExtractCoreFlags(e.command, root_ + "/src/k.cu", Language::kCuda);
  EXPECT_EQ(core.flags, (std::vector<std::string>{"-O3", "-I" + root_ + "/include dir",
                                                  "-I../include", "-DEXTRA=1",
                                                  "-isystem=/usr/local/cuda/include", "-DA=1"}));
}

TEST_F(OptionFilesTest, NvccCommaListAndAtWordLeftAlone) {
  Write("build/a.rsp", "-DA=1");
  Write("build/b.rsp", "-DB=2");
  ExpandedCommand e =
      ExpandOptionFiles(Cmd({"nvcc", "--options-file=a.rsp,b.rsp", "@not-an-option-file"}));
  EXPECT_EQ(e.command.argv,
            (std::vector<std::string>{"nvcc", "-DA=1", "-DB=2", "@not-an-option-file"}));
}

TEST_F(OptionFilesTest, ClangAtFilesNestAndRelativeToTheCommandDirectory) {
  Write("build/x/top.rsp", "-I'../inc sp' @x/n.rsp");
  Write("build/x/n.rsp", "-DC=3");
  ExpandedCommand e = ExpandOptionFiles(Cmd({"clang++", "@x/top.rsp", "-c", "../src/k.cu"}));
  EXPECT_EQ(e.command.argv,
            (std::vector<std::string>{"clang++", "-I../inc sp", "-DC=3", "-c", "../src/k.cu"}));
}

TEST_F(OptionFilesTest, MissingCyclicAndLocalizedFiles) {
  Write("build/self.rsp", "-DX=1 --options-file self.rsp");
  ExpandedCommand e = ExpandOptionFiles(
      Cmd({"nvcc", "--options-file", "gone.rsp", "-optf", "self.rsp", "-O2"}));
  ASSERT_EQ(e.files.size(), 3u);
  EXPECT_NE(e.files[0].error.find("cannot be read"), std::string::npos) << e.files[0].error;
  EXPECT_EQ(e.files[0].flag, "--options-file gone.rsp");
  EXPECT_TRUE(e.files[1].error.empty());
  EXPECT_NE(e.files[2].error.find("includes itself"), std::string::npos) << e.files[2].error;
  // The unreadable word stays, so the rewriter drops it and says why.
  EXPECT_EQ(e.command.argv, (std::vector<std::string>{"nvcc", "--options-file", "gone.rsp",
                                                      "-DX=1", "--options-file", "self.rsp",
                                                      "-O2"}));
  CoreFlags core = ExtractCoreFlags(e.command, root_ + "/src/k.cu", Language::kCuda);
  ASSERT_EQ(core.dropped.size(), 2u);
  EXPECT_NE(core.dropped[0].reason.find("could not be expanded"), std::string::npos)
      << core.dropped[0].reason;

  // A database recorded on another host: the file's path is localized first.
  Write("moved/k.rsp", "-DM=1");
  ExpandedCommand m = ExpandOptionFiles(
      Cmd({"nvcc", "--options-file", "/capture/host/k.rsp"}), [this](const std::string& p) {
        return p.rfind("/capture/host", 0) == 0 ? root_ + "/moved" + p.substr(13) : p;
      });
  EXPECT_EQ(m.command.argv, (std::vector<std::string>{"nvcc", "-DM=1"}));
}

}  // namespace
}  // namespace kerncap::repro
