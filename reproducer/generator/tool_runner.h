// tool_runner.h: finds the external tools the generator uses (nvcc, nvdisasm,
// cuobjdump, clang-15, llvm-objdump-15, python3, kerncap-cuda-slice,
// kerncap-nvrtc) and runs them with captured output.
//
// The generator never needs a tool: every use has a documented outcome when
// it is missing (no disassembly file, include closure from a header scan).
// Tools are looked up on PATH, then in the toolkit's usual install folders
// (/usr/local/cuda/bin, /usr/lib/llvm-15/bin), unless an explicit path is set;
// kerncap's own tools (kerncap-cuda-slice, kerncap-nvrtc) beside the running
// kerncap binary first.
#ifndef KERNCAP_REPRODUCER_GENERATOR_TOOL_RUNNER_H_
#define KERNCAP_REPRODUCER_GENERATOR_TOOL_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::repro {

// Explicit tool paths; empty: looked up (FindTool).
struct ToolPaths {
  std::string nvcc;
  std::string nvdisasm;
  std::string cuobjdump;
  std::string clang;         // clang with HIP support (clang-15)
  std::string llvm_objdump;  // AMDGPU disassembler
  std::string python3;       // slices Triton kernels out of their module (triton_project.h)
  std::string slicer;        // kerncap-cuda-slice: CUDA minimal units (minimal_unit.h)
  std::string nvrtc;         // kerncap-nvrtc: the minimal unit's NVRTC recompile (minimal_unit.h)
};

// Absolute path of the first executable `name` on $PATH or in `extra_dirs`;
// empty when there is none. A name containing '/' is checked as is.
std::string FindTool(const std::string& name, const std::vector<std::string>& extra_dirs = {});

// The tools of `explicit_paths` with every empty entry looked up.
ToolPaths ResolveTools(const ToolPaths& explicit_paths);

struct ToolResult {
  int exit_code = -1;  // -1: killed by a signal or timed out
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv[0] (a path) with argv in `cwd` (empty: the current directory),
// stdin from /dev/null, stdout and stderr captured. An error only when the
// process could not be started.
absl::StatusOr<ToolResult> RunTool(const std::vector<std::string>& argv,
                                   const std::string& cwd = "", int timeout_s = 120);

// A fresh folder under the system's temporary directory for tools' outputs
// ("<tmp>/<prefix>XXXXXX"), removed with everything in it when this goes
// out of scope. path() is empty when it could not be created.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_TOOL_RUNNER_H_
