// minimal_unit.h: the fast recompile path of a CUDA reproducer. `make
// recompile` of the whole translation unit parses all of the application's
// headers and generates every kernel of the file (llama.cpp's norm.cu: ~2 s of
// its ~2.5 s is cicc parsing common.cuh and the toolkit headers). The
// minimal unit is one file, kernel.cu at the project's root, holding the
// captured kernel and only the declarations it transitively needs, cut out of
// the project's copy of the sources by kerncap-cuda-slice (clang's AST;
// slicer/kernel_slicer_main.cc says what is kept and how), compiled with the
// same flags.
//
// It is self-verifying: at generation the minimal unit is compiled exactly as
// `make recompile` will compile it, and the captured kernel's fingerprint
// (KernelFingerprint) in that cubin is compared with the captured code
// object's (when that differs, with the whole unit compiled here: another
// toolkit than the application's changes both alike). Only when identical is kernel.cu written and made the
// edit target; otherwise the project recompiles the whole unit as before and
// says why (kerncap.json "edit", `make recompile`'s first line).
//
// The NVRTC path: a verified unit is also compiled at generation by
// kerncap-nvrtc (reproducer/nvrtc: NVRTC in one process, ~5-10x faster than
// nvcc's process chain) with the same flags, exactly as `make recompile`
// will; only when the kernel's fingerprint is identical to the one nvcc's
// build verified with does make recompile use kerncap-nvrtc
// (MinimalUnit::compiler; kerncap.json edit.compiler). Otherwise it stays
// nvcc, with the reason: kerncap-nvrtc missing, a flag it refuses (exit 9),
// no libnvrtc (exit 3), NVRTC rejecting the unit (host functions, C++
// standard headers: NVRTC has neither), other code, relocatable device code.
//
// Outcomes (MinimalUnit::outcome):
//   verified       identical fingerprint: kernel.cu is the edit target
//   differs        the minimal unit compiles but its kernel differs
//   compile_failed nvcc rejected the minimal unit (a declaration the slice
//                  missed, e.g. one named only inside a macro argument)
//   slice_failed   the slicer could not parse the unit or find the kernel
//   unavailable    no slicer (built without libclang-15-dev), no nvcc, no ELF
//                  reader, or a capture whose code cannot be compared (PTX)
#ifndef KERNCAP_REPRODUCER_GENERATOR_MINIMAL_UNIT_H_
#define KERNCAP_REPRODUCER_GENERATOR_MINIMAL_UNIT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "reproducer/generator/kernel_code.h"

namespace kerncap::repro {

inline constexpr char kMinimalUnitFile[] = "kernel.cu";

struct MinimalUnitQuery {
  std::string project_dir;  // where recompile runs (the staged project folder)
  std::string unit;         // the whole unit, relative to project_dir ("src/...")
  std::string source_root;  // relative to project_dir: the application's code ("src")
  // recompile's FLAGS, relative to project_dir; $(EXT_n) are replaced by
  // `external`'s paths.
  std::vector<std::string> flags;
  std::vector<std::pair<std::string, std::string>> external;
  std::string arch;  // "sm_90"
  bool relocatable_device_code = false;
  std::string kernel_symbol;
  std::string_view captured_code;  // the captured cubin
  std::string nvcc;
  std::string slicer;  // kerncap-cuda-slice; empty: unavailable
  std::string nvrtc;   // kerncap-nvrtc; empty: make recompile keeps nvcc
  int timeout_s = 300;
};

// make recompile's compiler of a verified minimal unit.
struct UnitCompiler {
  std::string tool = "nvcc";  // "nvrtc": kerncap-nvrtc builds the kernel nvcc builds
  bool verified = false;      // the NVRTC build was compared and is identical
  std::string reason;         // why not nvrtc (empty when it is)
  double nvrtc_seconds = 0;   // kerncap-nvrtc's compile at generation (0: not run)
};

struct MinimalUnit {
  std::string outcome = "unavailable";
  std::string reason;          // why it is not the edit target (empty when verified)
  std::string text;            // the unit (when verified)
  nlohmann::json slice;        // the slicer's report (declarations, macros, includes, ...)
  double slice_seconds = 0;    // kerncap-cuda-slice
  double compile_seconds = 0;  // the verification compile (what make recompile costs)
  // "captured": the captured code itself; "whole_unit": the whole unit
  // compiled here (the captured code differs from both: another toolkit).
  std::string verified_against;
  double whole_compile_seconds = 0;  // only when compared with the whole unit
  UnitCompiler compiler;             // only meaningful when verified
  bool verified() const { return outcome == "verified"; }
};

// Never fails: every problem is an outcome with a reason.
MinimalUnit BuildMinimalUnit(const MinimalUnitQuery& query);

// The slicer's preprocessor arguments from nvcc flags: -D/-U/-I/-isystem/
// -include/-std (nvcc's long and '=' spellings too); everything else only
// matters to code generation, which nvcc does.
std::vector<std::string> SlicerArgs(const std::vector<std::string>& nvcc_flags);

// "sm_90" -> "900", "sm_90a" -> "900"; "" when not an sm_ name.
std::string CudaArchMacro(const std::string& arch);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_MINIMAL_UNIT_H_
