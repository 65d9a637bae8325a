// source_locator.h: finds a captured kernel's translation unit on this host
// and the exact command it was compiled with.
//
//   1. The code object's DWARF line table names the files it was built from
//      (line_table.h), as paths of the capture host.
//   2. The translation unit is the compile unit's file (HIP -g), else the
//      compilable file (.cu .hip .cpp .cc .cxx .c) of the table whose text
//      defines the kernel (a device-linked cubin, nvcc -rdc, carries the line
//      tables of every unit of the application), else the first compilable
//      file.
//   3. Each recorded path is used as is when it exists here; otherwise it is
//      remapped into the --source-dir hint by the longest relative suffix
//      that exists there ("/build/app/src/k.cu" -> HINT/app/src/k.cu, else
//      HINT/src/k.cu, else HINT/k.cu). The prefix found for the translation
//      unit is applied to every other path (and to the compile command).
//   4. compile_commands.json: --compile-commands, else HINT and HINT/build,
//      else walking up from the translation unit's folder (each folder and
//      its build/). The entry whose file is the translation unit gives the
//      command, with capture-host paths remapped.
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
  std::optional<CompileCommand> command;  // with local paths
  std::string compile_note;               // why a default is used
  std::vector<std::string> databases_tried;
};

// Never fails: problems are classified in the result.
SourceLocation LocateSources(std::string_view code_object, const LocateOptions& options);

// The file of `db` compiled by an entry for `tu` (exact path, else same
// path after `remap`). nullptr when none.
const CompileCommand* FindCompileCommand(const std::vector<CompileCommand>& db,
                                         const std::string& tu,
                                         const std::optional<PathRemap>& remap);

// Applies `remap` to every absolute path inside a command's words
// ("-I/a/b", "--x=/a/b", "/a/b/k.cu").
std::vector<std::string> RemapArgv(const std::vector<std::string>& argv, const PathRemap& remap);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_SOURCE_LOCATOR_H_
