// hsa_tables.h: the HSA runtime's API tables as an HSA tool sees them, plus
// what Debian's ROCm 5.2.3 headers lack.
//
// The runtime hands OnLoad an HsaApiTable whose sub-tables carry their size
// in version.minor_id (HsaApiTableContainer sets minor_id = sizeof(table)).
// Newer runtimes append entries; an entry exists iff its byte offset + 8 is
// within minor_id. We never read past minor_id.
//
// ROCm >= 6 appends to AmdExtTable, after hsa_amd_svm_prefetch_async_fn (the
// last entry both layouts share; ROCm 5.2.3 then has only
// hsa_amd_queue_cu_get_mask_fn):
//   spm_acquire, spm_release, spm_set_dest_buffer, queue_cu_get_mask,
//   portable_export_dmabuf, portable_close_dmabuf,
//   vmem_address_reserve, vmem_address_free, vmem_handle_create,
//   vmem_handle_release, vmem_map, vmem_unmap, vmem_set_access,
//   vmem_get_access, ...
// The vmem signatures below are the documented ROCm 6.1 API
// (hsa_ext_amd.h), declared here because 5.2.3 does not have them.
#ifndef KERNCAP_COMMON_HSA_HSA_TABLES_H_
#define KERNCAP_COMMON_HSA_HSA_TABLES_H_

#include <hsa/hsa.h>
#include <hsa/hsa_api_trace.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/hsa_ven_amd_loader.h>

#include <cstddef>
#include <cstdint>

namespace kerncap::hsa {

// --- ROCm 6 vmem API (hsa_ext_amd.h of ROCm >= 6.1) -------------------------
struct VmemAllocHandle {
  uint64_t handle;
};
// hsa_amd_memory_type_t: MEMORY_TYPE_NONE = 0, MEMORY_TYPE_PINNED = 1.
inline constexpr int kVmemMemoryTypeNone = 0;
// hsa_amd_memory_access_desc_t
struct VmemAccessDesc {
  hsa_access_permission_t permissions;
  hsa_agent_t agent_handle;
};
using VmemAddressReserveFn = hsa_status_t (*)(void** va, size_t size, uint64_t address,
                                             uint64_t flags);
using VmemAddressFreeFn = hsa_status_t (*)(void* va, size_t size);
using VmemHandleCreateFn = hsa_status_t (*)(hsa_amd_memory_pool_t pool, size_t size,
                                           int type, uint64_t flags,
                                           VmemAllocHandle* memory_handle);
using VmemHandleReleaseFn = hsa_status_t (*)(VmemAllocHandle memory_handle);
using VmemMapFn = hsa_status_t (*)(void* va, size_t size, size_t in_offset,
                                  VmemAllocHandle memory_handle, uint64_t flags);
using VmemUnmapFn = hsa_status_t (*)(void* va, size_t size);
using VmemSetAccessFn = hsa_status_t (*)(void* va, size_t size, const VmemAccessDesc* desc,
                                        size_t desc_cnt);

// The ROCm >= 6 tail of AmdExtTable, laid out from the first entry after
// hsa_amd_svm_prefetch_async_fn. Only accessed through the helpers below.
struct AmdExtTableRocm6Tail {
  void* hsa_amd_spm_acquire_fn;
  void* hsa_amd_spm_release_fn;
  void* hsa_amd_spm_set_dest_buffer_fn;
  void* hsa_amd_queue_cu_get_mask_fn;
  void* hsa_amd_portable_export_dmabuf_fn;
  void* hsa_amd_portable_close_dmabuf_fn;
  VmemAddressReserveFn hsa_amd_vmem_address_reserve_fn;
  VmemAddressFreeFn hsa_amd_vmem_address_free_fn;
  VmemHandleCreateFn hsa_amd_vmem_handle_create_fn;
  VmemHandleReleaseFn hsa_amd_vmem_handle_release_fn;
  VmemMapFn hsa_amd_vmem_map_fn;
  VmemUnmapFn hsa_amd_vmem_unmap_fn;
  VmemSetAccessFn hsa_amd_vmem_set_access_fn;
  void* hsa_amd_vmem_get_access_fn;
};

// Byte offset of the ROCm 6 tail inside AmdExtTable.
inline constexpr size_t kAmdExtRocm6TailOffset =
    offsetof(AmdExtTable, hsa_amd_svm_prefetch_async_fn) + sizeof(void*);

// The tail when the runtime's table is large enough to hold all of it, else
// nullptr (ROCm < 6). Sizes come from table->version.minor_id.
AmdExtTableRocm6Tail* Rocm6Tail(AmdExtTable* table);

// Size of the newest AmdExtTable layout this build knows (ROCm 6.1: up to
// hsa_amd_vmem_get_access_fn).
inline constexpr size_t kAmdExtKnownSize =
    kAmdExtRocm6TailOffset + sizeof(AmdExtTableRocm6Tail);

// Number of AmdExtTable entries the runtime advertises beyond the known
// layout. Their meaning is unknown to this build. ROCm 6.2+ appends entries
// there, and ROCm 10's hsa_amd_queue_create (HIP's queue creation there; a
// reference tool that did not hook it captured nothing on ROCm 10) is among them at a slot no header
// available here documents: it is NOT hooked, so queues created through it
// are not intercepted. The agent logs this at OnLoad.
size_t UnknownAmdExtEntries(const AmdExtTable* table);

// True when `field_offset` (+8) lies within the table's advertised size.
inline bool TableHas(const ApiTableVersion& version, size_t field_offset) {
  return field_offset + sizeof(void*) <= version.minor_id;
}

// Copies of the runtime's original entries, taken in OnLoad before any is
// replaced: the agent always calls the runtime through these, never through
// the (patched) live table.
struct SavedTables {
  CoreApiTable core{};
  AmdExtTable amd{};
  AmdExtTableRocm6Tail rocm6{};
  bool has_rocm6_vmem = false;
  hsa_ven_amd_loader_1_03_pfn_t loader{};
  bool has_loader = false;
};

// Fills `saved` from the live tables (bounded by their sizes). False when
// the tables are too small for what the agent needs (it then stays passive).
bool SaveTables(const HsaApiTable* table, SavedTables* saved, const char** why);

}  // namespace kerncap::hsa

#endif  // KERNCAP_COMMON_HSA_HSA_TABLES_H_
