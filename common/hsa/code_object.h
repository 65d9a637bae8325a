// code_object.h: AMDGPU code object (HSA code object, "hsaco") reading: the
// ELF container, its NT_AMDGPU_METADATA note and its symbols.
//
// Byte formats read here (LLVM AMDGPUUsage, "Code Object V3+ Metadata"):
//   ELF64 little-endian, e_machine EM_AMDGPU (224), OS ABI ELFOSABI_AMDGPU_HSA.
//   Note: owner "AMDGPU", type NT_AMDGPU_METADATA (32), descriptor = one
//   msgpack map: {"amdhsa.version": [major, minor], "amdhsa.target": str,
//   "amdhsa.kernels": [ {".name", ".symbol", ".kernarg_segment_size", ...,
//   ".args": [ {".offset", ".size", ".value_kind", ...} ]} ]}.
//   Kernel descriptor (symbol "<name>.kd", 64 bytes, AMDHSAKernelDescriptor):
//     0 u32 group_segment_fixed_size, 4 u32 private_segment_fixed_size,
//     8 u32 kernarg_size, 12 u32 reserved, 16 i64 kernel_code_entry_byte_offset,
//     24..43 reserved, 44 u32 compute_pgm_rsrc3, 48 u32 compute_pgm_rsrc1,
//     52 u32 compute_pgm_rsrc2, 56 u16 kernel_code_properties, 58..63 reserved.
//
// Parsing uses LLVM's Object/ELF and BinaryFormat/MsgPackDocument, linked
// statically and privately into the agent: Debian's LLVM 15 static libraries
// are position independent, and the agent .so is linked with
// -Wl,--exclude-libs,ALL and a version script, so no LLVM symbol is exported
// and none of the application's own LLVM copies (comgr, Triton) can interpose
// ours. Every input is untrusted: malformed or truncated objects yield an
// error, never a crash (fuzzed by code_object_fuzzer.cc).
#ifndef KERNCAP_COMMON_HSA_CODE_OBJECT_H_
#define KERNCAP_COMMON_HSA_CODE_OBJECT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/agent_link/result.h"

namespace kerncap::hsa {

// Std-only, like the agent that uses it (no Abseil in the agent): the
// agent link's error model.
using Status = ::kerncap::link::LinkStatus;
template <typename T>
using Result = ::kerncap::link::LinkResult<T>;

inline constexpr uint32_t kNtAmdgpuMetadata = 32;
inline constexpr size_t kKernelDescriptorSize = 64;

// One kernel argument as the metadata note describes it.
struct KernelArg {
  uint32_t offset = 0;
  uint32_t size = 0;
  std::string value_kind;     // "by_value", "global_buffer", "hidden_queue_ptr", ...
  std::string address_space;  // "global", "constant", ... ("" when absent)
  std::string name;           // ".name" ("" when absent)
  std::string type_name;      // ".type_name" ("" when absent)
  bool hidden() const { return value_kind.rfind("hidden_", 0) == 0; }
};

struct KernelMetadata {
  std::string name;    // ".name" (mangled)
  std::string symbol;  // ".symbol" ("<name>.kd")
  std::optional<uint32_t> kernarg_segment_size;  // absent in some assembly kernels
  uint32_t kernarg_segment_align = 0;
  uint32_t group_segment_fixed_size = 0;
  uint32_t private_segment_fixed_size = 0;
  uint32_t wavefront_size = 0;
  uint32_t sgpr_count = 0;
  uint32_t vgpr_count = 0;
  uint32_t max_flat_workgroup_size = 0;
  std::vector<KernelArg> args;
};

struct CodeObjectMetadata {
  std::vector<uint32_t> version;  // amdhsa.version, e.g. {1, 2}
  std::string target;             // "amdgcn-amd-amdhsa--gfx90a"
  std::vector<KernelMetadata> kernels;
  const KernelMetadata* FindKernel(std::string_view name_or_symbol) const;
};

// STT_OBJECT symbols that are not kernel descriptors: __device__ and
// __constant__ variables (captured as module globals).
struct CodeObjectVariable {
  std::string name;
  uint64_t value = 0;  // st_value: offset from the load base for ET_DYN objects
  uint64_t size = 0;
};

struct CodeObjectSymbols {
  std::vector<CodeObjectVariable> variables;
  // name ("foo.kd") -> st_value, for kernel descriptors.
  std::vector<CodeObjectVariable> kernel_descriptors;
};

struct KernelDescriptor {
  uint32_t group_segment_fixed_size = 0;
  uint32_t private_segment_fixed_size = 0;
  uint32_t kernarg_size = 0;
  int64_t kernel_code_entry_byte_offset = 0;
  uint32_t compute_pgm_rsrc1 = 0;
  uint32_t compute_pgm_rsrc2 = 0;
  uint32_t compute_pgm_rsrc3 = 0;
  uint16_t kernel_code_properties = 0;
};

// Decodes the msgpack descriptor of an NT_AMDGPU_METADATA note.
Result<CodeObjectMetadata> ParseMetadataNote(std::string_view msgpack);
// Finds and decodes the metadata note of a whole code object (ELF).
Result<CodeObjectMetadata> ParseCodeObjectMetadata(std::string_view elf);
// The code object's variables and kernel descriptor symbols (.symtab/.dynsym).
Result<CodeObjectSymbols> ParseCodeObjectSymbols(std::string_view elf);
// Decodes a 64-byte kernel descriptor.
Result<KernelDescriptor> ParseKernelDescriptor(std::string_view bytes);
// "gfx90a" from "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-" ("" if none).
std::string GfxArchOf(std::string_view target);

}  // namespace kerncap::hsa

#endif  // KERNCAP_COMMON_HSA_CODE_OBJECT_H_
