#include "reproducer/generator/toolkit_notes.h"

#include <cstring>

#include "gtest/gtest.h"
#include "reproducer/generator/line_table.h"
#include "reproducer/generator/toolkit_notes_fixture.h"

namespace kerncap::repro {
namespace {

using testing::CuInfo;
using testing::Elf;
using testing::kPtxas13;
using testing::Note;
using testing::TkInfo;

TEST(ToolkitNotesTest, ParsesVersionLines) {
  CudaVersion v = ParseCudaVersion(
      "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\n");
  EXPECT_EQ(v.release, "12.4");
  EXPECT_EQ(v.version, "12.4.131");
  EXPECT_TRUE(ParseCudaVersion("no version here").empty());
}

TEST(ToolkitNotesTest, ReadsTkInfoAndCuInfo) {
  if (!HaveDwarfReader()) GTEST_SKIP() << "built without LLVM";
  auto info = ReadToolkitNotes(Elf({{".note.nv.tkinfo", Note("NVIDIA Corp", 0x7d0, TkInfo(kPtxas13))},
                                    {".note.nv.cuinfo", Note("NVIDIA Corp", 0x3e8, CuInfo(80, 130))}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->found);
  EXPECT_EQ(info->tool, "ptxas");
  EXPECT_EQ(info->version_line, "Cuda compilation tools, release 13.0, V13.0.88");
  EXPECT_EQ(info->version.release, "13.0");
  EXPECT_EQ(info->version.version, "13.0.88");
  EXPECT_EQ(info->build, "Build cuda_13.0.r13.0/compiler.36424714_0");
  EXPECT_EQ(info->tool_options, "-lineinfo -arch sm_90 -m 64");
  EXPECT_TRUE(info->has_cuinfo);
  EXPECT_EQ(info->ptx_arch, 80);
  EXPECT_EQ(info->cuinfo_toolkit, 130);
  EXPECT_TRUE(info->problems.empty());
}

TEST(ToolkitNotesTest, HostileNotesAreReportedNotRead) {
  if (!HaveDwarfReader()) GTEST_SKIP() << "built without LLVM";
  // An offset past the string area, and a string without its NUL.
  std::string no_nul = TkInfo({"", "ptxas"});
  no_nul.pop_back();
  auto info = ReadToolkitNotes(
      Elf({{".note.nv.tkinfo", Note("NVIDIA Corp", 0x7d0, TkInfo(kPtxas13, {0, 1, 4000, 7, 7}))}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->tool, "ptxas");
  EXPECT_TRUE(info->version_line.empty());
  ASSERT_FALSE(info->problems.empty());
  EXPECT_NE(info->problems[0].find("outside"), std::string::npos) << info->problems[0];
  info = ReadToolkitNotes(
      Elf({{".note.nv.tkinfo", Note("NVIDIA Corp", 0x7d0, no_nul + std::string(12, '\0'))}}));
  ASSERT_TRUE(info.ok());
  // Unknown format, too short, other owners: nothing taken.
  std::string v3 = TkInfo(kPtxas13);
  v3[0] = 3;
  info = ReadToolkitNotes(Elf({{".note.nv.tkinfo", Note("NVIDIA Corp", 0x7d0, v3)},
                               {".note.nv.cuinfo", Note("NVIDIA Corp", 0x3e8, "\x02")},
                               {".note.x", Note("Someone Else", 0x7d0, TkInfo(kPtxas13))}}));
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->found);
  EXPECT_FALSE(info->has_cuinfo);
  EXPECT_EQ(info->problems.size(), 2u);
  // A note whose size runs past its section: LLVM's bounds check reports it.
  std::string overflow = Note("NVIDIA Corp", 0x7d0, TkInfo(kPtxas13));
  overflow[5] = '\x10';  // descsz += 4096
  info = ReadToolkitNotes(Elf({{".note.nv.tkinfo", overflow}}));
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->found);
  EXPECT_FALSE(info->problems.empty());
  // No notes at all: not an error, nothing found.
  info = ReadToolkitNotes(Elf({}));
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->found);
  EXPECT_FALSE(ReadToolkitNotes("not an elf").ok());
}

}  // namespace
}  // namespace kerncap::repro
