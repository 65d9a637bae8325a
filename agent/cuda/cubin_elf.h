// cubin_elf.h: the facts the agent reads out of a CUDA ELF cubin (as handed
// over by CUPTI's MODULE_LOADED callback): module-scope variables and kernel
// entry names. Parsed with <elf.h> only; every offset is bounds-checked
// because the image comes from outside the agent.
//
// Where things live in an sm_90 cubin (measured with nvcc 13.0):
//   __device__ variables    STT_OBJECT in .nv.global (NOBITS) or .nv.global.init
//   __constant__ variables  STT_OBJECT in .nv.constant3
//   kernel parameters       .nv.constant0.<kernel> (not a variable: skipped)
//   kernels                 STT_FUNC, section .text.<kernel>
#ifndef KERNCAP_AGENT_CUDA_CUBIN_ELF_H_
#define KERNCAP_AGENT_CUDA_CUBIN_ELF_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/core/status.h"

namespace kerncap::agent::cuda {

struct CubinVariable {
  std::string name;
  std::string section;
  uint64_t size = 0;
  bool constant = false;  // __constant__ (true) or __device__ (false)
};

struct CubinInfo {
  std::vector<CubinVariable> variables;
  std::vector<std::string> kernels;  // STT_FUNC symbols in .text.* sections
};

// True when `image` starts with the ELF magic.
bool IsElf(std::string_view image);

Result<CubinInfo> ParseCubin(std::string_view image);

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_CUBIN_ELF_H_
