// response_files.h: expands the option files of a recorded compile command
// into its words, so that the include folders and macros they hold reach the
// include closure and the reproducer's recompile command.
//
// Which words name a file (measured with nvcc 13.0 and clang 15):
//   nvcc     --options-file FILE[,FILE...], --options-file=..., -optf FILE,
//            -optf=... (CMake's CUDA rules write
//            `--options-file CMakeFiles/<target>.dir/includes_CUDA.rsp`).
//            Words are separated by white space (newlines included); double
//            quotes group and are removed ("-I\"a b\"" is -Ia b); single
//            quotes and backslashes are ordinary characters. nvcc 13.0 takes
//            `@file` for an input file name, so it is left alone.
//   others   (clang, clang++, hipcc, gcc) @FILE, with GNU rules: white space
//            separates, '...' and "..." quote, a backslash escapes the next
//            character (LLVM's own tokenizer, as clang uses it).
// A relative FILE is relative to the command's directory, also inside
// another option file (both compilers resolve a nested file that way).
// Files may nest up to kMaxOptionFileDepth; a file that includes itself is
// an error. A file that cannot be read stays as written in the command (and
// ExtractCoreFlags drops it) and is reported in `files` with its error.
#ifndef KERNCAP_REPRODUCER_GENERATOR_RESPONSE_FILES_H_
#define KERNCAP_REPRODUCER_GENERATOR_RESPONSE_FILES_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "reproducer/generator/compile_db.h"

namespace kerncap::repro {

inline constexpr int kMaxOptionFileDepth = 10;

struct OptionFileUse {
  std::string flag;  // as written in the command or the including file ("--options-file x.rsp")
  std::string path;  // the local file read (absolute)
  int depth = 0;     // 0: named by the command itself
  std::string error;  // empty: expanded
};

struct ExpandedCommand {
  CompileCommand command;  // argv with the words of every readable file in place
  std::vector<OptionFileUse> files;
};

// `localize` maps an absolute path of the capture host to this host's (the
// identity when the tree did not move); it is applied to each file's path
// before reading it. Never fails: unreadable files are reported in `files`.
ExpandedCommand ExpandOptionFiles(
    const CompileCommand& command,
    const std::function<std::string(const std::string&)>& localize = nullptr);

// nvcc's splitting of an options file (rules above).
std::vector<std::string> SplitNvccOptionsFile(std::string_view text);

// The GNU splitting of a clang @file (LLVM's tokenizer; without LLVM, the
// shell-word splitter of compile_db.h).
std::vector<std::string> SplitGnuResponseFile(std::string_view text);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_RESPONSE_FILES_H_
