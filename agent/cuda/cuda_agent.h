// cuda_agent.h: the CUDA backend of libkerncap_agent.so. One instance per
// process, driven entirely by CUPTI callbacks (driver-API domain + resource
// domain), which fire however the application obtained its driver entry
// points (dlsym, cuGetProcAddress, static cudart, Triton, PyTorch).
//
// Always on (cheap): allocation tracking, module images, stream-capture
// bookkeeping. Armed: every driver call passes the CaptureGate in shared mode;
// a launch that an arm selects is captured with the core's orchestrator.
//
// Callback contract (per driver call, correlationData carries ENTER -> EXIT):
//   0                 nothing held
//   kGateShared (1)   this call holds the gate shared; EXIT releases it
//   other             pointer to the LaunchCapture in flight for this launch
#ifndef KERNCAP_AGENT_CUDA_CUDA_AGENT_H_
#define KERNCAP_AGENT_CUDA_CUDA_AGENT_H_

#include <cuda.h>
#include <cupti.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "agent/core/allocation_table.h"
#include "agent/core/capture_gate.h"
#include "agent/core/capture_orchestrator.h"
#include "agent/core/capture_transport.h"
#include "agent/cuda/kernel_info.h"
#include "agent/cuda/launch_decoder.h"
#include "agent/cuda/module_registry.h"

namespace kerncap::agent::cuda {

// Settings from the environment (read once at initialization).
struct AgentConfig {
  bool disabled = false;            // KERNCAP_AGENT_DISABLE=1: load but do nothing
  bool host_regions = true;         // KERNCAP_AGENT_HOST_REGIONS=0: skip pinned host memory
  int gate_timeout_ms = 10000;      // KERNCAP_AGENT_GATE_TIMEOUT_MS
  int arm_grace_ms = 20;            // KERNCAP_AGENT_ARM_GRACE_MS (see CudaAgent::OnLaunchEnter)
  bool connect = true;              // KERNCAP_AGENT_NO_DAEMON=1: no link (tracking only)
};
AgentConfig ConfigFromEnv();

class CudaAgent {
 public:
  static CudaAgent& Instance();

  // Subscribes to CUPTI. Idempotent and thread-safe; `how` names the entry
  // point for the log ("InitializeInjection", "LD_PRELOAD constructor").
  // Returns false when the agent stays inactive (CUPTI taken, disabled).
  bool Initialize(const char* how);
  bool active() const { return active_.load(std::memory_order_acquire); }

  // Installs a transport (tests, Python shim). Takes effect for later launches.
  void SetTransport(CaptureTransport* transport);

  // Fork child: fresh state (parent's allocations/modules are not the child's).
  void ResetAfterFork();

  // Counters for the C API / diagnostics.
  size_t tracked_allocations() const { return allocations_.size(); }
  size_t tracked_modules() const { return modules_.size(); }
  uint64_t captures_committed() const { return captures_ok_.load(); }
  uint64_t captures_failed() const { return captures_failed_.load(); }

  AllocationTable& allocations() { return allocations_; }
  ModuleRegistry& modules() { return modules_; }
  const AgentConfig& config() const { return config_; }

 private:
  CudaAgent() = default;
  static void CUPTIAPI Callback(void* userdata, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid, const void* data);
  void OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* data);
  void OnDriverApi(CUpti_CallbackId cbid, const CUpti_CallbackData* cb);
  void Track(CUpti_CallbackId cbid, const CUpti_CallbackData* cb);
  void OnLaunchEnter(CUpti_CallbackId cbid, const CUpti_CallbackData* cb, CaptureTransport* t);
  void OnLaunchExit(const CUpti_CallbackData* cb);
  void StartLink();
  int DeviceOf(CUcontext ctx);

  AgentConfig config_;
  std::atomic<bool> active_{false};
  std::mutex init_mu_;
  bool init_attempted_ = false;
  CUpti_SubscriberHandle subscriber_ = nullptr;

  AllocationTable allocations_;
  ModuleRegistry modules_;
  KernelInfoCache kernels_;
  CaptureGate gate_;
  std::atomic<CaptureTransport*> transport_{nullptr};
  std::once_flag link_once_;
  std::atomic<int> streams_capturing_{0};
  std::atomic<int64_t> armed_seen_ns_{0};
  std::atomic<bool> graph_warned_{false};
  std::atomic<uint64_t> captures_ok_{0};
  std::atomic<uint64_t> captures_failed_{0};

  struct VmmHandle {
    uint64_t size = 0;
    int device = kAnyDevice;
  };
  std::mutex vmm_mu_;
  std::map<uint64_t, VmmHandle> vmm_handles_;
};

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_CUDA_AGENT_H_
