// toolkit_notes.h: which CUDA toolkit built a cubin, from the ELF notes
// ptxas writes into it (read with LLVM's object library, every offset
// checked against the descriptor).
//
// Byte formats (measured with CUDA 13.0's nvcc -cubin; notes are owned by
// "NVIDIA Corp", little endian):
//   .note.nv.tkinfo  type 0x7d0. Descriptor: u32 format (2), then five u32
//                    offsets into the string area that follows them (at byte
//                    24): [0] an unnamed string (empty so far), [1] the tool
//                    ("ptxas"), [2] its version line ("Cuda compilation
//                    tools, release 13.0, V13.0.88"), [3] its build ("Build
//                    cuda_13.0.r13.0/compiler.36424714_0"), [4] the ptxas
//                    options ("-lineinfo  -arch sm_90 -m 64 "). Strings end
//                    at a NUL.
//   .note.nv.cuinfo  type 0x3e8. Descriptor: u16 format (2), u16 the virtual
//                    architecture the PTX was compiled for (80 for
//                    compute_80), u16 the toolkit version (130 for 13.0),
//                    u16 zero.
// A cubin without the notes (older toolkits, other producers) is not an
// error: `found` stays false. Malformed notes are reported in `problems`.
#ifndef KERNCAP_REPRODUCER_GENERATOR_TOOLKIT_NOTES_H_
#define KERNCAP_REPRODUCER_GENERATOR_TOOLKIT_NOTES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::repro {

inline constexpr uint32_t kNvNoteTkInfo = 0x7d0;
inline constexpr uint32_t kNvNoteCuInfo = 0x3e8;

// "release 13.0, V13.0.88" out of a version line.
struct CudaVersion {
  std::string release;  // "13.0"
  std::string version;  // "13.0.88"
  bool empty() const { return release.empty() && version.empty(); }
};

// The version in text holding "release X, VY" (a tkinfo version line, or
// the output of nvcc/ptxas --version); empty when there is none.
CudaVersion ParseCudaVersion(std::string_view text);

struct ToolkitInfo {
  bool found = false;         // a .note.nv.tkinfo was read
  std::string tool;           // "ptxas"
  std::string version_line;   // "Cuda compilation tools, release 13.0, V13.0.88"
  CudaVersion version;        // from version_line
  std::string build;          // "Build cuda_13.0.r13.0/compiler.36424714_0"
  std::string tool_options;   // "-lineinfo -arch sm_90 -m 64" (white space collapsed)
  bool has_cuinfo = false;    // a .note.nv.cuinfo was read
  int ptx_arch = 0;           // 80: the PTX was compute_80
  int cuinfo_toolkit = 0;     // 130: toolkit 13.0
  std::vector<std::string> problems;
};

// InvalidArgument when `elf` is not an ELF file; Unimplemented without LLVM.
absl::StatusOr<ToolkitInfo> ReadToolkitNotes(std::string_view elf);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_TOOLKIT_NOTES_H_
