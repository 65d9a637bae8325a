#include "agent/core/capture_types.h"

namespace kerncap::agent {

const char* RegionKindName(RegionKind kind) {
  switch (kind) {
    case RegionKind::kDevice: return "device";
    case RegionKind::kDeviceVmm: return "device_vmm";
    case RegionKind::kManaged: return "managed";
    case RegionKind::kHostPinned: return "host_pinned";
    case RegionKind::kModuleGlobal: return "module_global";
    case RegionKind::kConstant: return "constant";
    case RegionKind::kKernarg: return "kernarg";
  }
  return "unknown";
}

uint64_t CodeObjectKey(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h ^ (static_cast<uint64_t>(bytes.size()) * 0x9e3779b97f4a7c15ull);
}

}  // namespace kerncap::agent
