#include "reproducer/generator/toolkit_notes.h"

#include <cstring>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_join.h"

#ifdef KERNCAP_GENERATOR_HAVE_LLVM
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"
#endif

namespace kerncap::repro {

CudaVersion ParseCudaVersion(std::string_view text) {
  static const std::regex kVersion(R"(release ([0-9]+(\.[0-9]+)*), V([0-9]+(\.[0-9]+)*))");
  std::cmatch m;
  CudaVersion v;
  if (std::regex_search(text.data(), text.data() + text.size(), m, kVersion)) {
    v.release = m[1].str();
    v.version = m[3].str();
  }
  return v;
}

#ifdef KERNCAP_GENERATOR_HAVE_LLVM
namespace {

uint32_t U32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // the notes are little endian, as is every host we run on
}

uint16_t U16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void ParseTkInfo(llvm::ArrayRef<uint8_t> d, ToolkitInfo* info) {
  constexpr size_t kHeader = 24;
  if (d.size() < 4) {
    info->problems.push_back(absl::StrCat(".note.nv.tkinfo: descriptor of ", d.size(), " bytes"));
    return;
  }
  const uint32_t format = U32(d.data());
  if (format != 2 || d.size() < kHeader) {
    info->problems.push_back(absl::StrCat(".note.nv.tkinfo: unknown format ", format, " (",
                                          d.size(), " bytes): not read"));
    return;
  }
  const uint8_t* strings = d.data() + kHeader;
  const size_t area = d.size() - kHeader;
  auto string_at = [&](int field, std::string* out) {
    const uint32_t off = U32(d.data() + 4 + 4 * field);
    if (off >= area) {
      info->problems.push_back(absl::StrCat(".note.nv.tkinfo: string ", field, " at offset ", off,
                                            " lies outside the ", area, "-byte string area"));
      return;
    }
    const void* nul = std::memchr(strings + off, '\0', area - off);
    if (nul == nullptr) {
      info->problems.push_back(
          absl::StrCat(".note.nv.tkinfo: string ", field, " is not NUL-terminated"));
      return;
    }
    out->assign(reinterpret_cast<const char*>(strings + off),
                static_cast<const uint8_t*>(nul) - (strings + off));
  };
  std::string unnamed, options;
  string_at(0, &unnamed);
  string_at(1, &info->tool);
  string_at(2, &info->version_line);
  string_at(3, &info->build);
  string_at(4, &options);
  info->tool_options = absl::StrJoin(
      absl::StrSplit(options, absl::ByAnyChar(" \t\n"), absl::SkipEmpty()), " ");
  info->version = ParseCudaVersion(info->version_line);
  info->found = true;
}

void ParseCuInfo(llvm::ArrayRef<uint8_t> d, ToolkitInfo* info) {
  if (d.size() < 6 || U16(d.data()) != 2) {
    info->problems.push_back(absl::StrCat(".note.nv.cuinfo: unknown format (", d.size(),
                                          " bytes, format ", d.size() >= 2 ? U16(d.data()) : 0,
                                          "): not read"));
    return;
  }
  info->ptx_arch = U16(d.data() + 2);
  info->cuinfo_toolkit = U16(d.data() + 4);
  info->has_cuinfo = true;
}

}  // namespace

absl::StatusOr<ToolkitInfo> ReadToolkitNotes(std::string_view elf) {
  auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(elf.data(), elf.size()),
                                                 "code-object", /*RequiresNullTerminator=*/false);
  auto obj = llvm::object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
  if (!obj) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an object file: ", llvm::toString(obj.takeError())));
  }
  ToolkitInfo info;
  const auto* elf64 = llvm::dyn_cast<llvm::object::ELF64LEObjectFile>(obj->get());
  if (elf64 == nullptr) {
    info.problems.push_back("not a 64-bit little-endian ELF file: no CUDA toolkit notes");
    return info;
  }
  const auto& file = elf64->getELFFile();
  auto sections = file.sections();
  if (!sections) {
    info.problems.push_back(llvm::toString(sections.takeError()));
    return info;
  }
  for (const auto& shdr : *sections) {
    if (shdr.sh_type != llvm::ELF::SHT_NOTE) continue;
    llvm::Error err = llvm::Error::success();
    for (const auto& note : file.notes(shdr, err)) {
      if (note.getName() != "NVIDIA Corp") continue;
      if (note.getType() == kNvNoteTkInfo && !info.found) ParseTkInfo(note.getDesc(), &info);
      if (note.getType() == kNvNoteCuInfo && !info.has_cuinfo) ParseCuInfo(note.getDesc(), &info);
    }
    if (err) info.problems.push_back(absl::StrCat("ELF notes: ", llvm::toString(std::move(err))));
  }
  return info;
}

#else  // !KERNCAP_GENERATOR_HAVE_LLVM

absl::StatusOr<ToolkitInfo> ReadToolkitNotes(std::string_view) {
  return absl::UnimplementedError(
      "this build has no ELF reader (LLVM 15 development files were missing at build time)");
}

#endif

}  // namespace kerncap::repro
