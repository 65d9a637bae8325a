#include "reproducer/generator/toolkit_notes.h"

#include <cstring>

#include "gtest/gtest.h"
#include "reproducer/generator/line_table.h"

namespace kerncap::repro {
namespace {

template <typename T>
void Put(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void Pad4(std::string* s) {
  while (s->size() % 4 != 0) s->push_back('\0');
}

std::string Note(const std::string& owner, uint32_t type, const std::string& desc) {
  std::string n;
  Put<uint32_t>(&n, static_cast<uint32_t>(owner.size() + 1));
  Put<uint32_t>(&n, static_cast<uint32_t>(desc.size()));
  Put<uint32_t>(&n, type);
  n += owner;
  n.push_back('\0');
  Pad4(&n);
  n += desc;
  Pad4(&n);
  return n;
}

// The tkinfo descriptor ptxas writes: format 2, five string offsets, strings.
std::string TkInfo(const std::vector<std::string>& strings, std::vector<uint32_t> offsets = {}) {
  std::string area;
  std::vector<uint32_t> at;
  for (const std::string& s : strings) {
    at.push_back(static_cast<uint32_t>(area.size()));
    area += s;
    area.push_back('\0');
  }
  if (offsets.empty()) offsets = at;
  std::string d;
  Put<uint32_t>(&d, 2);
  for (uint32_t o : offsets) Put<uint32_t>(&d, o);
  return d + area;
}

// A minimal ELF64 (EM_CUDA) holding the given note sections.
std::string Elf(const std::vector<std::pair<std::string, std::string>>& notes) {
  std::string shstr("\0.shstrtab\0", 11);
  std::vector<uint32_t> names;
  for (const auto& [name, body] : notes) {
    names.push_back(static_cast<uint32_t>(shstr.size()));
    shstr += name;
    shstr.push_back('\0');
  }
  std::string data;  // section contents after the 64-byte header
  const uint64_t shstr_off = 64;
  data += shstr;
  Pad4(&data);
  std::vector<std::pair<uint64_t, uint64_t>> where;
  for (const auto& [name, body] : notes) {
    where.emplace_back(64 + data.size(), body.size());
    data += body;
    Pad4(&data);
  }
  while (data.size() % 8 != 0) data.push_back('\0');
  const uint64_t shoff = 64 + data.size();
  std::string e("\x7f" "ELF\x02\x01\x01", 7);
  e.resize(16, '\0');
  Put<uint16_t>(&e, 2);    // ET_EXEC
  Put<uint16_t>(&e, 190);  // EM_CUDA
  Put<uint32_t>(&e, 1);
  Put<uint64_t>(&e, 0);
  Put<uint64_t>(&e, 0);
  Put<uint64_t>(&e, shoff);
  Put<uint32_t>(&e, 0);
  Put<uint16_t>(&e, 64);
  Put<uint16_t>(&e, 56);
  Put<uint16_t>(&e, 0);
  Put<uint16_t>(&e, 64);
  Put<uint16_t>(&e, static_cast<uint16_t>(2 + notes.size()));
  Put<uint16_t>(&e, 1);
  e += data;
  auto shdr = [&e](uint32_t name, uint32_t type, uint64_t off, uint64_t size, uint64_t align) {
    Put<uint32_t>(&e, name);
    Put<uint32_t>(&e, type);
    Put<uint64_t>(&e, 0);
    Put<uint64_t>(&e, 0);
    Put<uint64_t>(&e, off);
    Put<uint64_t>(&e, size);
    Put<uint32_t>(&e, 0);
    Put<uint32_t>(&e, 0);
    Put<uint64_t>(&e, align);
    Put<uint64_t>(&e, 0);
  };
  shdr(0, 0, 0, 0, 0);
  shdr(1, 3, shstr_off, shstr.size(), 1);
  for (size_t i = 0; i < notes.size(); ++i) shdr(names[i], 7, where[i].first, where[i].second, 4);
  return e;
}

const std::vector<std::string> kPtxas13 = {
    "", "ptxas", "Cuda compilation tools, release 13.0, V13.0.88",
    "Build cuda_13.0.r13.0/compiler.36424714_0", "-lineinfo  -arch sm_90 -m 64 "};

std::string CuInfo(uint16_t ptx_arch, uint16_t toolkit) {
  std::string d;
  Put<uint16_t>(&d, 2);
  Put<uint16_t>(&d, ptx_arch);
  Put<uint16_t>(&d, toolkit);
  Put<uint16_t>(&d, 0);
  return d;
}

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
