/* kerncap_agent.h: the C API of the kerncap agent libraries, exported by
 * both backends, libkerncap_agent.so (CUDA) and libkerncap_agent_hsa.so (HSA),
 * for the Python shim (python_shim), tests, benchmarks and diagnostics. A
 * client finds the functions with dlsym (the agent is loaded by the driver or
 * the runtime, not linked). Every function may be called from any thread,
 * at any time, also when the agent is inactive; none throws or blocks for
 * long. Everything else in the libraries is hidden. */
#ifndef KERNCAP_AGENT_API_KERNCAP_AGENT_H_
#define KERNCAP_AGENT_API_KERNCAP_AGENT_H_

#include <stdint.h>

#define KERNCAP_AGENT_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when the agent is intercepting (CUDA: subscribed to CUPTI; HSA: the API
 * tables are patched); 0 when it stays out of the way (no driver, no
 * matching CUPTI, disabled, ...). */
KERNCAP_AGENT_API int kerncap_agent_active(void);

/* kerncap's version (the project version, common/version.h). */
KERNCAP_AGENT_API const char* kerncap_agent_version(void);

typedef struct kerncap_agent_stats_t {
  uint64_t tracked_allocations;
  uint64_t tracked_modules; /* CUDA: loaded modules; HSA: kernels resolved */
  uint64_t captures_committed;
  uint64_t captures_failed; /* failed captures and selected dispatches not captured */
} kerncap_agent_stats_t;

/* Fills *out; returns 0 (nonzero only for a null pointer). */
KERNCAP_AGENT_API int kerncap_agent_get_stats(kerncap_agent_stats_t* out);

/* Attaches `json` (one JSON document, at most 1 MiB) to every later capture
 * of the kernel named `kernel_name` (the mangled name the driver or code
 * object gives it; Triton kernels have plain names); a later call for the
 * same name replaces it. python_shim hands Triton's JIT metadata over this
 * way. Returns 0 ok, 1 bad arguments (null or empty name, null json), 2 json
 * too large, 3 out of memory. */
KERNCAP_AGENT_API int kerncap_agent_set_jit_metadata(const char* kernel_name, const char* json);

/* Figures of the last capture that released the application. Times in
 * seconds; held_seconds is the application's pause; ring_bytes the host
 * staging mapped for captures. */
typedef struct kerncap_agent_capture_info_t {
  uint64_t pre_bytes;
  uint64_t post_bytes;
  uint64_t regions;
  uint64_t ring_bytes;
  double quiesce_seconds;
  double pre_seconds;
  double post_seconds;
  double held_seconds;
} kerncap_agent_capture_info_t;

/* Fills *out; returns 0 (nonzero only for a null pointer). */
KERNCAP_AGENT_API int kerncap_agent_get_last_capture(kerncap_agent_capture_info_t* out);

/* --- libkerncap_agent_hsa.so only ------------------------------------- */

typedef struct kerncap_agent_hsa_stats_t {
  uint64_t tracked_allocations;
  uint64_t intercepted_queues;
  uint64_t kernels_resolved;
  uint64_t packets_forwarded;
  uint64_t captures_committed;
  uint64_t captures_failed;
} kerncap_agent_hsa_stats_t;

/* Fills *out; returns 0 (nonzero only for a null pointer). */
KERNCAP_AGENT_API int kerncap_agent_hsa_get_stats(kerncap_agent_hsa_stats_t* out);

/* AmdExtTable entries beyond the layout this build knows (not hooked; on
 * ROCm >= 10 hsa_amd_queue_create is among them). 0 on known layouts. */
KERNCAP_AGENT_API uint64_t kerncap_agent_hsa_unhooked_amd_ext_entries(void);

/* Tests: 1 once the daemon link holds `n` active arms (waits up to timeout_ms). */
KERNCAP_AGENT_API int kerncap_agent_hsa_wait_arms(int n, int timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* KERNCAP_AGENT_API_KERNCAP_AGENT_H_ */
