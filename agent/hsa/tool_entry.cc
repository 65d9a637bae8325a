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
//   kerncap_agent_*        the agent's C API (agent/api/kerncap_agent.h), the
//                          same as the CUDA agent's plus kerncap_agent_hsa_*.
#include <hsa/hsa_api_trace.h>

#include <cstdint>

#include "agent/api/kerncap_agent.h"
#include "agent/core/agent_c_api.h"
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

KC_EXPORT int kerncap_agent_set_jit_metadata(const char* kernel_name, const char* json) {
  return HsaAgent::Instance().jit_metadata().SetFromC(kernel_name, json);
}

KC_EXPORT int kerncap_agent_get_stats(kerncap_agent_stats_t* out) {
  if (out == nullptr) return 1;
  auto s = HsaAgent::Instance().stats();
  out->tracked_allocations = s.tracked_allocations;
  out->tracked_modules = s.kernels_resolved;
  out->captures_committed = s.captures_committed;
  out->captures_failed = s.captures_failed;
  return 0;
}

KC_EXPORT int kerncap_agent_get_last_capture(kerncap_agent_capture_info_t* out) {
  return kerncap::agent::FillCaptureInfo(HsaAgent::Instance().last_capture(), out);
}

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

KC_EXPORT uint64_t kerncap_agent_hsa_unhooked_amd_ext_entries(void) {
  return HsaAgent::Instance().unknown_amd_ext_entries();
}

KC_EXPORT int kerncap_agent_hsa_wait_arms(int n, int timeout_ms) {
  return HsaAgent::Instance().WaitArms(static_cast<size_t>(n), timeout_ms) ? 1 : 0;
}
