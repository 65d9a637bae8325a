// hsa_agent.h: the HSA backend of the agent. One instance per process,
// installed by OnLoad (tool_entry.cc) into the runtime's API tables.
//
// Always on (cheap): allocation tracking (memory pools, legacy
// hsa_memory_allocate, memory lock, IPC attach, ROCm >= 6 vmem), queue
// interception (every hsa_queue_create becomes an intercept queue whose
// handler forwards packets through the runtime's writer), executable
// lifetime. Unarmed, the handler forwards the whole submission in one writer
// call and does nothing else.
//
// Armed: every submission passes the CaptureGate shared and gets a counted
// fence barrier appended (so a capture can wait for all work already
// submitted on every queue). Packets are inspected one by one, in order; a
// dispatch an arm selects is captured around its forwarding:
//   forward earlier packets -> gate exclusive -> pre-barrier + wait ->
//   pre snapshot -> forward the target unmodified + post barrier -> wait ->
//   post snapshot -> gate released -> forward the rest.
// Unknown packet types are forwarded untouched. Any failure forwards the
// packet as if no agent were loaded.
//
// fork(): the child gets a fresh agent state (pthread_atfork, installed at the
// first Load): no queues, allocations, kernels or runtime facts of the parent
// (a ROCm child cannot use the parent's HSA objects; it re-learns agents and
// pools at its first queue creation), fresh locks and gate, zeroed counters.
// The patched tables stay installed. The daemon link client resets itself in
// the child and reconnects as a new agent. The parent is unaffected.
#ifndef KERNCAP_AGENT_HSA_HSA_AGENT_H_
#define KERNCAP_AGENT_HSA_HSA_AGENT_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/core/agent_env.h"
#include "agent/core/allocation_table.h"
#include "agent/core/capture_service.h"
#include "agent/core/capture_transport.h"
#include "agent/core/jit_metadata_registry.h"
#include "common/hsa/hsa_tables.h"
#include "agent/hsa/kernel_registry.h"

namespace kerncap::agent {
class LaunchSampler;  // agent/link/launch_sampler.h (built with the agent link)
}  // namespace kerncap::agent

namespace kerncap::agent::hsa {

// Backend-independent settings come from agent/core/agent_env.h.
struct AgentConfig : CommonAgentConfig {
  int wait_timeout_ms = 30000;  // KERNCAP_AGENT_WAIT_TIMEOUT_MS (signal waits)
};
AgentConfig ConfigFromEnv();

struct QueueState {
  hsa_queue_t* queue = nullptr;
  hsa_agent_t agent{0};
  int device = 0;
  // Number of fence barriers forwarded and not yet completed.
  hsa_signal_t fence{0};
};

struct AgentStats {
  uint64_t tracked_allocations = 0;
  uint64_t intercepted_queues = 0;
  uint64_t kernels_resolved = 0;
  uint64_t packets_forwarded = 0;
  uint64_t captures_committed = 0;
  uint64_t captures_failed = 0;
};

class HsaAgent {
 public:
  static HsaAgent& Instance();

  // Saves the runtime's tables and installs the wrappers. False: the agent
  // stays passive (tables unchanged).
  bool Load(HsaApiTable* table, uint64_t runtime_version);
  // Runtime shutdown: stops the link, forgets all state.
  void Unload();
  bool active() const { return active_.load(std::memory_order_acquire); }

  AgentStats stats() const;
  // Figures of the last capture that released the application.
  LastCaptureFigures last_capture() const { return service_.last_capture(); }
  // Tests: waits until the daemon link has `n` active arms.
  bool WaitArms(size_t n, int timeout_ms);
  const SavedTables& tables() const { return tables_; }
  // AmdExtTable entries beyond the layout this build knows (see
  // UnknownAmdExtEntries): nonzero means a newer runtime whose additions,
  // hsa_amd_queue_create (ROCm 10) among them, are not hooked.
  size_t unknown_amd_ext_entries() const { return unknown_amd_ext_entries_; }

  // Metadata of JIT kernels (python_shim), attached to their captures.
  JitMetadataRegistry& jit_metadata() { return jit_metadata_; }

  // pthread_atfork child handler (public for the C trampoline).
  void ForkChild();

 private:
  HsaAgent() = default;

  // Wrappers installed into the tables.
  static hsa_status_t QueueCreate(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                                  void (*callback)(hsa_status_t, hsa_queue_t*, void*), void* data,
                                  uint32_t private_segment_size, uint32_t group_segment_size,
                                  hsa_queue_t** queue);
  static hsa_status_t QueueDestroy(hsa_queue_t* queue);
  static void Intercept(const void* packets, uint64_t count, uint64_t user_index, void* data,
                        hsa_amd_queue_intercept_packet_writer writer);
  static hsa_status_t PoolAllocate(hsa_amd_memory_pool_t pool, size_t size, uint32_t flags,
                                   void** ptr);
  static hsa_status_t PoolFree(void* ptr);
  static hsa_status_t MemoryAllocate(hsa_region_t region, size_t size, void** ptr);
  static hsa_status_t MemoryFree(void* ptr);
  static hsa_status_t MemoryLock(void* host_ptr, size_t size, hsa_agent_t* agents, int num_agent,
                                 void** agent_ptr);
  static hsa_status_t MemoryLockToPool(void* host_ptr, size_t size, hsa_agent_t* agents,
                                       int num_agent, hsa_amd_memory_pool_t pool, uint32_t flags,
                                       void** agent_ptr);
  static hsa_status_t MemoryUnlock(void* host_ptr);
  static hsa_status_t IpcAttach(const hsa_amd_ipc_memory_t* handle, size_t len, uint32_t num_agents,
                                const hsa_agent_t* mapping_agents, void** mapped_ptr);
  static hsa_status_t IpcDetach(void* mapped_ptr);
  static hsa_status_t ExecutableDestroy(hsa_executable_t executable);
  static hsa_status_t VmemHandleCreate(hsa_amd_memory_pool_t pool, size_t size, int type,
                                       uint64_t flags, VmemAllocHandle* handle);
  static hsa_status_t VmemHandleRelease(VmemAllocHandle handle);
  static hsa_status_t VmemMap(void* va, size_t size, size_t in_offset, VmemAllocHandle handle,
                              uint64_t flags);
  static hsa_status_t VmemUnmap(void* va, size_t size);
  static hsa_status_t VmemSetAccess(void* va, size_t size, const VmemAccessDesc* desc,
                                    size_t desc_cnt);
  static hsa_status_t VmemAddressFree(void* va, size_t size);

  void EnsureRuntimeInfo();  // agents, pools, loader table, link (first queue)
  int DeviceOfAgent(hsa_agent_t agent) const;  // kAnyDevice for CPU/unknown
  int DeviceOfPool(hsa_amd_memory_pool_t pool) const;
  void TrackPointer(void* ptr, size_t size, int device_hint, AllocationKind kind);
  // A dispatch's shape key for a per-shape arm (common/agent_link/
  // launch_shape.h): grid and workgroup sizes, group segment, and the
  // kernarg segment (hidden arguments included) with words into tracked
  // allocations left out. nullopt when the kernarg segment cannot be read.
  std::optional<uint64_t> LaunchShapeOf(link::PerShape mode,
                                        const hsa_kernel_dispatch_packet_t& packet,
                                        const KernelRecord& kernel);
  void HandleArmed(QueueState* q, const uint8_t* packets, uint64_t count,
                   hsa_amd_queue_intercept_packet_writer writer, CaptureTransport* t);
  // Counts the kernel dispatches of a submission for a running launch sample.
  void SamplePackets(const uint8_t* packets, uint64_t count, LaunchSampler& sampler);
  // Captures around forwarding `packet`; false when it did not forward it.
  bool CaptureDispatch(QueueState* q, const hsa_kernel_dispatch_packet_t& packet,
                       const std::shared_ptr<const KernelRecord>& kernel,
                       const CaptureTicket& ticket, hsa_amd_queue_intercept_packet_writer writer,
                       CaptureTransport* t);
  void WriteFence(QueueState* q, hsa_amd_queue_intercept_packet_writer writer);
  std::vector<hsa_signal_t> OtherFences(const QueueState* q);
  void StartLink();
  void StopLink();

  AgentConfig config_;
  std::atomic<bool> active_{false};
  std::mutex mu_;  // tables install/uninstall, runtime info, queues
  SavedTables tables_;
  uint64_t runtime_version_ = 0;
  size_t unknown_amd_ext_entries_ = 0;
  bool runtime_info_ = false;
  std::vector<hsa_agent_t> gpus_;
  std::string gpu_names_[64];
  std::map<uint64_t, int> pool_device_;  // pool handle -> device (kAnyDevice: host)
  std::map<hsa_queue_t*, std::unique_ptr<QueueState>> queues_;
  std::map<uint64_t, std::pair<uint64_t, size_t>> locked_;  // host ptr -> (agent ptr, size)
  std::mutex vmem_mu_;
  std::map<uint64_t, std::pair<size_t, int>> vmem_handles_;  // handle -> (size, device)

  AllocationTable allocations_;
  std::unique_ptr<KernelRegistry> kernels_;
  JitMetadataRegistry jit_metadata_;
  // Gate, transport, begin/end, skips, counters (agent/core/capture_service.h).
  CaptureService service_;
  void* daemon_link_ = nullptr;  // DaemonLink* (agent/link/daemon_link.h), never destroyed
  // Launch sampling (set with the link, leaked with it); sampling_ is what
  // every submission checks (the sampler's hold).
  std::atomic<LaunchSampler*> sampler_{nullptr};
  std::atomic<bool> sampling_{false};
  std::atomic<uint64_t> packets_{0};
  std::atomic<int> gating_{0};  // submissions inside the gated (armed) path
};

}  // namespace kerncap::agent::hsa

#endif  // KERNCAP_AGENT_HSA_HSA_AGENT_H_
