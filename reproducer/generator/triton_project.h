// triton_project.h: the Python project of a Triton capture (kerncapctl repro
// of a capture whose kernel.jit_metadata_json holds the Triton shim's
// kerncap.triton-jit/1 document, python_shim/README.md "What is recorded"):
//
//   kernel.py          the kernel's source, editable: the target @triton.jit
//                      function with its autotune/heuristics (and Inductor
//                      triton_heuristics.*) decorators removed, plus the
//                      module's @triton.jit helpers, constants and imports it
//                      uses. Sliced out of the module file (functions{}.file)
//                      by slice_kernel.py (python3 -I, ast only) when the file
//                      is readable here; else the recorded function source
//                      (kernel_source.origin says which, and why)
//   deps/              the application modules kernel.py imports helpers from,
//                      sliced the same way (run.py serves them, so the
//                      application's package is not needed)
//   run.py             applies the application's build environment, restores
//                      the capture through kerncap_replay.py before CUDA
//                      starts, compiles kernel.py under the application's file
//                      names and lines, calls the JIT function with the pinned
//                      variant (constexprs, launch and compile options, the
//                      captured grid and scratch), compares the binary with
//                      the captured code object (refusing an unchanged
//                      kernel.py that does not rebuild it), validates per
//                      buffer extent, --bench through the replay library,
//                      --config/--candidate/--grid, --dry-run (no GPU)
//   kerncap_replay.py  the replay library's Python binding (a copy, embedded
//                      at build time from reproducer/replay/capi/)
//   Makefile           run validate bench plan configs replay help clean
//   README.md
//
// kerncap.json gets kind "triton" and a "triton" section:
//   schema, kernel_name, producer
//   variant           {id, selected_by: "code_object_digest" (the only way: a
//                      capture whose binary no recorded variant has is refused),
//                      binary, triton_version, triton_hash, target, num_warps,
//                      num_stages, num_ctas, maxnreg, shared, config,
//                      config_index, via, compiled_during}
//   captured_binary   {file ("code/kernel.cubin"), format, sha256 (hex): the capture's
//                      kernel code object; run.py compares Triton's binary with it byte
//                      for byte and without debug sections (kernel.py's path and line
//                      numbers are in the binary's line table)}
//   function          {name, qualname, module, file (capture host), first_line,
//                      source_sha256, source_truncated, params[]}
//   signature, constexprs, specialization   as recorded for the variant
//   build             the variant's build environment as the shim recorded it:
//                      {ptxas {path, version, knob}, env {cache-invalidating
//                      variables}, debug_knob, libdevice}; run.py uses that
//                      ptxas (or one of the same release) and environment
//   launch_options    {num_warps, num_stages, num_ctas[, maxnreg]} pinned
//   compile_options   other recorded options run.py passes to the JIT when its
//                      Triton knows them (derived values left out)
//   options_from_inductor[]  option names derived from Inductor's decorator
//                      (debug, sanitize_overflow...) for variants recorded
//                      without options (torch's static launcher)
//   config, autotune  the candidate it came from; the autotuner's configs,
//                      chosen config and index, key args, kind
//   inductor          Inductor's description (when an Inductor kernel)
//   parameters[]      the JIT function's parameters in order:
//                      {name, index, type, kind: "pointer"|"scalar"|
//                       "constexpr"|"tuple"|"tensordesc"|"unsupported",
//                       constexpr_declared, value (constexpr), kernel_args[]
//                       (indexes into kerncap.json "arguments"), elements[]
//                       (tuple), tensordesc: {dtype, block_shape, ndim,
//                       layout: "tma"|"pointer", base, region}, note}
//   kernel_params     {captured, used, trailing_extra, note}: the captured
//                      kernel's parameters; Triton appends scratch pointers
//                      after the function's own
//   scratch           {global, profile: {kernel_arg, captured (address),
//                      region, size_per_program, align}} (CUDA): run.py's
//                      Triton allocators return the captured pointers
//   compile_args      {tensors {name: {dtype, element_size, shape, strides,
//                      span_bytes}}, scalars {name: value}} of the launch that
//                      compiled the variant (shim): run.py's buffer extents
//                      when the captured scalars are the same
//   kernel_source     {file: "kernel.py", origin: "module"|"recorded_source",
//                      module_file (capture host), module_matches_capture,
//                      decorators_removed[], dropped_imports[], note, sha256
//                      (of the generated kernel.py: run.py tells an edit by it),
//                      layout[] {name, kind, def_line (in kernel.py),
//                      original_def_line}: run.py compiles kernel.py under
//                      module_file's name with each def at its original line,
//                      so that the line table and device-assert strings are the
//                      captured binary's,
//                      modules[] {module, path ("deps/pkg/mod.py"), original_file,
//                      package, names, layout, sha256}: the application modules
//                      kernel.py imports helpers from, sliced like kernel.py
//                      (run.py serves them from deps/, so the application's
//                      package is not needed), packages[] (empty __init__.py
//                      files), not_copied[] {module, names, why}}
//   binding           {file: "kerncap_replay.py", embedded: bool}
//   device_ordinal, grid
#ifndef KERNCAP_REPRODUCER_GENERATOR_TRITON_PROJECT_H_
#define KERNCAP_REPRODUCER_GENERATOR_TRITON_PROJECT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kerncap/v1/manifest.pb.h"
#include "nlohmann/json.hpp"
#include "reproducer/generator/project_writer.h"

namespace kerncap::repro {

inline constexpr char kTritonJitSchema[] = "kerncap.triton-jit/1";

// True when the capture carries the Triton shim's metadata document.
bool HasTritonMetadata(const v1::CaptureManifest& m);

struct TritonInputs {
  const v1::CaptureManifest* capture = nullptr;
  std::string code_sha256;  // hex SHA-256 of the kernel's captured code object
  std::string code_format;  // "cubin" / "hsaco"
  std::string code_file;    // "code/kernel.cubin" (in the project)
  // The ptxas release that built the captured cubin, from its
  // .note.nv.tkinfo (toolkit_notes.h), e.g. "13.0"; empty when unknown. A
  // binary from a warm compile cache may have been built by another ptxas
  // than the one the application's process would use now.
  std::string ptxas_release;
  std::string ptxas_version_line;
  std::string python3;      // interpreter for slice_kernel.py; empty: none
};

struct TritonProjectFiles {
  nlohmann::json section;  // kerncap.json "triton"
  std::vector<std::string> warnings;
};

// Writes kernel.py, run.py, kerncap_replay.py, Makefile and README.md into
// `stage`. FailedPrecondition when the capture has no usable Triton metadata
// (none, not JSON, no variant, no recorded variant whose binary is the
// captured code object, a variant whose num_warps is not the captured block,
// no source at all, parameters that do not fit the captured kernel's), with a
// message that says which.
absl::StatusOr<TritonProjectFiles> WriteTritonProject(const TritonInputs& in, ProjectStage& stage);

// The "parameters" and "kernel_params" of the section for one variant (the
// mapping of the JIT function's parameters onto the captured kernel's).
// Exposed for tests.
struct TritonParameterMap {
  nlohmann::json parameters;
  nlohmann::json kernel_params;
};
absl::StatusOr<TritonParameterMap> MapTritonParameters(const v1::CaptureManifest& m,
                                                       const nlohmann::ordered_json& variant,
                                                       const nlohmann::ordered_json& function);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_TRITON_PROJECT_H_
