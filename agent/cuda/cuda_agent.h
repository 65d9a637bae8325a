// cuda_agent.h: the CUDA backend of libkerncap_agent.so. One instance per
// process, driven entirely by CUPTI callbacks (driver-API domain + resource
// domain), which fire however the application obtained its driver entry
// points (dlsym, cuGetProcAddress, static cudart, Triton, PyTorch).
//
// Always on (cheap): allocation tracking, module images, texture and surface
// objects, stream-capture bookkeeping, instantiated CUDA graphs
// (graph_registry.h). Armed: every driver call passes the CaptureGate in shared
// mode; a launch that an arm selects is captured with the core's orchestrator;
// a graph launch whose kernel node an arm selects runs node by node
// (cuda_agent_graph.cc).
//
// Unarmed, only the always-on driver callbacks are enabled (allocations,
// modules, texture/surface objects, stream capture), so kernel launches do not call back at all;
// arming switches every driver callback on (CallbackToggle) and disarming
// switches them back off once no armed call or capture is in flight
// (KERNCAP_AGENT_CALLBACK_TOGGLE=0 keeps them all on; a callback then costs
// one atomic load, armed_path_refs_, while unarmed). Callbacks are enabled id
// by id, never as whole CUPTI domains: a whole domain slows every launch
// (measured, see EnableCallbacks).
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
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "agent/core/agent_env.h"
#include "agent/core/allocation_table.h"
#include "agent/core/capture_gate.h"
#include "agent/core/capture_orchestrator.h"
#include "agent/core/capture_service.h"
#include "agent/core/capture_transport.h"
#include "agent/core/jit_metadata_registry.h"
#include "agent/cuda/callback_toggle.h"
#include "agent/cuda/cuda_dispatch_source.h"
#include "agent/cuda/graph_driver.h"
#include "agent/cuda/graph_executor.h"
#include "agent/cuda/graph_registry.h"
#include "agent/cuda/kernel_info.h"
#include "agent/cuda/launch_decoder.h"
#include "agent/cuda/module_registry.h"
#include "agent/cuda/texture_registry.h"

namespace kerncap::agent {
class LaunchSampler;  // agent/link/launch_sampler.h (built with the agent link)
}  // namespace kerncap::agent

namespace kerncap::agent::cuda {

class CudaSubstituter;  // cuda_substitution.h (built with the agent link)

// Settings from the environment (read once at initialization).
// Backend-independent settings come from agent/core/agent_env.h.
struct AgentConfig : CommonAgentConfig {
  int arm_grace_ms = 20;  // KERNCAP_AGENT_ARM_GRACE_MS (see CudaAgent::OnLaunchEnter)
  // KERNCAP_AGENT_CALLBACK_TOGGLE (default 1): only the always-on driver
  // callbacks stay enabled while unarmed; 0 keeps every driver callback on.
  bool callback_toggle = true;
  // KERNCAP_AGENT_CUPTI_DOMAINS: "ids" (default: callbacks enabled id by id),
  // "domains" (whole driver + resource domains, as before the P5 diagnosis;
  // slower launches) or "none" (diagnostic: subscribed, nothing enabled, no
  // captures).
  std::string cupti_domains = "ids";
  bool graph_tracking = true;  // KERNCAP_AGENT_GRAPH_TRACKING (diagnostic when 0)
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
  // `notifies_arming`: every change of the transport's Armed() is followed by
  // a call to ArmedStateChanged(), so launches can skip the armed path while
  // it is unset; otherwise every launch takes the armed path and asks.
  void SetTransport(CaptureTransport* transport, bool notifies_arming = false);
  // The installed transport's Armed() changed.
  void ArmedStateChanged() { SyncArmRef(); }
  const CallbackToggle& callback_toggle() const { return toggle_; }

  // Fork child: fresh state (parent's allocations/modules are not the child's).
  void ResetAfterFork();

  // Counters for the C API / diagnostics.
  size_t tracked_allocations() const { return allocations_.size(); }
  size_t tracked_modules() const { return modules_.size(); }
  size_t tracked_graph_execs() const { return graphs_.size(); }
  uint64_t captures_committed() const { return service_.captures_committed(); }
  uint64_t captures_failed() const { return service_.captures_failed(); }

  // Figures of the last capture that released the application (for the C API
  // and the benchmarks).
  LastCaptureFigures last_capture() const { return service_.last_capture(); }
  // Device snapshot policy (tests; default from the environment) and the
  // wait for a device snapshot draining after its release (tests, exit).
  void SetSnapshotPolicy(const SnapshotPolicy& policy) { service_.SetSnapshotPolicy(policy); }
  bool WaitForCaptureDrain(int timeout_ms) { return service_.WaitForDrain(timeout_ms); }

  AllocationTable& allocations() { return allocations_; }
  // Metadata of JIT kernels (python_shim), attached to their captures.
  JitMetadataRegistry& jit_metadata() { return jit_metadata_; }
  ModuleRegistry& modules() { return modules_; }
  const TextureRegistry& textures() const { return textures_; }
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
  // The capture of one dispatch, from the quiesced device (gate held
  // exclusively) to its pre image; `graph` is set for a kernel node of a
  // graph launch. Errors say why nothing was captured.
  Result<ActiveCapture*> BeginCapture(const LaunchCall* call,
                                      const std::shared_ptr<const KernelInfo>& info, int device,
                                      CUstream stream, const CaptureTicket* ticket,
                                      CaptureTransport* t, const GraphOriginDesc* graph,
                                      std::chrono::steady_clock::time_point gate_taken);
  // A launch's shape key for a per-shape arm (common/agent_link/
  // launch_shape.h): launch configuration from `desc`, scalars from the
  // argument blob with words into tracked allocations left out. nullopt when
  // the arguments cannot be read (unknown parameter layout).
  std::optional<uint64_t> LaunchShapeOf(link::PerShape mode, const LaunchDesc& desc,
                                        void* const* kernel_params, void* const* extra,
                                        const KernelInfo& info);
  // After the dispatch ran: post image, commit, counters, log. `release`
  // runs as soon as the application may continue (before the log).
  void EndCapture(ActiveCapture* capture, bool launch_ok, CaptureTransport* t,
                  const std::function<void()>& release);
  // Armed cuGraphLaunch ENTER (cuda_agent_graph.cc): when an arm selects
  // kernel nodes of the graph, runs it node by node with those nodes captured
  // and swaps the launch for an empty exec; otherwise leaves it untouched.
  // The caller then holds the gate shared until the EXIT, as for any call.
  void OnGraphLaunchEnter(CUpti_CallbackId cbid, const CUpti_CallbackData* cb,
                          CaptureTransport* t);
  // CallbackToggle's switch: all driver callbacks (on) or the always-on set.
  bool SwitchArmedCallbacks(bool on);
  bool EnableCallbacks();  // the CUPTI callbacks config_.cupti_domains names
  // Keeps the arm's reference on armed_path_refs_ in step with the transport.
  void SyncArmRef();
  // No link (disabled or not built): tracking only, launches never armed.
  void StopArmedPath();
  // One reference per launch from before its arm decision to the end of its
  // capture (or the decision not to capture).
  void AcquireCaptureRef();
  void ReleaseCaptureRef();
  void StartLink();
  int DeviceOf(CUcontext ctx);
  // on_ring_mapped / on_ring_unmapping of the link client (link thread).
  void RegisterRing(uint8_t* base, uint64_t bytes);
  void UnregisterRing(uint8_t* base, uint64_t bytes);
  // A selected dispatch that is not captured: counted, logged, reported.
  void Skip(CaptureTransport* t, const CaptureTicket& ticket, const KernelMatchInfo& info,
            const std::string& why, bool give_back) {
    service_.Skip(t, ticket, info, why, give_back);
  }

  AgentConfig config_;
  std::atomic<bool> active_{false};
  std::mutex init_mu_;
  bool init_attempted_ = false;
  CUpti_SubscriberHandle subscriber_ = nullptr;

  AllocationTable allocations_;
  ModuleRegistry modules_;
  TextureRegistry textures_;  // live texture/surface objects (always on)
  KernelInfoCache kernels_;
  JitMetadataRegistry jit_metadata_;
  // Gate, transport, begin/end, skips, counters (agent/core/capture_service.h).
  CaptureService service_;
  // The unarmed launch hot path reads only this count: above zero while
  // driver calls must take the armed path (pass the capture gate, ask the
  // arms). One reference while an arm applies to this process, or while that
  // is unknown (before the link starts, or a transport that does not notify
  // arming); plus one per launch from its arm decision to the end of its
  // capture. The latter keeps other threads gated while a capture runs even
  // though the arm that took the dispatch is already used up (and the
  // transport unarmed).
  std::atomic<int> armed_path_refs_{1};
  std::atomic<int> captures_in_flight_{0};
  std::mutex arm_ref_mu_;
  bool arm_ref_held_ = true;         // guarded by arm_ref_mu_
  bool transport_notifies_ = false;  // guarded by arm_ref_mu_
  bool link_off_ = false;            // guarded by arm_ref_mu_: tracking only
  // When the arm's reference was last taken: calls that entered the driver
  // just before may still be on their way (see OnLaunchEnter).
  std::atomic<int64_t> armed_since_ns_{0};
  CallbackToggle toggle_;
  PinnedRanges pinned_rings_;
  std::once_flag link_once_;
  std::atomic<int> streams_capturing_{0};
  std::atomic<bool> graph_warned_{false};  // an exec the agent never saw was launched
  // Instantiated graphs (always tracked) and the empty execs armed graph
  // launches are swapped to.
  CudaGraphApi graph_api_;
  GraphRegistry graphs_{&graph_api_};
  EmptyExecs empty_execs_;

  struct VmmHandle {
    uint64_t size = 0;
    int device = kAnyDevice;
  };
  std::mutex vmm_mu_;
  std::map<uint64_t, VmmHandle> vmm_handles_;

  // Live substitution (cuda_substitution.h); created with the daemon link,
  // never destroyed (its thread may outlive static destruction).
  std::atomic<CudaSubstituter*> substituter_{nullptr};
  // Launch sampling (kerncapctl kernels --sample; set with the link, leaked
  // with it): every launch and graph launch is counted while it samples.
  std::atomic<LaunchSampler*> sampler_{nullptr};
  void SampleLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData* cb, LaunchSampler& sampler);
  // A hold on the launch callbacks while a substitution lives or a sample
  // runs (as an arm holds them).
  void HoldLaunchCallbacks(bool on);
};

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_CUDA_AGENT_H_
