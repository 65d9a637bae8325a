// unit_selector.h: which entry of a compilation database compiled the
// captured kernel. When a database exists, the translation unit is always a
// file the database compiles: a kernel defined in a header (.cuh, .hpp), or
// in a .cu that another .cu #includes (the outer one defining macros the
// inner one needs), is compiled through the entry whose include closure
// holds the defining file, never through that file itself.
//
// The steps, each only when the one before left more than one candidate:
//   1. entry      the entries whose own file defines the kernel (or, the
//                 kernel's file unknown, is a file of the line table)
//   2. scan       every entry's textual include closure (IncludeScanner,
//                 shared across entries: fast for hundreds of them) holds
//                 the defining file; ranked by how many of the line table's
//                 files (those that contributed device code) it covers, the
//                 best kept
//   3. preprocessor  the compiler's -M with the entry's flags (conditional
//                 includes as the build had them) confirms the closure
//   4. device compile  CUDA: each candidate's PTX first (front end and NVVM
//                 at -O0, no ptxas: an eighth of a full device compile for
//                 heavy templates, e.g. llama.cpp's mmq instances), keeping
//                 the candidates whose PTX has the captured symbol as an
//                 .entry (and those whose PTX compile failed); one that
//                 defines it left is the unit. Then the candidates left compiled
//                 device-only for the captured architecture: the first in
//                 database order whose kernel (the captured symbol) has
//                 exactly the captured code wins; else the first that
//                 defines the symbol. Compiles run `jobs` at a time (template
//                 instance layouts put one kernel header in dozens of units)
// What is left ambiguous is said (`ambiguous`, `note`) and the first
// candidate in database order is taken. Entries must have their option
// files expanded and local paths (source_locator.h does both).
#ifndef KERNCAP_REPRODUCER_GENERATOR_UNIT_SELECTOR_H_
#define KERNCAP_REPRODUCER_GENERATOR_UNIT_SELECTOR_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "reproducer/generator/command_rewriter.h"
#include "reproducer/generator/compile_db.h"
#include "reproducer/generator/kernel_code.h"

namespace kerncap::repro {

struct UnitQuery {
  std::vector<std::string> line_files;  // local files of the line table (existing, not system)
  std::string defining_file;            // local file that defines the kernel; empty: unknown
  std::string kernel_symbol;            // the captured symbol (mangled); empty: no compile check
  std::string_view code_object;         // the captured code object
  Language lang = Language::kCuda;
  std::string arch;      // "sm_90"
  std::string compiler;  // nvcc / clang for steps 3 and 4; empty: not run
  size_t max_preprocess = 32;
  size_t max_compile = 64;  // candidates device-compiled (the PTX screen makes each cheap)
  int compile_timeout_s = 600;
  int jobs = 0;  // compiles at once; 0: the host's cores, at most 8
};

struct UnitChoice {
  int entry = -1;  // index into the database; -1: no entry compiles the kernel's files
  std::string method;  // "entry", "include_scan", "preprocessor", "device_compile"
  std::vector<std::string> candidates;  // the files left after the last step (database order)
  bool ambiguous = false;
  std::string note;  // how it was decided, what stayed open
};

UnitChoice ChooseUnit(const std::vector<CompileCommand>& db, const UnitQuery& query);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_UNIT_SELECTOR_H_
