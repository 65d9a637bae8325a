#include "reproducer/replay/hsa/hsa_runtime.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kerncap::replay::hsa {
namespace {

using ::kerncap::hsa::AmdExtTableRocm6Tail;

struct Missing {
  std::vector<std::string> names;
};

template <typename Fn>
void Resolve(void* handle, const char* name, Fn* slot, Missing* missing) {
  void* p = dlsym(handle, name);
  if (p == nullptr) {
    missing->names.push_back(name);
    return;
  }
  *slot = reinterpret_cast<Fn>(p);
}

hsa_status_t CollectGpu(hsa_agent_t agent, void* data) {
  auto* p = static_cast<std::pair<const CoreApiTable*, hsa_agent_t*>*>(data);
  hsa_device_type_t type;
  if (p->second->handle == 0 &&
      p->first->hsa_agent_get_info_fn(agent, HSA_AGENT_INFO_DEVICE, &type) == HSA_STATUS_SUCCESS &&
      type == HSA_DEVICE_TYPE_GPU) {
    *p->second = agent;
  }
  return HSA_STATUS_SUCCESS;
}

}  // namespace

std::string DefaultHsaRuntimePath() {
  const char* env = std::getenv("KERNCAP_HSA_RUNTIME");
  return env != nullptr && *env != '\0' ? env : "libhsa-runtime64.so.1";
}

absl::StatusOr<std::unique_ptr<HsaRuntime>> HsaRuntime::Load(const std::string& path) {
  std::unique_ptr<HsaRuntime> rt(new HsaRuntime());
  rt->path_ = path;
  dlerror();
  rt->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (rt->handle_ == nullptr) {
    const char* e = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        kNoHsaRuntime, ": cannot load ", path, " (", e != nullptr ? e : "dlopen failed",
        "); install ROCm >= 6 or name the library with --hsa-runtime / KERNCAP_HSA_RUNTIME"));
  }
  auto version = [](ApiTableVersion& v, uint32_t size) {
    v.major_id = 1;
    v.minor_id = size;
    v.step_id = 0;
  };
  constexpr uint32_t kAmdSize =
      ::kerncap::hsa::kAmdExtRocm6TailOffset + sizeof(AmdExtTableRocm6Tail);
  static_assert(sizeof(AmdExtWithTail) >= kAmdSize, "room for the ROCm 6 tail");
  version(rt->root_.version, sizeof(HsaApiTable));
  version(rt->core_.version, sizeof(CoreApiTable));
  version(rt->amd_.base.version, kAmdSize);
  rt->root_.core_ = &rt->core_;
  rt->root_.amd_ext_ = &rt->amd_.base;

  Missing missing;
  void* h = rt->handle_;
  CoreApiTable& c = rt->core_;
#define KC_CORE(name) Resolve(h, #name, &c.name##_fn, &missing)
  KC_CORE(hsa_init);
  KC_CORE(hsa_shut_down);
  KC_CORE(hsa_iterate_agents);
  KC_CORE(hsa_agent_get_info);
  KC_CORE(hsa_memory_copy);
  KC_CORE(hsa_code_object_reader_create_from_memory);
  KC_CORE(hsa_code_object_reader_destroy);
  KC_CORE(hsa_executable_create_alt);
  KC_CORE(hsa_executable_destroy);
  KC_CORE(hsa_executable_load_agent_code_object);
  KC_CORE(hsa_executable_freeze);
  KC_CORE(hsa_executable_get_symbol_by_name);
  KC_CORE(hsa_executable_symbol_get_info);
  KC_CORE(hsa_queue_create);
  KC_CORE(hsa_queue_destroy);
  KC_CORE(hsa_queue_add_write_index_scacq_screl);
  KC_CORE(hsa_signal_create);
  KC_CORE(hsa_signal_destroy);
  KC_CORE(hsa_signal_store_screlease);
  KC_CORE(hsa_signal_wait_scacquire);
#undef KC_CORE
  AmdExtTable& a = rt->amd_.base;
#define KC_AMD(name) Resolve(h, #name, &a.name##_fn, &missing)
  KC_AMD(hsa_amd_agent_iterate_memory_pools);
  KC_AMD(hsa_amd_memory_pool_get_info);
  KC_AMD(hsa_amd_memory_pool_allocate);
  KC_AMD(hsa_amd_memory_pool_free);
  KC_AMD(hsa_amd_profiling_set_profiler_enabled);
  KC_AMD(hsa_amd_profiling_get_dispatch_time);
#undef KC_AMD
  if (!missing.names.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        kNoHsaRuntime, ": ", path, " lacks ", missing.names[0], " (not an HSA runtime?)"));
  }
  AmdExtTableRocm6Tail* t = ::kerncap::hsa::Rocm6Tail(&rt->amd_.base);
#define KC_VMEM(name) Resolve(h, #name, &t->name##_fn, &missing)
  KC_VMEM(hsa_amd_vmem_address_reserve);
  KC_VMEM(hsa_amd_vmem_address_free);
  KC_VMEM(hsa_amd_vmem_handle_create);
  KC_VMEM(hsa_amd_vmem_handle_release);
  KC_VMEM(hsa_amd_vmem_map);
  KC_VMEM(hsa_amd_vmem_unmap);
  KC_VMEM(hsa_amd_vmem_set_access);
#undef KC_VMEM
  if (!missing.names.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        kNoHsaRuntime, ": ", path, " lacks ", missing.names[0],
        ": ROCm >= 6 is required to restore memory at its original addresses "
        "(hsa_amd_vmem_*)"));
  }
  hsa_status_t s = c.hsa_init_fn();
  if (s != HSA_STATUS_SUCCESS) {
    return absl::FailedPreconditionError(absl::StrCat(
        kNoHsaRuntime, ": hsa_init failed with status 0x", absl::Hex(static_cast<int>(s)),
        " (no AMD GPU or no access to /dev/kfd?)"));
  }
  rt->initialized_ = true;
  return rt;
}

HsaRuntime::~HsaRuntime() {
  if (initialized_ && core_.hsa_shut_down_fn != nullptr) core_.hsa_shut_down_fn();
  if (handle_ != nullptr) dlclose(handle_);
}

std::string HsaRuntime::GpuName() {
  hsa_agent_t gpu{0};
  std::pair<const CoreApiTable*, hsa_agent_t*> data{&core_, &gpu};
  core_.hsa_iterate_agents_fn(CollectGpu, &data);
  if (gpu.handle == 0) return "";
  char name[64] = {0};
  core_.hsa_agent_get_info_fn(gpu, HSA_AGENT_INFO_NAME, name);
  return std::string(name, strnlen(name, sizeof(name)));
}

}  // namespace kerncap::replay::hsa
