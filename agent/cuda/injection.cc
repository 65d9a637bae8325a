// injection.cc: the only exported symbols of libkerncap_agent.so.
//
//   InitializeInjection   called by the CUDA driver during cuInit when the
//                         library is named in CUDA_INJECTION64_PATH.
//   ELF constructor       initializes under LD_PRELOAD, before the
//                         application's first cuInit (and harmlessly again
//                         under injection: initialization is idempotent).
//   kerncap_agent_*       the agent's C API (agent/api/kerncap_agent.h).
//
// Everything else is hidden (-fvisibility=hidden + agent.map version script)
// so the agent cannot clash with the application's own libraries.
#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "agent/api/kerncap_agent.h"
#include "agent/core/agent_c_api.h"
#include "agent/cuda/cuda_agent.h"
#include "common/version.h"

#define KC_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using kerncap::agent::cuda::CudaAgent;

std::atomic<bool> g_atfork_installed{false};

void ForkChild() { CudaAgent::Instance().ResetAfterFork(); }

bool InitOnce(const char* how) {
  bool ok = CudaAgent::Instance().Initialize(how);
  if (ok && !g_atfork_installed.exchange(true)) pthread_atfork(nullptr, nullptr, &ForkChild);
  return ok;
}

__attribute__((constructor)) void KerncapAgentConstructor() {
  try {
    // Under CUDA_INJECTION64_PATH the driver dlopen()s us inside cuInit, so
    // this runs first there too; InitializeInjection then finds us active.
    InitOnce("library constructor (LD_PRELOAD or CUDA_INJECTION64_PATH)");
  } catch (...) {
    // Never let anything escape into the application's loader.
  }
}

}  // namespace

KC_EXPORT int InitializeInjection(void) {
  try {
    InitOnce("CUDA_INJECTION64_PATH");
  } catch (...) {
  }
  // 1 tells the driver the injection library initialized; an inactive agent
  // still returns 1 so the application is never affected.
  return 1;
}

KC_EXPORT int kerncap_agent_active(void) { return CudaAgent::Instance().active() ? 1 : 0; }

KC_EXPORT const char* kerncap_agent_version(void) { return ::kerncap::kVersion; }

KC_EXPORT int kerncap_agent_get_stats(kerncap_agent_stats_t* out) {
  if (out == nullptr) return 1;
  CudaAgent& a = CudaAgent::Instance();
  out->tracked_allocations = a.tracked_allocations();
  out->tracked_modules = a.tracked_modules();
  out->captures_committed = a.captures_committed();
  out->captures_failed = a.captures_failed();
  return 0;
}

KC_EXPORT int kerncap_agent_set_jit_metadata(const char* kernel_name, const char* json) {
  return CudaAgent::Instance().jit_metadata().SetFromC(kernel_name, json);
}

KC_EXPORT int kerncap_agent_get_last_capture(kerncap_agent_capture_info_t* out) {
  return kerncap::agent::FillCaptureInfo(CudaAgent::Instance().last_capture(), out);
}
