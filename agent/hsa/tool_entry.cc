// tool_entry.cc: the only exported symbols of libkerncap_agent_hsa.so.
//
//   OnLoad                 called by the HSA runtime for each library named
//                          in HSA_TOOLS_LIB, inside hsa_init, with the API
//                          tables to patch. Returning false unloads the tool;
//                          we return true even when passive, so the
//                          application is never affected.
//   OnUnload               runtime shutdown.
//   HSA_AMD_TOOL_PRIORITY  lets newer runtimes (mid-2022+) find the tool
//                          when it is merely LD_PRELOADed. rocprofiler-sdk
//                          registration (rocprofiler_configure) is not built:
//                          its headers are not available on Debian 12.
//   kerncap_agent_*        a small C API for tests and diagnostics.
#include <hsa/hsa_api_trace.h>

#include <cstdint>

#include "agent/hsa/hsa_agent.h"
#include "common/version.h"

#define KC_EXPORT extern "C" __attribute__((visibility("default")))

using kerncap::agent::hsa::HsaAgent;

KC_EXPORT const uint32_t HSA_AMD_TOOL_PRIORITY = 50;

KC_EXPORT bool OnLoad(HsaApiTable* table, uint64_t runtime_version, uint64_t failed_tool_count,
                      const char* const* failed_tool_names) {
  try {
    return HsaAgent::Instance().Load(table, runtime_version);
  } catch (...) {
    return true;
  }
}

KC_EXPORT void OnUnload() {
  try {
    HsaAgent::Instance().Unload();
  } catch (...) {
  }
}

KC_EXPORT int kerncap_agent_active(void) { return HsaAgent::Instance().active() ? 1 : 0; }

KC_EXPORT const char* kerncap_agent_version(void) { return ::kerncap::kVersion; }

// Attaches JIT metadata to later captures of a kernel: the same contract as
// the CUDA agent's kerncap_agent_set_jit_metadata (agent/cuda/injection.cc).
KC_EXPORT int kerncap_agent_set_jit_metadata(const char* kernel_name, const char* json) {
  return HsaAgent::Instance().jit_metadata().SetFromC(kernel_name, json);
}

struct kerncap_agent_hsa_stats_t {
  uint64_t tracked_allocations;
  uint64_t intercepted_queues;
  uint64_t kernels_resolved;
  uint64_t packets_forwarded;
  uint64_t captures_committed;
  uint64_t captures_failed;
};

KC_EXPORT int kerncap_agent_hsa_get_stats(kerncap_agent_hsa_stats_t* out) {
  if (out == nullptr) return 1;
  auto s = HsaAgent::Instance().stats();
  out->tracked_allocations = s.tracked_allocations;
  out->intercepted_queues = s.intercepted_queues;
  out->kernels_resolved = s.kernels_resolved;
  out->packets_forwarded = s.packets_forwarded;
  out->captures_committed = s.captures_committed;
  out->captures_failed = s.captures_failed;
  return 0;
}

// AmdExtTable entries beyond the layout this build knows (not hooked; on
// ROCm >= 10 hsa_amd_queue_create is among them). 0 on known layouts.
KC_EXPORT uint64_t kerncap_agent_hsa_unhooked_amd_ext_entries(void) {
  return HsaAgent::Instance().unknown_amd_ext_entries();
}

// Tests: 1 once the daemon link holds `n` active arms (waits up to timeout_ms).
KC_EXPORT int kerncap_agent_hsa_wait_arms(int n, int timeout_ms) {
  return HsaAgent::Instance().WaitArms(static_cast<size_t>(n), timeout_ms) ? 1 : 0;
}
