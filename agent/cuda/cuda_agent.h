// cuda_agent.h: the CUDA backend of libkerncap_agent.so. One instance per
// process, driven entirely by CUPTI callbacks (driver-API domain + resource
// domain), which fire however the application obtained its driver entry
// points (dlsym, cuGetProcAddress, static cudart, Triton, PyTorch).
//
// Always on (cheap): allocation tracking, module images, stream-capture
// bookkeeping. Armed: every driver call passes the CaptureGate in shared mode;
// a launch that an arm selects is captured with the core's orchestrator.
//
// Unarmed, only the always-on driver callbacks are enabled (allocations,
// modules, stream capture): kernel launches and every other driver call cost
// nothing. Arming switches the whole driver domain on (CallbackToggle);
// disarming switches it back off once no armed call is in flight.
//
// Callback contract (per driver call, ENTER -> EXIT; the value is kept per
// thread by the ENTER, keyed by correlationId, and mirrored in
// correlationData; an EXIT whose ENTER was not seen holds nothing):
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

#include "agent/core/agent_env.h"
#include "agent/core/allocation_table.h"
#include "agent/core/capture_gate.h"
#include "agent/core/capture_orchestrator.h"
#include "agent/core/capture_transport.h"
#include "agent/cuda/callback_toggle.h"
#include "agent/cuda/cuda_dispatch_source.h"
#include "agent/cuda/kernel_info.h"
#include "agent/cuda/launch_decoder.h"
#include "agent/cuda/module_registry.h"

namespace kerncap::agent::cuda {

// Settings from the environment (read once at initialization).
// Backend-independent settings come from agent/core/agent_env.h.
struct AgentConfig : CommonAgentConfig {
  int arm_grace_ms = 20;  // KERNCAP_AGENT_ARM_GRACE_MS (see CudaAgent::OnLaunchEnter)
  // KERNCAP_AGENT_CALLBACK_TOGGLE=1: switch the launch callbacks off while
  // unarmed. Opt-in: it did not reach the P5 target on the H200 and one
  // benchmark capture was missed with it on (see README, "Benchmarks").
  bool callback_toggle = false;
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
  // `notifies_arming`: the transport's ArmedFlag() changes only together with
  // a call to ArmedStateChanged(), so the launch callbacks can stay off while
  // it is unset; otherwise they stay on.
  void SetTransport(CaptureTransport* transport, bool notifies_arming = false);
  // The installed transport's armed flag changed: switch callbacks to match.
  void ArmedStateChanged() { toggle_.Update(); }
  const CallbackToggle& callback_toggle() const { return toggle_; }

  // Fork child: fresh state (parent's allocations/modules are not the child's).
  void ResetAfterFork();

  // Counters for the C API / diagnostics.
  size_t tracked_allocations() const { return allocations_.size(); }
  size_t tracked_modules() const { return modules_.size(); }
  uint64_t captures_committed() const { return captures_ok_.load(); }
  uint64_t captures_failed() const { return captures_failed_.load(); }

  // Figures of the last capture that released the application (for the C API
  // and the benchmarks).
  struct LastCapture {
    uint64_t pre_bytes = 0;
    uint64_t post_bytes = 0;
    uint64_t regions = 0;
    double quiesce_seconds = 0;
    double pre_seconds = 0;
    double post_seconds = 0;
    double held_seconds = 0;  // gate held exclusively: the application's pause
    uint64_t ring_bytes = 0;  // host staging in use
  };
  LastCapture last_capture() const;

  AllocationTable& allocations() { return allocations_; }
  ModuleRegistry& modules() { return modules_; }
  const AgentConfig& config() const { return config_; }

 private:
  CudaAgent();
  static void CUPTIAPI Callback(void* userdata, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid, const void* data);
  void OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* data);
  void OnDriverApi(CUpti_CallbackId cbid, const CUpti_CallbackData* cb);
  void Track(CUpti_CallbackId cbid, const CUpti_CallbackData* cb);
  void OnLaunchEnter(CUpti_CallbackId cbid, const CUpti_CallbackData* cb, CaptureTransport* t);
  void OnLaunchExit(const CUpti_CallbackData* cb, uint64_t corr);
  // CallbackToggle's switch: all driver callbacks (on) or the always-on set.
  bool SwitchArmedCallbacks(bool on);
  void StartLink();
  int DeviceOf(CUcontext ctx);
  // on_ring_mapped / on_ring_unmapping of the link client (link thread).
  void RegisterRing(uint8_t* base, uint64_t bytes);
  void UnregisterRing(uint8_t* base, uint64_t bytes);
  // A selected dispatch that is not captured: counted, logged, reported.
  void Skip(CaptureTransport* t, const CaptureTicket& ticket, const KernelMatchInfo& info,
            const std::string& why, bool give_back);

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
  // The launch hot path reads only *armed_flag_: the transport's armed flag
  // once one is installed; before that a flag that is always set (so the
  // slow path can start the link), or never set (no link at all).
  std::atomic<const std::atomic<bool>*> armed_flag_;
  CallbackToggle toggle_;
  PinnedRanges pinned_rings_;
  mutable std::mutex last_mu_;
  LastCapture last_;
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
