// hsa_runtime.h: an HSA runtime loaded at run time (dlopen), presented as the
// HsaApiTable that ReplayDispatch takes. kerncap-replay does not link against
// libhsa-runtime64: the binary starts (and reports clearly) on machines
// without ROCm, and tests point it at the simulated runtime
// (tests/hsa_sim, libkerncap_hsa_sim_runtime.so, which exports the same C API).
//
// The table is filled from the runtime's exported C API (dlsym of
// "hsa_iterate_agents", ... ; the table entry hsa_X_fn is the function hsa_X),
// not from an HSA tool's OnLoad table. The vmem entries
// (hsa_amd_vmem_address_reserve, ...) exist from ROCm 6.0 on; a runtime
// without them is refused before hsa_init is called.
#ifndef KERNCAP_REPRODUCER_REPLAY_HSA_HSA_RUNTIME_H_
#define KERNCAP_REPRODUCER_REPLAY_HSA_HSA_RUNTIME_H_

#include <hsa/hsa_api_trace.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/hsa/hsa_tables.h"

namespace kerncap::replay::hsa {

// Every error message of Load starts with this (callers map it to "no
// device", the skip exit code).
inline constexpr char kNoHsaRuntime[] = "no usable HSA runtime";

// The library Load uses when given no path: $KERNCAP_HSA_RUNTIME, else
// "libhsa-runtime64.so.1".
std::string DefaultHsaRuntimePath();

class HsaRuntime {
 public:
  // dlopen()s `path`, resolves the C API entries replay needs (NotFound-like
  // FailedPrecondition naming the first missing one; the vmem entries missing
  // means ROCm < 6), then calls hsa_init.
  static absl::StatusOr<std::unique_ptr<HsaRuntime>> Load(const std::string& path);
  ~HsaRuntime();  // hsa_shut_down, dlclose
  HsaRuntime(const HsaRuntime&) = delete;
  HsaRuntime& operator=(const HsaRuntime&) = delete;

  HsaApiTable* table() { return &root_; }
  const std::string& path() const { return path_; }
  // HSA_AGENT_INFO_NAME of the first GPU agent ("" if none).
  std::string GpuName();

 private:
  HsaRuntime() = default;

  std::string path_;
  void* handle_ = nullptr;
  bool initialized_ = false;
  HsaApiTable root_{};
  CoreApiTable core_{};
  struct AmdExtWithTail {
    AmdExtTable base;
    char room[sizeof(::kerncap::hsa::AmdExtTableRocm6Tail)];
  } amd_{};
};

}  // namespace kerncap::replay::hsa

#endif  // KERNCAP_REPRODUCER_REPLAY_HSA_HSA_RUNTIME_H_
