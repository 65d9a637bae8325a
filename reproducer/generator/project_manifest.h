// project_manifest.h: kerncap.json, the description of a reproducer project.
//
// Format (schema_version 1; fields are only ever added):
//   schema            "kerncap.reproducer"
//   schema_version    1
//   generator         "kerncap <version>"
//   kind              "source" (sources found, recompile works) | "binary" |
//                     "triton" (a Python project: kernel.py + run.py, triton_project.h)
//   kernel            {mangled, demangled, platform: "cuda"|"hip", arch: "sm_90"|"gfx90a"}
//   launch            {grid[3], block[3], shared_mem_bytes, private_mem_bytes, cluster[],
//                      cooperative, attributes{name: value}}   (HSA grid: work-items)
//   arguments         [{index, offset, size, kind: "pointer"|"value"|"hidden"|"unknown",
//                       name, type, value_kind, value_hex,
//                       pointer?: {value: "0x..", region: {index, kind, base: "0x..",
//                                  size, name} | null, offset, note}}]
//                     every 8-byte argument is looked up in the pre-dispatch regions;
//                     "pointer" is present when it is a pointer or points into one
//   code_object       {file: "code/kernel.cubin", format, disassembly: "code/kernel.sass"|null,
//                      disassembler, note}
//   toolkit           {application: {tool: "ptxas", version_line, release: "13.0",
//                      version: "13.0.88", build, tool_options, ptx_arch: "compute_90",
//                      cuinfo_toolkit: "13.0"} | null (from the cubin's .note.nv.tkinfo and
//                      .note.nv.cuinfo, toolkit_notes.h), reproducer: {tool: "nvcc",
//                      version_line, release, version} | null (its --version at generation),
//                      same: true|false|null (null: one side unknown), note}
//                     (CUDA cubins; HIP and PTX captures: application null and a note)
//   compile           {present, origin: "compile_commands"|"default"|"none", reason,
//                      original_tool, tool_variable: "NVCC"|"CLANG", command[] (relative;
//                      $(VAR) for tools and external paths), translation_unit: "src/..",
//                      external_paths{EXT_n: "/abs"}, dropped_flags[{flag, reason}],
//                      link_command[] (relocatable device code, -rdc=true: recompile
//                      compiles to build/kernel.rdc.cubin and device-links it alone into
//                      build/kernel.cubin; else []),
//                      option_files[{flag, file, depth, expanded, error}] (origin
//                      compile_commands: the options files / @files expanded into the
//                      command, response_files.h; one not expanded is also a warning)}
//   source            {outcome: "found"|"no_line_info"|"sources_not_found"|
//                      "no_dwarf_reader"|"not_an_object_file", message, translation_unit
//                      {original, project}, headers[] (project paths), line_table_files[]
//                      (capture-host paths), tried[], remap {from, to}, include_closure
//                      {method, note}, databases_tried[], unit_selection {method:
//                      "entry"|"include_scan"|"preprocessor"|"device_compile",
//                      candidates[], ambiguous, note} (with a database: how its entry
//                      was chosen, unit_selector.h; ambiguous is also a warning)}
//                     (paths under "source" other than project paths are diagnostics of
//                     the capture and generation hosts; nothing in the project uses them)
//   provenance        {capture_id, capture_source, host, pid, process_name, command_line[],
//                      captured_unix_ms, captured_at (RFC 3339 UTC), dispatch_index,
//                      device{name, arch, uuid}, driver{driver_version, runtime_version,
//                      tool_version}, tags{}}
//   files             [{path, bytes, sha256, role}] every file of the project but
//                     kerncap.json itself; role: capture|code|disassembly|source|header|
//                     build|overlay|minimal_unit (kernel.cu); Triton projects: source (kernel.py), script
//                     (run.py), binding (kerncap_replay.py), doc (README.md)
//   edit              CUDA/HIP projects with sources: which file to edit and what
//                     make recompile compiles: {file: "kernel.cu"|"src/..", unit:
//                     "minimal"|"whole", recompile_full: "src/..", note,
//                     minimal_unit: {outcome: "verified"|"differs"|"compile_failed"|
//                     "slice_failed"|"unavailable", reason (not verified: why; also a
//                     warning), verified_against: "captured"|"whole_unit" (verified),
//                     slice {kernel, template, declarations, macros, includes[],
//                     parse_errors, first_parse_error} (from kerncap-cuda-slice),
//                     seconds {slice, compile, compile_whole}} (minimal_unit.h),
//                     compiler (a verified minimal unit only): {tool: "nvrtc"|"nvcc"
//                     (what make recompile runs), verified (kerncap-nvrtc's build was
//                     compared and identical), reason (why not nvrtc; "" when it is),
//                     seconds {nvrtc, nvcc}} (the compiles at generation)}
//   triton            Triton projects only: the pinned variant, parameter mapping,
//                     kernel source origin... (format in triton_project.h)
//   warnings          [text]
#ifndef KERNCAP_REPRODUCER_GENERATOR_PROJECT_MANIFEST_H_
#define KERNCAP_REPRODUCER_GENERATOR_PROJECT_MANIFEST_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kerncap/v1/manifest.pb.h"
#include "nlohmann/json.hpp"
#include "reproducer/generator/command_rewriter.h"
#include "reproducer/generator/include_closure.h"
#include "reproducer/generator/source_locator.h"
#include "reproducer/generator/toolkit_notes.h"

namespace kerncap::repro {

inline constexpr int kProjectSchemaVersion = 1;

struct ProjectFile {
  std::string path;  // relative to the project root
  uint64_t bytes = 0;
  std::string sha256;  // hex
  std::string role;
};

struct CompileSection {
  CompileOrigin origin = CompileOrigin::kNone;
  std::string reason;
  std::string original_tool;
  std::string tool_variable;         // "NVCC" / "CLANG"
  std::vector<std::string> command;  // "$(NVCC)" then flags, -o, source
  // Relocatable device code: the device link after `command` (else empty).
  std::vector<std::string> link_command;
  std::string translation_unit;      // "src/..."
  std::vector<std::pair<std::string, std::string>> external;
  std::vector<DroppedFlag> dropped;
};

struct ToolkitSection {
  bool applies = false;  // a CUDA cubin (HIP and PTX: no toolkit notes)
  ToolkitInfo application;
  std::string reproducer_tool;  // "nvcc"
  std::string reproducer_version_line;
  CudaVersion reproducer;
  std::string note;  // what is known, what differs
};

struct CodeObjectSection {
  std::string file;
  std::string format;       // "cubin", "ptx", "hsaco", "fatbin"
  std::string disassembly;  // empty: none
  std::string disassembler;
  std::string note;
};

struct ProjectFacts {
  const v1::CaptureManifest* capture = nullptr;
  std::string platform;  // "cuda" / "hip"
  std::string arch;
  bool source_project = false;
  CodeObjectSection code;
  ToolkitSection toolkit;
  CompileSection compile;
  const SourceLocation* source = nullptr;  // null: not looked for
  const IncludeClosure* closure = nullptr;
  std::vector<std::string> headers;  // project paths
  std::vector<ProjectFile> files;
  std::vector<std::string> warnings;
  nlohmann::json triton;  // null unless a Triton project (triton_project.h)
  nlohmann::json edit;    // null: no "edit" key (binary-only and Triton projects)
};

nlohmann::json BuildProjectManifest(const ProjectFacts& facts);

// The "arguments" array alone (pointer arguments resolved to regions).
nlohmann::json ArgumentsJson(const v1::CaptureManifest& capture);

// "0x7f3a00000000"
std::string Hex(uint64_t v);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_PROJECT_MANIFEST_H_
