// compile_db.h: compile_commands.json (the JSON compilation database written
// by CMake's CMAKE_EXPORT_COMPILE_COMMANDS, Bear, Ninja's compdb tool):
//
//   [ { "directory": "/abs/build",           // working directory of the command
//       "file": "../src/kernel.cu",          // relative to directory, or absolute
//       "command": "nvcc -O3 -I../include -c ../src/kernel.cu -o k.o",  // shell words
//       "arguments": ["nvcc", "-O3", ...],   // alternative to "command"
//       "output": "k.o" },                   // optional
//     ... ]
#ifndef KERNCAP_REPRODUCER_GENERATOR_COMPILE_DB_H_
#define KERNCAP_REPRODUCER_GENERATOR_COMPILE_DB_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::repro {

struct CompileCommand {
  std::string directory;          // absolute, normalised
  std::string file;               // absolute, normalised
  std::vector<std::string> argv;  // argv[0] is the compiler
  std::string database;           // the compile_commands.json it came from
};

// Splits a command line into words the way a POSIX shell would for plain
// commands: whitespace separates, '...' is literal, "..." allows \" \\ \$ \`,
// a backslash outside quotes escapes the next character. InvalidArgument on
// an unterminated quote.
absl::StatusOr<std::vector<std::string>> SplitCommandLine(std::string_view command);

// Parses the database text; entries without a usable command are skipped.
// InvalidArgument naming `database_path` when it is not a JSON array.
absl::StatusOr<std::vector<CompileCommand>> ParseCompileDatabase(std::string_view json,
                                                                 const std::string& database_path);

// Reads and parses the file.
absl::StatusOr<std::vector<CompileCommand>> LoadCompileDatabase(const std::string& path);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_COMPILE_DB_H_
