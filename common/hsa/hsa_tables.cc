#include "common/hsa/hsa_tables.h"

#include <algorithm>
#include <cstring>

namespace kerncap::hsa {

AmdExtTableRocm6Tail* Rocm6Tail(AmdExtTable* table) {
  if (table == nullptr) return nullptr;
  size_t need = kAmdExtRocm6TailOffset + sizeof(AmdExtTableRocm6Tail);
  if (table->version.minor_id < need) return nullptr;
  return reinterpret_cast<AmdExtTableRocm6Tail*>(reinterpret_cast<char*>(table) +
                                                 kAmdExtRocm6TailOffset);
}

size_t UnknownAmdExtEntries(const AmdExtTable* table) {
  if (table == nullptr || table->version.minor_id <= kAmdExtKnownSize) return 0;
  return (table->version.minor_id - kAmdExtKnownSize) / sizeof(void*);
}

bool SaveTables(const HsaApiTable* table, SavedTables* saved, const char** why) {
  if (table == nullptr || table->core_ == nullptr || table->amd_ext_ == nullptr) {
    *why = "the runtime passed no core or AMD extension table";
    return false;
  }
  // Copy no more than either side knows about; missing entries stay null.
  auto copy = [](void* dst, size_t dst_size, const void* src) {
    const auto* v = static_cast<const ApiTableVersion*>(src);
    std::memcpy(dst, src, std::min<size_t>(dst_size, v->minor_id));
  };
  copy(&saved->core, sizeof(saved->core), table->core_);
  copy(&saved->amd, sizeof(saved->amd), table->amd_ext_);
  const size_t need_core = offsetof(CoreApiTable, hsa_executable_iterate_agent_symbols_fn);
  const size_t need_amd = offsetof(AmdExtTable, hsa_amd_queue_intercept_register_fn);
  if (!TableHas(table->core_->version, need_core) || !TableHas(table->amd_ext_->version, need_amd)) {
    *why = "the runtime's API tables are older than the queue intercept API";
    return false;
  }
  if (saved->amd.hsa_amd_queue_intercept_create_fn == nullptr ||
      saved->amd.hsa_amd_queue_intercept_register_fn == nullptr) {
    *why = "the runtime has no queue intercept entries";
    return false;
  }
  if (AmdExtTableRocm6Tail* tail = Rocm6Tail(table->amd_ext_)) {
    saved->rocm6 = *tail;
    saved->has_rocm6_vmem = tail->hsa_amd_vmem_map_fn != nullptr;
  }
  return true;
}

}  // namespace kerncap::hsa
