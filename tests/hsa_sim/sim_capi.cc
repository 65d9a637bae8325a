// sim_capi.cc: the simulated runtime as a loadable HSA runtime library
// (libkerncap_hsa_sim_runtime.so). It exports the part of the HSA C API that
// kerncap-replay's HSA path resolves with dlsym (reproducer/replay/hsa/hsa_runtime.cc),
// including the ROCm >= 6 vmem entry points, each forwarding to the
// SimRuntime's API table. hsa_init creates the simulated runtime (with the
// test kernels registered) on first call; hsa_shut_down destroys it on the
// last, as reference counted by the HSA specification.
//
// Signatures come from the ROCm headers (the definitions below must match
// their declarations, or this file does not compile); the vmem ones from
// common/hsa/hsa_tables.h (ROCm 6.1's hsa_ext_amd.h).
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include <mutex>

#include "common/hsa/hsa_tables.h"
#include "tests/hsa_sim/host_kernels.h"
#include "tests/hsa_sim/sim_runtime.h"

namespace {

using ::kerncap::hsa::AmdExtTableRocm6Tail;
using ::kerncap::hsa::VmemAccessDesc;
using ::kerncap::hsa::VmemAllocHandle;
using kerncap::hsa_sim::SimRuntime;

std::mutex g_mu;
int g_refs = 0;
SimRuntime* g_runtime = nullptr;

const CoreApiTable& Core() { return *g_runtime->table()->core_; }
const AmdExtTable& Amd() { return *g_runtime->table()->amd_ext_; }
const AmdExtTableRocm6Tail& Vmem() { return *::kerncap::hsa::Rocm6Tail(g_runtime->table()->amd_ext_); }

}  // namespace

#define KC_EXPORT __attribute__((visibility("default")))

KC_EXPORT hsa_status_t HSA_API hsa_init() {
  std::lock_guard lock(g_mu);
  if (g_refs++ == 0) {
    g_runtime = new SimRuntime();
    kerncap::hsa_sim::RegisterTestKernels(*g_runtime);
  }
  return HSA_STATUS_SUCCESS;
}

KC_EXPORT hsa_status_t HSA_API hsa_shut_down() {
  std::lock_guard lock(g_mu);
  if (g_refs == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (--g_refs == 0) {
    delete g_runtime;
    g_runtime = nullptr;
  }
  return HSA_STATUS_SUCCESS;
}

KC_EXPORT hsa_status_t HSA_API hsa_iterate_agents(hsa_status_t (*callback)(hsa_agent_t, void*),
                                                  void* data) {
  return Core().hsa_iterate_agents_fn(callback, data);
}
KC_EXPORT hsa_status_t HSA_API hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute,
                                                  void* value) {
  return Core().hsa_agent_get_info_fn(agent, attribute, value);
}
KC_EXPORT hsa_status_t HSA_API hsa_memory_copy(void* dst, const void* src, size_t size) {
  return Core().hsa_memory_copy_fn(dst, src, size);
}
KC_EXPORT hsa_status_t HSA_API hsa_code_object_reader_create_from_memory(
    const void* code_object, size_t size, hsa_code_object_reader_t* reader) {
  return Core().hsa_code_object_reader_create_from_memory_fn(code_object, size, reader);
}
KC_EXPORT hsa_status_t HSA_API hsa_code_object_reader_destroy(hsa_code_object_reader_t reader) {
  return Core().hsa_code_object_reader_destroy_fn(reader);
}
KC_EXPORT hsa_status_t HSA_API hsa_executable_create_alt(
    hsa_profile_t profile, hsa_default_float_rounding_mode_t rounding, const char* options,
    hsa_executable_t* executable) {
  return Core().hsa_executable_create_alt_fn(profile, rounding, options, executable);
}
KC_EXPORT hsa_status_t HSA_API hsa_executable_destroy(hsa_executable_t executable) {
  return Core().hsa_executable_destroy_fn(executable);
}
KC_EXPORT hsa_status_t HSA_API hsa_executable_load_agent_code_object(
    hsa_executable_t executable, hsa_agent_t agent, hsa_code_object_reader_t reader,
    const char* options, hsa_loaded_code_object_t* loaded) {
  return Core().hsa_executable_load_agent_code_object_fn(executable, agent, reader, options,
                                                         loaded);
}
KC_EXPORT hsa_status_t HSA_API hsa_executable_freeze(hsa_executable_t executable,
                                                     const char* options) {
  return Core().hsa_executable_freeze_fn(executable, options);
}
KC_EXPORT hsa_status_t HSA_API hsa_executable_get_symbol_by_name(hsa_executable_t executable,
                                                                 const char* name,
                                                                 const hsa_agent_t* agent,
                                                                 hsa_executable_symbol_t* symbol) {
  return Core().hsa_executable_get_symbol_by_name_fn(executable, name, agent, symbol);
}
KC_EXPORT hsa_status_t HSA_API hsa_executable_symbol_get_info(hsa_executable_symbol_t symbol,
                                                              hsa_executable_symbol_info_t attr,
                                                              void* value) {
  return Core().hsa_executable_symbol_get_info_fn(symbol, attr, value);
}
KC_EXPORT hsa_status_t HSA_API hsa_queue_create(hsa_agent_t agent, uint32_t size,
                                                hsa_queue_type32_t type,
                                                void (*callback)(hsa_status_t, hsa_queue_t*, void*),
                                                void* data, uint32_t private_segment_size,
                                                uint32_t group_segment_size, hsa_queue_t** queue) {
  return Core().hsa_queue_create_fn(agent, size, type, callback, data, private_segment_size,
                                    group_segment_size, queue);
}
KC_EXPORT hsa_status_t HSA_API hsa_queue_destroy(hsa_queue_t* queue) {
  return Core().hsa_queue_destroy_fn(queue);
}
KC_EXPORT uint64_t HSA_API hsa_queue_add_write_index_scacq_screl(const hsa_queue_t* queue,
                                                                 uint64_t value) {
  return Core().hsa_queue_add_write_index_scacq_screl_fn(queue, value);
}
KC_EXPORT hsa_status_t HSA_API hsa_signal_create(hsa_signal_value_t initial_value,
                                                 uint32_t num_consumers,
                                                 const hsa_agent_t* consumers,
                                                 hsa_signal_t* signal) {
  return Core().hsa_signal_create_fn(initial_value, num_consumers, consumers, signal);
}
KC_EXPORT hsa_status_t HSA_API hsa_signal_destroy(hsa_signal_t signal) {
  return Core().hsa_signal_destroy_fn(signal);
}
KC_EXPORT void HSA_API hsa_signal_store_screlease(hsa_signal_t signal, hsa_signal_value_t value) {
  Core().hsa_signal_store_screlease_fn(signal, value);
}
KC_EXPORT hsa_signal_value_t HSA_API hsa_signal_wait_scacquire(hsa_signal_t signal,
                                                               hsa_signal_condition_t condition,
                                                               hsa_signal_value_t compare_value,
                                                               uint64_t timeout_hint,
                                                               hsa_wait_state_t wait_state_hint) {
  return Core().hsa_signal_wait_scacquire_fn(signal, condition, compare_value, timeout_hint,
                                             wait_state_hint);
}

KC_EXPORT hsa_status_t HSA_API hsa_amd_agent_iterate_memory_pools(
    hsa_agent_t agent, hsa_status_t (*callback)(hsa_amd_memory_pool_t, void*), void* data) {
  return Amd().hsa_amd_agent_iterate_memory_pools_fn(agent, callback, data);
}
KC_EXPORT hsa_status_t HSA_API hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t pool,
                                                            hsa_amd_memory_pool_info_t attribute,
                                                            void* value) {
  return Amd().hsa_amd_memory_pool_get_info_fn(pool, attribute, value);
}
KC_EXPORT hsa_status_t HSA_API hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t pool,
                                                            size_t size, uint32_t flags,
                                                            void** ptr) {
  return Amd().hsa_amd_memory_pool_allocate_fn(pool, size, flags, ptr);
}
KC_EXPORT hsa_status_t HSA_API hsa_amd_memory_pool_free(void* ptr) {
  return Amd().hsa_amd_memory_pool_free_fn(ptr);
}
KC_EXPORT hsa_status_t HSA_API hsa_amd_profiling_set_profiler_enabled(hsa_queue_t* queue,
                                                                      int enable) {
  return Amd().hsa_amd_profiling_set_profiler_enabled_fn(queue, enable);
}
KC_EXPORT hsa_status_t HSA_API hsa_amd_profiling_get_dispatch_time(
    hsa_agent_t agent, hsa_signal_t signal, hsa_amd_profiling_dispatch_time_t* time) {
  return Amd().hsa_amd_profiling_get_dispatch_time_fn(agent, signal, time);
}

// ROCm >= 6 vmem (not declared by the 5.2.3 headers).
extern "C" {
KC_EXPORT hsa_status_t hsa_amd_vmem_address_reserve(void** va, size_t size, uint64_t address,
                                                    uint64_t flags) {
  return Vmem().hsa_amd_vmem_address_reserve_fn(va, size, address, flags);
}
KC_EXPORT hsa_status_t hsa_amd_vmem_address_free(void* va, size_t size) {
  return Vmem().hsa_amd_vmem_address_free_fn(va, size);
}
KC_EXPORT hsa_status_t hsa_amd_vmem_handle_create(hsa_amd_memory_pool_t pool, size_t size,
                                                  int type, uint64_t flags,
                                                  VmemAllocHandle* handle) {
  return Vmem().hsa_amd_vmem_handle_create_fn(pool, size, type, flags, handle);
}
KC_EXPORT hsa_status_t hsa_amd_vmem_handle_release(VmemAllocHandle handle) {
  return Vmem().hsa_amd_vmem_handle_release_fn(handle);
}
KC_EXPORT hsa_status_t hsa_amd_vmem_map(void* va, size_t size, size_t in_offset,
                                        VmemAllocHandle handle, uint64_t flags) {
  return Vmem().hsa_amd_vmem_map_fn(va, size, in_offset, handle, flags);
}
KC_EXPORT hsa_status_t hsa_amd_vmem_unmap(void* va, size_t size) {
  return Vmem().hsa_amd_vmem_unmap_fn(va, size);
}
KC_EXPORT hsa_status_t hsa_amd_vmem_set_access(void* va, size_t size, const VmemAccessDesc* desc,
                                               size_t desc_cnt) {
  return Vmem().hsa_amd_vmem_set_access_fn(va, size, desc, desc_cnt);
}
}  // extern "C"
