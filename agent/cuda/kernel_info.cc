#include "agent/cuda/kernel_info.h"

#include <cxxabi.h>

#include <cstdlib>

#include "agent/cuda/driver_api.h"

namespace kerncap::agent::cuda {
namespace {

// Parameter lists longer than this are a broken driver answer, not a kernel.
constexpr size_t kMaxParams = 4096;

template <typename Handle>
bool CountParams(CUresult (*get)(Handle, size_t, size_t*, size_t*), Handle h,
                 std::vector<ParamInfo>* out) {
  if (get == nullptr) return false;
  out->clear();
  for (size_t i = 0; i < kMaxParams; ++i) {
    size_t offset = 0, size = 0;
    if (get(h, i, &offset, &size) != CUDA_SUCCESS) return true;  // i params
    out->push_back(ParamInfo{static_cast<uint32_t>(offset), static_cast<uint32_t>(size)});
  }
  return false;
}

}  // namespace

std::string Demangle(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return mangled;
  std::string out(d);
  std::free(d);
  return out;
}

std::shared_ptr<KernelInfo> KernelInfoCache::Resolve(CUfunction f, const char* fallback_name) {
  const DriverApi& api = Driver();
  auto info = std::make_shared<KernelInfo>();
  const char* name = nullptr;
  if (api.FuncGetName != nullptr && api.FuncGetName(&name, f) == CUDA_SUCCESS && name != nullptr) {
    info->mangled_name = name;
  } else if (api.KernelGetName != nullptr &&
             api.KernelGetName(&name, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS &&
             name != nullptr) {
    info->mangled_name = name;
    info->is_kernel_handle = true;
  } else {
    name = nullptr;
    if (fallback_name != nullptr) info->mangled_name = fallback_name;
  }
  // The param API must match the handle kind that answered the name query.
  // With neither name API (driver < 12.3) the layout stays unknown and only
  // the `extra` form of launch arguments can be captured.
  if (name != nullptr && !info->is_kernel_handle) {
    info->params_known = CountParams(api.FuncGetParamInfo, f, &info->params);
  } else if (name != nullptr) {
    info->params_known =
        CountParams(api.KernelGetParamInfo, reinterpret_cast<CUkernel>(f), &info->params);
  }
  info->demangled_name = Demangle(info->mangled_name);
  return info;
}

std::shared_ptr<const KernelInfo> KernelInfoCache::Get(CUfunction f, const char* fallback_name) {
  {
    std::lock_guard lock(mu_);
    auto it = cache_.find(f);
    if (it != cache_.end()) return it->second;
  }
  // Resolve outside the lock: it calls into the driver.
  std::shared_ptr<const KernelInfo> info = Resolve(f, fallback_name);
  std::lock_guard lock(mu_);
  return cache_.emplace(f, info).first->second;
}

void KernelInfoCache::Clear() {
  std::lock_guard lock(mu_);
  cache_.clear();
}

}  // namespace kerncap::agent::cuda
