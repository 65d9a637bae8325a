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
//   kernels                 STT_FUNC, section .text.<kernel>
// Internal-linkage variables (static, anonymous namespace) are STB_LOCAL. A
// relocatable cubin (nvcc -rdc=true -cubin, before nvlink) gives variables
// the CUDA-specific symbol type 13 (STT_LOPROC) instead of STT_OBJECT; they
// are variables all the same.
#ifndef KERNCAP_COMMON_CUDA_CUBIN_ELF_H_
#define KERNCAP_COMMON_CUDA_CUBIN_ELF_H_

#include <cstdint>
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

struct CubinInfo {
  std::vector<CubinVariable> variables;
  std::vector<std::string> kernels;  // STT_FUNC symbols in .text.* sections
};

// True when `image` starts with the ELF magic.
bool IsElf(std::string_view image);

link::LinkResult<CubinInfo> ParseCubin(std::string_view image);

}  // namespace kerncap::cubin

#endif  // KERNCAP_COMMON_CUDA_CUBIN_ELF_H_
