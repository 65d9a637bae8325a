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

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
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

// The files the compiler's preprocessor says `tu` includes (dependency mode,
// -M, device side for `arch`, the command's flags, run in its directory),
// absolute, as the compiler lists them (system headers included). An error
// says why it did not run or what the compiler printed.
absl::StatusOr<std::vector<std::string>> PreprocessorDependencies(const CompileCommand& command,
                                                                  const std::string& tu,
                                                                  Language lang,
                                                                  const std::string& compiler,
                                                                  const std::string& arch);

// The include folders of a command, absolute: -I, -isystem, -iquote,
// -idirafter (joined, separate, or "=" joined as nvcc also takes them),
// nvcc's --include-path / --system-include.
std::vector<std::string> IncludeDirsOf(const CompileCommand& command);

// The textual #include graph of many units at once (a compilation database
// of hundreds of entries shares its headers): each file is read and each
// name resolved once. Not the preprocessor: every conditional include is
// taken and a computed #include is missed, so it is a cheap first filter.
class IncludeScanner {
 public:
  // Breadth first from `seed`: a quoted name resolves against the including
  // folder, then (quoted or angled) against `include_dirs`, then `fallback`
  // when set; a file is taken when it exists, is not a system or toolkit
  // file, and (when `root` is set) lies under `root`. Returns the files in
  // visit order, the seed first. With `stop_when_all` non-empty, stops as
  // soon as every file of it was reached.
  std::vector<std::string> Closure(const std::string& seed,
                                   const std::vector<std::string>& include_dirs,
                                   const std::string& root = "", const std::string& fallback = "",
                                   const std::vector<std::string>& stop_when_all = {});

 private:
  struct Directive {
    bool quoted;
    std::string name;
  };
  const std::vector<Directive>& DirectivesOf(const std::string& file);
  std::string Resolve(const std::string& file, const Directive& d,
                      const std::vector<std::string>& include_dirs, const std::string& root,
                      const std::string& fallback);

  std::map<std::string, std::vector<Directive>> directives_;
  std::map<std::string, std::string> resolved_;  // context + name -> path ("" none)
};

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_INCLUDE_CLOSURE_H_
