#include "reproducer/generator/line_table.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

#ifdef KERNCAP_GENERATOR_HAVE_LLVM
#include "llvm/DebugInfo/DWARF/DWARFContext.h"
#include "llvm/DebugInfo/DWARF/DWARFDebugLine.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#endif

namespace kerncap::repro {

#ifdef KERNCAP_GENERATOR_HAVE_LLVM

bool HaveDwarfReader() { return true; }

absl::StatusOr<LineTableInfo> ReadLineTable(std::string_view elf) {
  auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(elf.data(), elf.size()),
                                                 "code-object", /*RequiresNullTerminator=*/false);
  auto obj = llvm::object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
  if (!obj) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an object file: ", llvm::toString(obj.takeError())));
  }
  LineTableInfo info;
  auto note = [&info](llvm::Error e) {
    std::string text = llvm::toString(std::move(e));
    if (info.warnings.size() < 8) info.warnings.push_back(std::move(text));
  };
  // Relocations are not applied: they only concern code addresses (cubins
  // keep .rela.debug_line for them), which file names do not need, and LLVM
  // has no relocation resolver for EM_CUDA.
  std::unique_ptr<llvm::DWARFContext> ctx = llvm::DWARFContext::create(
      **obj, llvm::DWARFContext::ProcessDebugRelocations::Ignore, nullptr, "", note, note);
  const llvm::DWARFObject& dobj = ctx->getDWARFObj();
  const llvm::DWARFSection& line_section = dobj.getLineSection();
  if (line_section.Data.empty()) return info;
  info.has_line_table = true;

  // The compile unit (HIP -g): its name and directory.
  std::string comp_dir;
  for (const auto& unit : ctx->compile_units()) {
    llvm::DWARFDie die = unit->getUnitDIE();
    const char* name = die.getShortName();
    const char* dir = unit->getCompilationDir();
    if (dir != nullptr) comp_dir = dir;
    if (name != nullptr) {
      llvm::SmallString<256> p(name);
      if (!llvm::sys::path::is_absolute(p) && !comp_dir.empty()) {
        p = comp_dir;
        llvm::sys::path::append(p, name);
      }
      llvm::sys::path::remove_dots(p, /*remove_dot_dot=*/true);
      info.compile_unit = std::string(p.str());
    }
    break;
  }

  // Every line table in the section, whether a unit points at it or not
  // (cubins built with -lineinfo have no units).
  llvm::DWARFDataExtractor data(dobj, line_section, dobj.isLittleEndian(), dobj.getAddressSize());
  llvm::DWARFDebugLine::SectionParser parser(data, *ctx, ctx->normal_units());
  absl::flat_hash_set<std::string> seen;
  while (!parser.done()) {
    llvm::DWARFDebugLine::LineTable table = parser.parseNext(note, note);
    const llvm::DWARFDebugLine::Prologue& pro = table.Prologue;
    if (pro.FileNames.empty()) continue;
    // DWARF 5 numbers files from 0, earlier versions from 1.
    const uint64_t first = pro.getVersion() >= 5 ? 0 : 1;
    for (uint64_t i = first; i < first + pro.FileNames.size(); ++i) {
      std::string path;
      if (!pro.getFileNameByIndex(
              i, comp_dir, llvm::DILineInfoSpecifier::FileLineInfoKind::AbsoluteFilePath, path)) {
        continue;
      }
      llvm::SmallString<256> clean(path);
      llvm::sys::path::remove_dots(clean, /*remove_dot_dot=*/true);
      std::string p(clean.str());
      if (seen.insert(p).second) info.files.push_back(std::move(p));
    }
  }
  return info;
}

#else  // !KERNCAP_GENERATOR_HAVE_LLVM

bool HaveDwarfReader() { return false; }

absl::StatusOr<LineTableInfo> ReadLineTable(std::string_view) {
  return absl::UnimplementedError(
      "this build has no DWARF reader (LLVM 15 development files were missing at build time)");
}

#endif

}  // namespace kerncap::repro
