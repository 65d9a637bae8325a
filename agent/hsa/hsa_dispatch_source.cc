#include "agent/hsa/hsa_dispatch_source.h"

#include <chrono>

#include "agent/core/allocation_regions.h"
#include "agent/core/log.h"
#include "agent/hsa/packets.h"

namespace kerncap::agent::hsa {

bool WaitSignalZero(const CoreApiTable& core, hsa_signal_t signal, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    // The timeout argument is only a hint (runtimes may return early), so
    // loop on the value against our own deadline. 1 ms hint in ns-ish ticks.
    hsa_signal_value_t v = core.hsa_signal_wait_scacquire_fn(
        signal, HSA_SIGNAL_CONDITION_EQ, 0, 1000000, HSA_WAIT_STATE_BLOCKED);
    if (v == 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
}

HsaDispatchSource::HsaDispatchSource(const SavedTables* tables, const AllocationTable* allocations,
                                     HsaDispatchTarget target)
    : tables_(tables), allocations_(allocations), target_(std::move(target)) {}

HsaDispatchSource::~HsaDispatchSource() {
  if (pre_.handle != 0 && !leak_pre_) tables_->core.hsa_signal_destroy_fn(pre_);
  if (post_.handle != 0 && !leak_post_) tables_->core.hsa_signal_destroy_fn(post_);
}

Status HsaDispatchSource::Quiesce() {
  const CoreApiTable& core = tables_->core;
  if (core.hsa_signal_create_fn(1, 0, nullptr, &pre_) != HSA_STATUS_SUCCESS ||
      core.hsa_signal_create_fn(1, 0, nullptr, &post_) != HSA_STATUS_SUCCESS) {
    return Error("hsa_signal_create failed");
  }
  hsa_barrier_and_packet_t barrier = MakeBarrier(pre_);
  target_.writer(&barrier, 1);
  if (!WaitSignalZero(core, pre_, target_.wait_timeout_ms)) {
    leak_pre_ = true;
    leak_post_ = true;  // never written; kept with pre_ for simplicity
    return Error("earlier packets of the dispatch's queue did not complete in time");
  }
  for (hsa_signal_t fence : target_.other_queue_fences) {
    if (!WaitSignalZero(core, fence, target_.wait_timeout_ms)) {
      leak_post_ = true;
      return Error("another queue's submitted work did not complete in time");
    }
  }
  return OkStatus();
}

Result<std::vector<RegionDesc>> HsaDispatchSource::Regions() {
  std::vector<RegionDesc> out =
      AllocationRegions(*allocations_, target_.device, target_.host_regions);
  if (target_.kernel) {
    for (const ModuleVariable& v : target_.kernel->variables) {
      // A variable inside a tracked allocation is already captured.
      if (!allocations_->Overlapping(v.address, v.size).empty()) continue;
      out.push_back(RegionDesc{v.address, v.size,
                               v.constant ? RegionKind::kConstant : RegionKind::kModuleGlobal,
                               target_.device, v.name});
    }
  }
  return out;
}

Result<std::vector<CodeObjectRef>> HsaDispatchSource::CodeObjects() {
  std::vector<CodeObjectRef> out;
  if (target_.kernel && target_.kernel->code_object && target_.kernel->code_object->code.bytes) {
    out.push_back(target_.kernel->code_object->code);
  } else {
    KC_ALOG(kWarn, "the kernel's code object is not available; capture has no code object");
  }
  return out;
}

Status HsaDispatchSource::ReadRegion(const RegionDesc& region, uint64_t offset, void* dst,
                                     size_t size) {
  hsa_status_t s = tables_->core.hsa_memory_copy_fn(
      dst, reinterpret_cast<const void*>(region.va + offset), size);
  if (s != HSA_STATUS_SUCCESS) return Error("hsa_memory_copy failed (status " + std::to_string(s) + ")");
  return OkStatus();
}

Status HsaDispatchSource::WaitForDispatch() {
  if (!WaitSignalZero(tables_->core, post_, target_.wait_timeout_ms)) {
    leak_post_ = true;
    return Error("the captured dispatch did not complete in time");
  }
  return OkStatus();
}

}  // namespace kerncap::agent::hsa
