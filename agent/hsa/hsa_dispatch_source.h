// hsa_dispatch_source.h: DispatchSource (agent/core/capture_orchestrator.h)
// for one HSA kernel dispatch packet, used from inside the queue intercept
// handler of the submitting thread.
//
//   Quiesce          barrier-AND (barrier bit, system fences) written through
//                    the queue's packet writer before the target, waited on;
//                    then every other intercepted queue's fence signal (the
//                    agent appends a counted barrier to each submission while
//                    armed) is waited to 0. The CaptureGate, held exclusively
//                    by the caller, keeps new submissions out meanwhile.
//   ReadRegion       hsa_memory_copy (runtime's original entry).
//   WaitForDispatch  waits on the barrier the agent writes right after the
//                    target packet (the app's packet is forwarded unmodified).
//
// All waits are bounded; a timed-out signal is leaked rather than destroyed,
// because a packet still in the queue refers to it.
#ifndef KERNCAP_AGENT_HSA_HSA_DISPATCH_SOURCE_H_
#define KERNCAP_AGENT_HSA_HSA_DISPATCH_SOURCE_H_

#include <memory>
#include <vector>

#include "agent/core/allocation_table.h"
#include "agent/core/capture_orchestrator.h"
#include "common/hsa/hsa_tables.h"
#include "agent/hsa/kernel_registry.h"

namespace kerncap::agent::hsa {

// Waits until `signal` == 0 or `timeout_ms` passes. True when it reached 0.
bool WaitSignalZero(const CoreApiTable& core, hsa_signal_t signal, int timeout_ms);

struct HsaDispatchTarget {
  int device = 0;
  hsa_amd_queue_intercept_packet_writer writer = nullptr;
  std::vector<hsa_signal_t> other_queue_fences;
  std::shared_ptr<const KernelRecord> kernel;
  bool host_regions = true;
  int wait_timeout_ms = 30000;
};

class HsaDispatchSource : public DispatchSource {
 public:
  HsaDispatchSource(const SavedTables* tables, const AllocationTable* allocations,
                    HsaDispatchTarget target);
  ~HsaDispatchSource() override;

  Status Quiesce() override;
  Result<std::vector<RegionDesc>> Regions() override;
  Result<std::vector<CodeObjectRef>> CodeObjects() override;
  Status ReadRegion(const RegionDesc& region, uint64_t offset, void* dst, size_t size) override;
  Status WaitForDispatch() override;

  // Signal of the barrier the caller writes right after the target packet
  // (created in Quiesce; handle 0 before).
  hsa_signal_t post_signal() const { return post_; }

 private:
  const SavedTables* tables_;
  const AllocationTable* allocations_;
  HsaDispatchTarget target_;
  hsa_signal_t pre_{0};
  hsa_signal_t post_{0};
  bool leak_pre_ = false;
  bool leak_post_ = false;
};

}  // namespace kerncap::agent::hsa

#endif  // KERNCAP_AGENT_HSA_HSA_DISPATCH_SOURCE_H_
