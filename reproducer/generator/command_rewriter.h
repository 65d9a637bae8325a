// command_rewriter.h: turns the application's compile command for the
// kernel's translation unit into the flags of the reproducer's `recompile`
// target: same flags, relative paths, one kernel, one architecture.
//
// Two steps:
//   ExtractCoreFlags   drops what the reproducer decides itself: the
//                      compiler (a Makefile variable), the source file, -c,
//                      -o FILE, dependency output (-M*), the target
//                      architectures (-arch/-gencode/-code, --offload-arch:
//                      the captured one is used), HIP's -x LANG (CUDA keeps
//                      -x cu: a .cpp compiled as CUDA needs it), -ccbin, earlier
//                      -ivfsoverlay files, relocatable device code (-dc,
//                      -rdc=true: noted in relocatable_device_code), nvcc
//                      option files that could not
//                      be expanded (response_files.h expands the others
//                      into the command first). The flags stay
//                      as written (paths relative to the command's
//                      directory); the include closure runs them as they are.
//   MakeFlagsRelative  rewrites every path in the remaining flags: inside the
//                      application's root -> "src/<relative>" (the project's
//                      copy); a system or toolkit include folder -> dropped
//                      (the compiler finds its own), "-include /usr/include/x.h"
//                      -> "-include x.h"; anything else outside the root ->
//                      a Makefile variable EXT_<n> whose default is the
//                      original path (the one place a reproducer names an
//                      absolute path, documented in the Makefile and
//                      kerncap.json, overridable per machine).
#ifndef KERNCAP_REPRODUCER_GENERATOR_COMMAND_REWRITER_H_
#define KERNCAP_REPRODUCER_GENERATOR_COMMAND_REWRITER_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "reproducer/generator/compile_db.h"

namespace kerncap::repro {

enum class Language { kCuda, kHip };

struct DroppedFlag {
  std::string flag;
  std::string reason;
};

struct CoreFlags {
  std::string tool;  // basename of the original compiler ("nvcc", "clang++")
  // CUDA: the unit was compiled as relocatable device code (-dc, -rdc=true,
  // CMake's CUDA_SEPARABLE_COMPILATION). The reproducer then compiles it the
  // same way and device-links that one unit (nvcc -dlink -cubin) into the
  // loadable image the capture holds: compiled whole-program instead, the
  // kernel's code would differ.
  bool relocatable_device_code = false;
  std::vector<std::string> flags;
  std::vector<DroppedFlag> dropped;
};

CoreFlags ExtractCoreFlags(const CompileCommand& command, const std::string& tu, Language lang);

struct RelativeFlags {
  std::vector<std::string> flags;  // may contain $(EXT_<n>)
  // EXT_<n> -> the original absolute path.
  std::vector<std::pair<std::string, std::string>> external;
  std::vector<DroppedFlag> dropped;
};

// `directory`: where the original command ran (relative paths resolve
// there); `root`: the application's source root (copied to src/);
// `project_has_dir(rel)`: whether src/<rel> exists in the project (an include
// folder with nothing copied into it is dropped).
RelativeFlags MakeFlagsRelative(const std::vector<std::string>& core, const std::string& directory,
                                const std::string& root,
                                const std::function<bool(const std::string&)>& project_has_dir);

// The documented default when no compile command is known:
//   CUDA: -O3 -lineinfo -std=c++17 -I<folder of each copied header>
//   HIP:  -O3 -g -std=c++17 -I<folder of each copied header>
// Folders are given relative to the root ("include", "."), emitted as
// -Isrc/<folder>.
std::vector<std::string> DefaultFlags(Language lang, const std::vector<std::string>& header_dirs);

// Flags that make the device-only compile of one architecture, before the
// core flags: "-cubin -arch=sm_90" / "-x hip --cuda-device-only
// --no-gpu-bundle-output --offload-arch=gfx90a".
std::vector<std::string> DeviceCompileMode(Language lang, const std::string& arch);

// Quotes a word for a POSIX shell / Makefile recipe when it needs it
// ('$(' references are left alone).
std::string ShellQuote(const std::string& word);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_COMMAND_REWRITER_H_
