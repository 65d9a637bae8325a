// kernel_code.h: one kernel's code in an ELF code object (a cubin or an
// AMDGPU code object), read with LLVM's object reader: its bytes, and for
// cubins the fingerprint two builds must share to be the same code. Used by
// the unit selector (which database entry builds the captured kernel) and
// the minimal unit's verification (minimal_unit.h). Without LLVM at build
// time every reader answers Unimplemented.
#ifndef KERNCAP_REPRODUCER_GENERATOR_KERNEL_CODE_H_
#define KERNCAP_REPRODUCER_GENERATOR_KERNEL_CODE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::repro {

// The bytes of `symbol`'s function in an ELF code object (its section's
// contents over the symbol's value and size). NotFound without it.
absl::StatusOr<std::string> KernelCodeBytes(std::string_view elf, const std::string& symbol);

// What must be identical for two builds of a kernel to be the same code: the
// function's bytes, its section's flags and register count, the sizes of its
// shared and constant-bank sections, and its relocations (offset, type,
// target symbol name: the same globals at the same places).
struct KernelPrint {
  std::string code;
  uint64_t flags = 0;
  uint64_t registers = 0;
  int64_t shared_bytes = -1;             // .nv.shared.<kernel>; -1: none
  int64_t constant0_bytes = -1;          // .nv.constant0.<kernel>; -1: none
  std::vector<std::string> relocations;  // "offset:type:symbol"
  bool operator==(const KernelPrint& o) const {
    return code == o.code && flags == o.flags && registers == o.registers &&
           shared_bytes == o.shared_bytes && constant0_bytes == o.constant0_bytes &&
           relocations == o.relocations;
  }
  bool operator!=(const KernelPrint& o) const { return !(*this == o); }
};
// NotFound without the symbol; Unimplemented without an ELF reader.
absl::StatusOr<KernelPrint> KernelFingerprint(std::string_view elf, const std::string& symbol);
// What differs, for the user: "static shared memory (1024 bytes captured,
// none rebuilt)", "the code (4352 vs 4368 bytes)"...
std::string DescribeDifference(const KernelPrint& captured, const KernelPrint& rebuilt);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_KERNEL_CODE_H_
