// cubin_fuzzer.cc: a CUDA code object as the agent reads it inside an
// application (common/cuda/cubin_elf.h: every module the application loads
// and every variant kerncapd pushes for substitution), and what it then does
// with the names it found (symbol_identity.h). Any crash, hang, sanitizer
// report or allocation beyond the image's size is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/cuda/cubin_elf.h"
#include "common/cuda/symbol_identity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view image(reinterpret_cast<const char*>(data), size);
  auto info = kerncap::cubin::ParseCubin(image);
  if (!info.ok()) return 0;
  // Every name came from the image; each must stay inside it.
  size_t name_bytes = 0;
  for (const std::string& k : info->kernels) {
    name_bytes += k.size();
    (void)kerncap::cubin::KernelTextureUse(*info, k);
    const std::string stable = kerncap::cubin::StableSymbolName(k);
    (void)kerncap::cubin::HasCompileUniquifier(k);
    (void)kerncap::cubin::RdcIndependentName(stable);
  }
  for (const auto& v : info->variables) {
    name_bytes += v.name.size();
    (void)kerncap::cubin::RdcIndependentName(kerncap::cubin::StableSymbolName(v.name));
  }
  for (const auto& [kernel, use] : info->texture_use) {
    if (use.known && !use.texture && !use.surface && kernel.empty()) __builtin_trap();
  }
  (void)name_bytes;
  return 0;
}
