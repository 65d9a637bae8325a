#include "agent/cuda/param_blob.h"

#include <cuda.h>

#include <cstring>

namespace kerncap::agent::cuda {

Result<std::string> BlobFromKernelParams(void* const* kernel_params,
                                         const std::vector<ParamInfo>& layout) {
  uint64_t total = 0;
  for (const ParamInfo& p : layout) {
    total = std::max<uint64_t>(total, static_cast<uint64_t>(p.offset) + p.size);
  }
  if (total > kMaxParamBytes) return Error("parameter layout exceeds the parameter buffer");
  if (total > 0 && kernel_params == nullptr) return Error("kernel has parameters but kernelParams is null");
  std::string blob(total, '\0');
  for (size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].size == 0) continue;
    if (kernel_params[i] == nullptr) return Error("kernelParams[" + std::to_string(i) + "] is null");
    std::memcpy(blob.data() + layout[i].offset, kernel_params[i], layout[i].size);
  }
  return blob;
}

Result<std::string> BlobFromExtra(void* const* extra) {
  const void* buffer = nullptr;
  const size_t* size = nullptr;
  // Bounded walk: a well-formed list is a handful of entries.
  for (int i = 0; i < 64; i += 2) {
    void* key = extra[i];
    if (key == CU_LAUNCH_PARAM_END) break;
    if (key == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      buffer = extra[i + 1];
    } else if (key == CU_LAUNCH_PARAM_BUFFER_SIZE) {
      size = static_cast<const size_t*>(extra[i + 1]);
    } else {
      return Error("unknown key in launch `extra`");
    }
  }
  if (size == nullptr) return Error("launch `extra` has no CU_LAUNCH_PARAM_BUFFER_SIZE");
  if (*size > kMaxParamBytes) return Error("launch `extra` buffer too large");
  if (*size > 0 && buffer == nullptr) return Error("launch `extra` has no buffer pointer");
  return std::string(static_cast<const char*>(buffer), *size);
}

Result<std::string> AssembleParamBlob(void* const* kernel_params, void* const* extra,
                                      const std::vector<ParamInfo>& layout) {
  if (kernel_params != nullptr || extra == nullptr) {
    return BlobFromKernelParams(kernel_params, layout);
  }
  return BlobFromExtra(extra);
}

std::string CompareParamLayouts(const std::vector<ParamInfo>& original,
                                const std::vector<ParamInfo>& variant) {
  if (original.size() != variant.size()) {
    return "the original takes " + std::to_string(original.size()) +
           " parameters, the variant " + std::to_string(variant.size());
  }
  for (size_t i = 0; i < original.size(); ++i) {
    const ParamInfo& a = original[i];
    const ParamInfo& b = variant[i];
    if (a.offset != b.offset || a.size != b.size) {
      return "parameter " + std::to_string(i) + ": the original's is " + std::to_string(a.size) +
             " bytes at offset " + std::to_string(a.offset) + ", the variant's " +
             std::to_string(b.size) + " bytes at offset " + std::to_string(b.offset);
    }
  }
  return "";
}

}  // namespace kerncap::agent::cuda
