// cubin_elf.h: the facts kerncap reads out of a CUDA ELF cubin: module-scope
// variables and kernel entry names. The agent reads the cubin CUPTI hands
// over at module load (what to capture); the replay reads the code object it
// loads (which of its variables is which captured one). Parsed with <elf.h>
// only, std-only (the agent may not use Abseil); every offset is
// bounds-checked because the image comes from outside.
//
// Where things live in an sm_90 cubin (measured with nvcc 13.0):
//   __device__ variables    STT_OBJECT in .nv.global (NOBITS) or .nv.global.init
//   __constant__ variables  STT_OBJECT in .nv.constant3
//   kernel parameters       .nv.constant0.<kernel> (not a variable: skipped)
//   kernels                 STT_FUNC, section .text.<kernel>, st_other bit 0x10
//                           (entry); device functions that were not inlined
//                           (-rdc) are STT_FUNC in their own .text.<name>
//   the SM                  e_flags bits 8..15 (0x5a: sm_90)
//
// Internal-linkage variables (static, anonymous namespace) are STB_LOCAL. A
// relocatable cubin (nvcc -rdc=true -cubin, before nvlink) gives variables
// the CUDA-specific symbol type 13 (STT_LOPROC) instead of STT_OBJECT; they
// are variables all the same.
//
// Texture and surface use. On sm_70 and later nothing in .nv.info says that
// a kernel uses bindless texture or surface objects (measured with nvcc 13.0
// for sm_80/89/90/100/120: no EIATTR_BINDLESS_* attribute is emitted, and the
// parameter attributes do not tell a handle from a u64), so the instructions
// are read: 128-bit instructions whose low 12 bits are the opcode. A kernel
// uses textures when its .text section, or that of any non-entry function of
// the module that has a section of its own (which it may call; the cubin does
// not say which kernel calls what), holds one of the texture opcodes below,
// and surfaces likewise. The opcodes: TEX, TLD, TLD4, TMML, TXD, TXQ (which suq
// also compiles to) in the register-handle (.B), constant-bank and
// uniform-register-handle forms, and SULD, SUST, SURED, SUATOM; the uniform
// forms (0xf60.., 0xf99..) are what nvcc 13.0 emits for sm_90 and later, the
// others what it emits for sm_80/89 (all checked on compiled kernels; none of
// them occurs in a corpus of non-texture kernels: atomics, shuffles, votes,
// wmma, clusters, ldmatrix, red, multimem, bulk prefetch).
#ifndef KERNCAP_COMMON_CUDA_CUBIN_ELF_H_
#define KERNCAP_COMMON_CUDA_CUBIN_ELF_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/agent_link/result.h"

namespace kerncap::cubin {

struct CubinVariable {
  std::string name;
  std::string section;
  uint64_t size = 0;
  bool constant = false;  // __constant__ (true) or __device__ (false)
  bool local = false;     // STB_LOCAL: internal linkage (static, anonymous namespace)
};

// Whether a kernel's code can read texture objects / use surface objects.
struct TextureUse {
  bool known = false;  // false: the code could not be read (arch before sm_70,
                       // unknown encoding, no .text section for the kernel)
  bool texture = false;
  bool surface = false;
};

struct CubinInfo {
  std::vector<CubinVariable> variables;
  std::vector<std::string> kernels;  // STT_FUNC symbols in .text.* sections
  uint32_t sm = 0;                   // from e_flags (90 for sm_90); 0 if absent
  // Per kernel (entry) name: its texture/surface use, that of the module's
  // separately placed functions folded in. Kernels missing here are unknown.
  std::map<std::string, TextureUse> texture_use;
};

// The texture/surface use of `kernel` in `info` (unknown when not listed).
TextureUse KernelTextureUse(const CubinInfo& info, const std::string& kernel);

// True when `image` starts with the ELF magic.
bool IsElf(std::string_view image);

link::LinkResult<CubinInfo> ParseCubin(std::string_view image);

}  // namespace kerncap::cubin

#endif  // KERNCAP_COMMON_CUDA_CUBIN_ELF_H_
