// include_closure.h: the files of the application a translation unit needs:
// the unit and every header it includes, transitively, that lies under the
// application's source root (toolkit and system headers are never copied).
//
// Preferred: the compiler's own preprocessor in dependency mode with the
// original flags, run in the original directory (`nvcc -M`, `clang -M`), so
// include paths, macros and conditional includes are exactly those of the
// real build. Fallback (no compile command, no compiler, or it failed): the
// line table's files plus a scan of #include directives resolved against the
// including folder, the command's -I folders and the root (conditional
// includes are all taken; a computed #include is missed). The method and the
// reason for a fallback are reported.
#ifndef KERNCAP_REPRODUCER_GENERATOR_INCLUDE_CLOSURE_H_
#define KERNCAP_REPRODUCER_GENERATOR_INCLUDE_CLOSURE_H_

#include <string>
#include <string_view>
#include <vector>

#include "reproducer/generator/command_rewriter.h"
#include "reproducer/generator/source_locator.h"
#include "reproducer/generator/tool_runner.h"

namespace kerncap::repro {

struct IncludeClosure {
  std::vector<std::string> files;  // local absolute paths under the root, the unit first
  std::string method;              // "preprocessor" or "scan"
  std::string note;                // why the scan was used
};

// `loc` must be kFound.
IncludeClosure CollectIncludeClosure(const SourceLocation& loc, Language lang,
                                     const ToolPaths& tools, const std::string& arch);

// The prerequisites of a make-style dependency rule ("t.o: a.cu \\\n b.h"),
// with "\ " unescaped, in order.
std::vector<std::string> ParseMakeDeps(std::string_view text);

// The scan fallback: `seeds` and everything they #include that resolves
// under `root`.
std::vector<std::string> ScanIncludes(const std::vector<std::string>& seeds,
                                      const std::vector<std::string>& include_dirs,
                                      const std::string& root);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_INCLUDE_CLOSURE_H_
