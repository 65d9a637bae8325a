// build_file.h: the reproducer's Makefile, rendered from
// templates/Makefile.in (and templates/cuda_compile.mk.in, nvcc's compile
// recipe) by text_template.h; this file prepares the values (quoted and
// escaped for Make) and the flags that pick the template's sections; the
// text itself lives in the template. Every path in it is relative to
// the project folder; tools are variables with defaults looked up on PATH
// (make NVCC=/opt/cuda/bin/nvcc ...). Targets:
//   help       lists the targets
//   recompile  CUDA with a verified minimal unit (minimal_unit.h): kernel.cu
//              alone (the kernel and the declarations it needs), same flags,
//              -> build/kernel.cubin, compiled by kerncap-nvrtc ($(NVRTC),
//              NVRTC in one process) when that was verified at generation to
//              build the kernel nvcc builds (COMPILER=nvcc: nvcc), else by
//              nvcc; its first line says which (and why not NVRTC), and every
//              make recompile prints a notice while files under src/ are
//              newer than kernel.cu (edits there need recompile-full). Otherwise the kernel's
//              translation unit, device code for the captured architecture, original flags ->
//              build/kernel.cubin (nvcc -cubin; CUDA: its first line says why
//              there is no minimal unit) / build/kernel.hsaco (clang -x hip
//              --cuda-device-only ... -ivfsoverlay vfs.yaml). CUDA, when the
//              capture recorded the application's toolkit (APP_CUDA_VERSION,
//              toolkit_notes.h): a notice on stderr when `$(NVCC) --version`
//              is another version (ptx and asm-build: $(NVCC), $(PTXAS))
//   recompile-full
//              CUDA: the whole translation unit, always rebuilt (as recompile
//              without a minimal unit)
//   run, validate, bench
//              kerncap-replay on capture.kcap, with --code-object=build/...
//              once recompile (or asm-build) produced one, else the captured
//              code object; REPLAY_FLAGS / VALIDATE_FLAGS / BENCH_FLAGS pass
//              options through. CUDA bench with a rebuilt code object adds
//              --compare-original (the captured binary timed in the same
//              run, speedup; BENCH_COMPARE=no: --no-compare-original); HIP
//              passes --no-compare-original (HSA replay cannot compare yet)
//   asm        disassembly of the current code object -> build/kernel.sass
//              (nvdisasm, else cuobjdump -sass) / build/kernel.s (llvm-objdump);
//              HIP with sources also: clang -S of the unit (recompile's
//              command, -S) -> build/module.s, the kernel's part of it
//              (kerncap-asm extract, amdgpu_asm.h) -> build/kernel.orig.s,
//              copied to asm/kernel.s unless that exists (edits are kept)
//   ptx        CUDA: nvcc -ptx of the edit target (kernel.cu, else the unit)
//              -> build/kernel.ptx (edit it...)
//   asm-build  CUDA: ptxas build/kernel.ptx (or the captured PTX) ->
//              build/kernel.cubin; HIP: kerncap-asm splice asm/kernel.s into
//              build/module.s -> build/module.edited.s, clang -x assembler
//              -c, ld.lld -shared -> build/kernel.hsaco (LD_LLD: the ld.lld
//              clang would use with the flags' -B); binary-only: says why not
//   serve, serve-stop
//              CUDA: kerncap-replay serve capture.kcap --socket=$(SERVE_SOCKET)
//              (default build/serve.sock, relative: the Unix socket path
//              limit counts that string, not the folder) in the background,
//              pid in build/serve.pid, log in build/serve.log, ready when the
//              socket exists (SERVE_TIMEOUT seconds at most); serve-stop sends
//              submit --shutdown, else kills that pid. While the socket
//              exists, validate and bench run kerncap-replay submit on it
//              instead of a one-shot replay (bench: submit --compare-original
//              with a rebuilt code object). HIP: not generated (help says so)
//   clean      removes build/ (CUDA: a running server's socket, pid and log
//              are kept; HIP: asm/ is kept)
// Binary-only projects (no sources) keep run/validate/bench/asm; recompile
// and ptx explain why they cannot work.
#ifndef KERNCAP_REPRODUCER_GENERATOR_BUILD_FILE_H_
#define KERNCAP_REPRODUCER_GENERATOR_BUILD_FILE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "reproducer/generator/command_rewriter.h"

namespace kerncap::repro {

struct MakefileSpec {
  Language lang = Language::kCuda;
  std::string title;          // one line for the header comment
  std::string arch;           // "sm_90" / "gfx90a"
  std::string captured_code;  // "code/kernel.cubin"
  std::string captured_ptx;   // "code/kernel.ptx" when the capture holds PTX
  bool has_source = false;
  std::string source;                                         // "src/..."
  std::vector<std::string> headers;                           // prerequisites of recompile
  std::vector<std::string> flags;                             // relative; $(EXT_n) allowed
  std::vector<std::pair<std::string, std::string>> external;  // EXT_n defaults
  std::string no_source_reason;
  bool vfs_overlay = false;  // vfs.yaml at the root (HIP)
  std::string kernel_symbol;  // HIP: the kernel's symbol (make asm / asm-build)
  // CUDA: the toolkit that built the captured code ("13.0.88", digits and
  // dots only) and its version line; empty: not recorded, no check.
  std::string app_cuda_version;
  // CUDA: the unit is relocatable device code: recompile compiles it with
  // -rdc=true to build/kernel.rdc.cubin and device-links that
  // (nvcc -dlink -cubin) into build/kernel.cubin.
  bool relocatable_device_code = false;
  std::string app_cuda_version_line;
  // CUDA: the verified minimal unit (minimal_unit.h, "kernel.cu"): recompile
  // compiles it alone, recompile-full the whole unit. Empty: recompile is
  // the whole unit and says why (minimal_unit_reason).
  std::string minimal_unit;
  std::string minimal_unit_reason;
  // CUDA with a minimal unit: kerncap-nvrtc's path when it builds the
  // kernel nvcc builds (minimal_unit.h, UnitCompiler): recompile then runs
  // $(NVRTC) unless COMPILER=nvcc. Empty: nvcc, its first line saying why
  // (no_nvrtc_reason).
  std::string nvrtc;
  std::string no_nvrtc_reason;
  std::string clang_default = "clang";
  std::string llvm_objdump_default = "llvm-objdump";
};

// InvalidArgument when spec.arch (from the capture) is not an architecture
// name (letters, digits, '_'): it stands bare in recipes. Internal when the
// embedded templates are missing or malformed (a build defect: the golden
// test renders every section). Newlines in spec.title become spaces.
absl::StatusOr<std::string> BuildMakefile(const MakefileSpec& spec);

// A word for a Makefile recipe: shell-quoted, '$' doubled except in $(VAR)
// references, '#' escaped.
std::string MakeWord(const std::string& word);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_BUILD_FILE_H_
