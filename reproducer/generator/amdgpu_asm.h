// amdgpu_asm.h: the HIP reproducer's assembly-level loop (kerncap-asm, run by
// the project's `make asm` / `make asm-build`). Text-level, keyed by the
// kernel's symbol name and the directives clang's AMDGPU `-S` output has
// (checked against clang 15, gfx90a, code object v4 and v5, with and without -g).
//
// The module: build/module.s, clang -S of the kernel's translation unit
// (device only, the captured --offload-arch). The kernel's parts in it:
//
//   function    from the directives that open the kernel (the section switch
//               `.text` / `.section .text.<name>,...`, `.protected`, `.globl`,
//               `.p2align`, `.type <name>,@function` directly above its
//               label) through `<name>:` and `.size <name>, ...` to the
//               `.cfi_endproc` / `; -- End function` lines after it. clang
//               emits the kernel descriptor (`.amdhsa_kernel <name>` ...
//               `.end_amdhsa_kernel`, in .rodata) inside this range.
//   descriptor  the `.amdhsa_kernel <name>` ... `.end_amdhsa_kernel` block,
//               only when it lies outside the function range.
//   metadata    the kernel's item in the module's `.amdgpu_metadata` YAML
//               (the `amdhsa.kernels` list item whose `.symbol` is
//               `<name>.kd`, or `.name` is `<name>`): the `- ` line through
//               the line before the next item / the end of the list.
//
// Everything else (other kernels, device functions, variables, the rest of
// the metadata, debug sections) is never changed.
//
// The edited file (asm/kernel.s, written by ExtractKernel): free comment
// lines, then one block per part, in module order:
//
//   ;;kerncap-begin <kind> <symbol>
//   ... the part's lines, verbatim ...
//   ;;kerncap-end <kind> <symbol>
//
// Marker lines start in column 0 with `;;kerncap-begin ` / `;;kerncap-end `
// (`;` starts an AMDGPU assembler comment). Lines outside blocks are ignored
// except `; kerncap-module: fnv1a64=<16 hex digits>`, the FNV-1a 64 hash of
// the module the blocks were cut from (a later splice into a different
// module warns). SpliceKernel replaces each part's lines with its block's,
// framed by cpp-style line markers (`# <line> "<file>"`, which LLVM's
// assembler honours in its diagnostics), so an error in an edited line is
// reported as asm/kernel.s:<line> and one elsewhere as build/module.s:<line>.
//
// Register counts: unless told to keep them, the splice raises the
// descriptor's `.amdhsa_next_free_vgpr`, `.amdhsa_next_free_sgpr`,
// `.amdhsa_accum_offset` (gfx90a/gfx940: AGPRs start there) and the
// metadata's `.vgpr_count`, `.sgpr_count`, `.agpr_count` to cover every
// `v`/`s`/`a` register the function block's instructions name; it never
// lowers them (the compiled values also cover callees and preloaded
// registers), and leaves a value alone that is not a plain integer.
// clang 14-16 write these as literals (no assembler-computed symbols).
#ifndef KERNCAP_REPRODUCER_GENERATOR_AMDGPU_ASM_H_
#define KERNCAP_REPRODUCER_GENERATOR_AMDGPU_ASM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerncap::repro {

struct AsmPart {
  std::string kind;  // "function", "descriptor", "metadata"
  size_t begin = 0;  // first line, 0-based
  size_t end = 0;    // one past the last line
};

// The kernel's parts in `lines` (the module split at '\n'), sorted and
// disjoint. NotFound names the kernels the module does define.
absl::StatusOr<std::vector<AsmPart>> LocateKernel(const std::vector<std::string>& lines,
                                                  const std::string& symbol);

// Kernels the module defines (`.amdhsa_kernel <name>` lines), in order.
std::vector<std::string> ListKernels(const std::vector<std::string>& lines);

// Highest register index named by instructions (directives, labels and
// comments skipped); -1 when none.
struct RegisterUse {
  int vgpr = -1;
  int sgpr = -1;
  int agpr = -1;
};
RegisterUse ScanRegisters(const std::vector<std::string>& lines);

uint64_t Fnv1a64(absl::string_view text);

std::vector<std::string> SplitLines(absl::string_view text);

// The edited file's text for `symbol` (module_name: how the header names the
// module, e.g. "build/module.s").
absl::StatusOr<std::string> ExtractKernel(absl::string_view module, const std::string& symbol,
                                          const std::string& module_name);

struct SpliceOptions {
  std::string module_name = "build/module.s";  // line markers and messages
  std::string edited_name = "asm/kernel.s";
  bool keep_register_counts = false;
};

struct SpliceResult {
  std::string text;                   // the module with the edited parts
  std::vector<std::string> notes;     // register counts raised
  std::vector<std::string> warnings;  // e.g. cut from another module
};

absl::StatusOr<SpliceResult> SpliceKernel(absl::string_view module, absl::string_view edited,
                                          const std::string& symbol,
                                          const SpliceOptions& options = {});

// clang options that assemble `module` for the target it was compiled for:
// -mcpu=<processor[:features]> from `.amdgcn_target` (else `fallback_arch`),
// -mcode-object-version=<n> from `.amdhsa_code_object_version` or the
// metadata's amdhsa.version (1.0: 3, 1.1: 4, 1.2: 5).
absl::StatusOr<std::vector<std::string>> AssemblerFlags(absl::string_view module,
                                                        const std::string& fallback_arch = "");

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_AMDGPU_ASM_H_
