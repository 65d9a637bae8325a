// line_table.h: the source files a GPU code object was compiled from, read
// from its DWARF line table (.debug_line) with LLVM 15's DWARF library.
//
// Which code objects carry one:
//   CUDA cubin   built with -lineinfo or -G: a DWARF 2 .debug_line whose
//                include_directories are absolute (nvcc makes them so); no
//                .debug_info with -lineinfo, so no compile unit names.
//   AMDGPU hsaco built with -g: DWARF 5 .debug_line plus .debug_info, whose
//                compile unit name (DW_AT_name + DW_AT_comp_dir) is the
//                translation unit.
//   JIT / binary-only code (cuBLAS, PTX JIT, Triton, Tensile): usually none.
#ifndef KERNCAP_REPRODUCER_GENERATOR_LINE_TABLE_H_
#define KERNCAP_REPRODUCER_GENERATOR_LINE_TABLE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::repro {

struct LineTableInfo {
  bool has_line_table = false;
  // The first compile unit's file (absolute when the unit names its
  // compilation directory); empty without .debug_info.
  std::string compile_unit;
  // Every file of every line table in table order, without duplicates;
  // absolute when the table names their directory, as recorded otherwise.
  std::vector<std::string> files;
  // Recoverable problems the parser reported (first few).
  std::vector<std::string> warnings;
};

// InvalidArgument when `elf` is not an object file LLVM can read. A code
// object without .debug_line is not an error: has_line_table is false.
absl::StatusOr<LineTableInfo> ReadLineTable(std::string_view elf);

// True when the build of this library has the DWARF reader (LLVM 15 found).
bool HaveDwarfReader();

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_LINE_TABLE_H_
