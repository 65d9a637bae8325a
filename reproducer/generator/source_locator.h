// source_locator.h: finds a captured kernel's translation unit on this host
// and the exact command it was compiled with.
//
//   1. The code object's DWARF line table names the files it was built from
//      (line_table.h), as paths of the capture host.
//   2. The search starts at the compile unit's file (HIP -g), else the file
//      of the table whose text defines the kernel (a compilable one, .cu .hip
//      .cpp .cc .cxx .c, first; else a header: a kernel defined in a .cuh;
//      a device-linked cubin, nvcc -rdc, carries the line tables of every
//      unit of the application), else the first compilable file.
//   3. Each recorded path is used as is when it exists here; otherwise it is
//      remapped into the --source-dir hint by the longest relative suffix
//      that exists there ("/build/app/src/k.cu" -> HINT/app/src/k.cu, else
//      HINT/src/k.cu, else HINT/k.cu). The prefix found for that file is
//      applied to every other path (and to the database's entries).
//   4. compile_commands.json: --compile-commands, else HINT and HINT/build,
//      else walking up from that file's folder (each folder and its build/).
//      Its entries get this host's paths and their option files expanded
//      (response_files.h); the translation unit is the entry unit_selector.h
//      chooses: with a database, always a file the database compiles (a
//      header's kernel is compiled through the unit that includes it, a .cu
//      #included by another .cu through the outer one). Without a database,
//      or when no entry compiles the kernel's files, the start file is the
//      unit and the documented default command is used.
//   5. The application's source root: the hint when it holds the unit, else
//      the deepest folder holding the unit, the database's entry directory
//      and the database (never a system folder).
//
// Failures are classified (SourceOutcome) with a message that says what to
// do; none of them is an error of the generator, which then writes a
// binary-only project.
#ifndef KERNCAP_REPRODUCER_GENERATOR_SOURCE_LOCATOR_H_
#define KERNCAP_REPRODUCER_GENERATOR_SOURCE_LOCATOR_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reproducer/generator/compile_db.h"
#include "reproducer/generator/line_table.h"
#include "reproducer/generator/response_files.h"
#include "reproducer/generator/unit_selector.h"

namespace kerncap::repro {

enum class SourceOutcome {
  kFound,            // translation unit found (compile command may be a default)
  kNoLineInfo,       // the code object has no line table (JIT / binary-only / no -lineinfo)
  kSourcesNotFound,  // line table present, files neither at the recorded paths nor in the hint
  kNoDwarfReader,    // this build cannot read DWARF
  kNotAnObjectFile,  // the captured code object is not ELF (PTX text, fatbin)
};
const char* SourceOutcomeName(SourceOutcome o);  // "found", "no_line_info", ...

enum class CompileOrigin {
  kNone,      // no sources, so no command
  kDatabase,  // from compile_commands.json
  kDefault,   // no database entry: the documented default command
};
const char* CompileOriginName(CompileOrigin o);  // "none", "compile_commands", "default"

// Capture-host prefix -> local prefix.
struct PathRemap {
  std::string from;
  std::string to;
  std::string Apply(const std::string& path) const;  // unchanged when not under `from`
};

struct LocateOptions {
  std::string source_dir;        // hint (absolute after normalisation)
  std::string compile_commands;  // explicit database
  std::string kernel_name;       // demangled name of the captured kernel (unit selection)
  // For the decisive checks of unit_selector.h (empty compiler: not run).
  std::string kernel_symbol;  // the captured symbol (mangled)
  Language lang = Language::kCuda;
  std::string arch;
  std::string compiler;  // nvcc / clang
};

// The kernel's own identifier in a demangled name:
// "void ns::attention_scores_kernel<64>(float const*, int)" ->
// "attention_scores_kernel"; a plain name ("add_kernel") is returned as is.
std::string KernelIdentifier(std::string_view demangled);

// True when `text` (a source file) defines a function named `identifier`
// (the identifier followed by "(" or a template argument list "<").
bool SourceDefinesKernel(std::string_view text, std::string_view identifier);

struct SourceLocation {
  SourceOutcome outcome = SourceOutcome::kNoLineInfo;
  std::string message;  // what happened and what to do, for failures and fallbacks
  LineTableInfo lines;
  std::string tu_original;    // the unit as the code object records it
  std::string tu;             // local path (empty unless found)
  std::string root;           // local application source root
  std::string root_original;  // the same folder on the capture host
  std::optional<PathRemap> remap;
  std::vector<std::string> tried;  // where the unit was looked for
  std::vector<std::string> files;  // local line-table files under root (tu first)

  CompileOrigin compile_origin = CompileOrigin::kNone;
  // With local paths and its option files expanded (response_files.h).
  std::optional<CompileCommand> command;
  std::vector<OptionFileUse> option_files;  // those of `command`, read or not
  UnitChoice unit;                          // how the database entry was chosen
  std::string compile_note;               // why a default is used
  std::vector<std::string> databases_tried;
};

// Never fails: problems are classified in the result.
SourceLocation LocateSources(std::string_view code_object, const LocateOptions& options);

// Applies `remap` to every absolute path inside a command's words
// ("-I/a/b", "--x=/a/b", "/a/b/k.cu").
std::vector<std::string> RemapArgv(const std::vector<std::string>& argv, const PathRemap& remap);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_SOURCE_LOCATOR_H_
