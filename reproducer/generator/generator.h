// generator.h: turns one capture into a self-contained, relocatable
// reproducer project folder (`kerncapctl repro`, GenerateReproducer):
//
//   kerncap.json   what the project is (project_manifest.h)
//   capture.kcap   the capture itself (kcap_file.h)
//   code/          the kernel's captured code object (kernel.cubin /
//                  kernel.hsaco / kernel.ptx) and its disassembly when the
//                  tool exists (kernel.sass: nvdisasm or cuobjdump -sass;
//                  kernel.s: llvm-objdump -d)
//   src/           the translation unit and its application headers, in
//                  their layout under the application's source root
//                  (source_locator.h, include_closure.h)
//   vfs.yaml       HIP: clang overlay from the original paths to src/
//   Makefile       recompile / run / validate / bench / asm / ptx /
//                  asm-build (build_file.h)
//
// A Triton capture (Triton shim metadata in kernel.jit_metadata_json) gets
// a Python project instead of src/ and the CUDA Makefile: kernel.py, run.py,
// kerncap_replay.py, a Makefile and README.md (triton_project.h).
//
// Without sources (binary-only kernels, no line table, wrong folder) the
// project has no src/ and its kerncap.json says why (source.outcome).
// Nothing is written at out_dir unless the whole project was written
// (project_writer.h).
#ifndef KERNCAP_REPRODUCER_GENERATOR_GENERATOR_H_
#define KERNCAP_REPRODUCER_GENERATOR_GENERATOR_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kerncap/v1/manifest.pb.h"
#include "nlohmann/json.hpp"
#include "reproducer/generator/tool_runner.h"

namespace kerncap::repro {

// Which project: kAuto is the Triton project when the capture carries the
// Triton shim's metadata (triton_project.h), else the CUDA/HIP one; kNative
// is always the CUDA/HIP one; kTriton fails (FailedPrecondition) without
// Triton metadata.
enum class ProjectKind { kAuto, kNative, kTriton };

struct GenerateOptions {
  ProjectKind kind = ProjectKind::kAuto;
  std::string out_dir;
  std::string source_dir;        // hint: the application's sources on this host
  std::string compile_commands;  // explicit compile_commands.json
  bool force = false;            // replace a non-empty out_dir
  bool binary_only = false;      // do not look for sources (a CUDA/HIP project)
  ToolPaths tools;               // empty entries are looked up
};

// One capture's manifest and bytes, from a .kcap or a store.
struct CaptureAccess {
  v1::CaptureManifest manifest;
  // The whole content of a chunk list (code objects).
  std::function<absl::StatusOr<std::string>(const v1::ChunkList&)> read_bytes;
  // Writes the capture as a .kcap file at `path` (which does not exist).
  std::function<absl::Status(const std::string& path)> write_kcap;
};

struct GenerateResult {
  std::string out_dir;
  nlohmann::json project;          // the content of kerncap.json
  std::vector<std::string> files;  // every file, relative, kerncap.json included
};

absl::StatusOr<GenerateResult> GenerateProject(const CaptureAccess& capture,
                                               const GenerateOptions& options);

// The same for a .kcap file (copied into the project as capture.kcap).
absl::StatusOr<GenerateResult> GenerateProjectFromKcap(const std::string& kcap_path,
                                                       const GenerateOptions& options);

// A one-paragraph human summary of a generated project (kerncapctl output).
std::string SummarizeProject(const GenerateResult& result);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_GENERATOR_H_
