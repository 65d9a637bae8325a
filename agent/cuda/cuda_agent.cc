#include "agent/cuda/cuda_agent.h"

#include <cupti.h>  // includes generated_cuda_meta.h (which has no include guard)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <thread>

#include "agent/core/log.h"
#include "agent/cuda/cuda_dispatch_source.h"
#include "agent/cuda/cupti_api.h"
#include "agent/cuda/driver_api.h"
#include "agent/cuda/driver_identity.h"
#include "agent/cuda/param_blob.h"
#include "agent/cuda/texture_params.h"
#ifdef KERNCAP_AGENT_HAVE_LINK
#include "agent/cuda/cuda_substitution.h"
#include "agent/link/daemon_link.h"
#include "agent/link/launch_sampler.h"
#include "common/agent_link/process_name.h"
#include "common/version.h"
#endif

namespace kerncap::agent::cuda {
namespace {

constexpr uint64_t kGateShared = 1;

// The callback toggle's source when callbacks are never switched off.
std::atomic<int> g_callbacks_always_wanted{1};

// > 0 while the agent itself is calling the driver on this thread: those
// calls are neither tracked as the application's nor gated.
thread_local int t_agent_depth = 0;

struct AgentScope {
  AgentScope() { ++t_agent_depth; }
  ~AgentScope() { --t_agent_depth; }
};

// What this thread's armed ENTERs hold, until their EXIT (see the callback
// contract in cuda_agent.h). Trivially destructible: callbacks can run while
// the thread exits. Driver calls do not nest, so one or two entries is usual.
struct HeldCall {
  uint32_t correlation_id;
  uint32_t cbid;
  uint64_t value;
};
constexpr int kMaxHeld = 16;
thread_local HeldCall t_held[kMaxHeld];
thread_local int t_held_n = 0;

void PushHeld(const CUpti_CallbackData* cb, CUpti_CallbackId cbid, uint64_t value) {
  t_held[t_held_n++] = HeldCall{cb->correlationId, static_cast<uint32_t>(cbid), value};
}

// The value this thread's ENTER recorded for this call, removed; 0 when the
// ENTER was not seen (callbacks switched on mid-call) or held nothing.
uint64_t PopHeld(const CUpti_CallbackData* cb, CUpti_CallbackId cbid) {
  for (int i = t_held_n - 1; i >= 0; --i) {
    if (t_held[i].correlation_id != cb->correlationId || t_held[i].cbid != cbid) continue;
    const uint64_t v = t_held[i].value;
    for (int j = i; j + 1 < t_held_n; ++j) t_held[j] = t_held[j + 1];
    --t_held_n;
    return v;
  }
  return 0;
}

// Launches the substituter decided about, until their EXIT (correlation id,
// cookie); separate from t_held so the capture path's contract is unchanged.
struct SubstitutedCall {
  uint32_t correlation_id;
  uint64_t cookie;
};
thread_local SubstitutedCall t_substituted[kMaxHeld];
thread_local int t_substituted_n = 0;

uint64_t PopSubstituted(const CUpti_CallbackData* cb) {
  for (int i = t_substituted_n - 1; i >= 0; --i) {
    if (t_substituted[i].correlation_id != cb->correlationId) continue;
    const uint64_t v = t_substituted[i].cookie;
    for (int j = i; j + 1 < t_substituted_n; ++j) t_substituted[j] = t_substituted[j + 1];
    --t_substituted_n;
    return v;
  }
  return 0;
}

// Driver callbacks that stay enabled while unarmed: everything Track() and
// the stream-capture bookkeeping need. Everything else is armed-only.
bool AlwaysOnDriverCallback(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister:
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle:
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportPointer:
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate:
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap:
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap:
    case CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoad:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz:
    // Texture and surface objects (not on the launch path).
    case CUPTI_DRIVER_TRACE_CBID_cuTexObjectCreate:
    case CUPTI_DRIVER_TRACE_CBID_cuTexObjectDestroy:
    case CUPTI_DRIVER_TRACE_CBID_cuSurfObjectCreate:
    case CUPTI_DRIVER_TRACE_CBID_cuSurfObjectDestroy:
      return true;
    default:
      // Graph instantiation, exec-level updates and destruction (graph_driver.h).
      return IsGraphTrackingCall(cbid);
  }
}

// Driver calls whose EXIT attributes the images loaded during the call to a
// module handle (Track). With lazy loading (the default) the image of a
// cuModuleLoadData module is loaded later, e.g. inside cuModuleGetFunction;
// an autotuner (Triton) loads several modules that define the same kernel
// name, so attributing images loaded in some earlier call would ship another
// candidate's cubin. Their ENTER starts a fresh attribution window.
bool AttributesLoadedModules(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoad:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction:
      return true;
    default:
      return false;
  }
}

}  // namespace

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool Succeeded(const CUpti_CallbackData* cb) {
  return cb->functionReturnValue != nullptr &&
         *static_cast<const CUresult*>(cb->functionReturnValue) == CUDA_SUCCESS;
}

std::string DriverVersionString() {
  // The kernel module's version ("580.159.04") is what a GPU engineer knows
  // the driver by (driver_identity.h); the CUDA version the driver supports
  // ("13.0") goes in runtime_version.
  return NvidiaKernelDriverVersion();
}

std::string RuntimeVersionString() {
  return CudaVersionString(DriverVersion());
}

DeviceDesc DescribeDevice(int ordinal) {
  DeviceDesc d;
  d.ordinal = ordinal;
  CUdevice dev;
  if (Driver().cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS) return d;
  char name[256] = {0};
  if (Driver().cuDeviceGetName(name, sizeof(name), dev) == CUDA_SUCCESS) d.name = name;
  int major = 0, minor = 0;
  Driver().cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  Driver().cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  d.arch = "sm_" + std::to_string(major * 10 + minor);
  size_t total = 0;
  if (Driver().cuDeviceTotalMem(&total, dev) == CUDA_SUCCESS) d.total_memory = total;
  char bus[64] = {0};
  if (Driver().cuDeviceGetPCIBusId(bus, sizeof(bus), dev) == CUDA_SUCCESS) d.pci_bus_id = bus;
  CUuuid uuid;
  if (Driver().cuDeviceGetUuid(&uuid, dev) == CUDA_SUCCESS) {
    char hex[48];
    const unsigned char* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
    std::snprintf(hex, sizeof(hex),
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                  b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                  b[13], b[14], b[15]);
    d.uuid = hex;
  }
  return d;
}

// Function attributes replay must re-apply or check, by name.
void AddFunctionAttributes(CUfunction f, std::map<std::string, int64_t>* out) {
  static const struct {
    CUfunction_attribute attr;
    const char* name;
  } kAttrs[] = {
      {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max_threads_per_block"},
      {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "shared_size_bytes"},
      {CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, "const_size_bytes"},
      {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "local_size_bytes"},
      {CU_FUNC_ATTRIBUTE_NUM_REGS, "num_regs"},
      {CU_FUNC_ATTRIBUTE_PTX_VERSION, "ptx_version"},
      {CU_FUNC_ATTRIBUTE_BINARY_VERSION, "binary_version"},
      {CU_FUNC_ATTRIBUTE_CACHE_MODE_CA, "cache_mode_ca"},
      {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, "max_dynamic_shared_size_bytes"},
      {CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, "preferred_shared_memory_carveout"},
      {CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, "cluster_size_must_be_set"},
      {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, "required_cluster_width"},
      {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, "required_cluster_height"},
      {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, "required_cluster_depth"},
      {CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, "non_portable_cluster_size_allowed"},
      {CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, "cluster_scheduling_policy_preference"},
  };
  for (const auto& a : kAttrs) {
    int v = 0;
    if (Driver().cuFuncGetAttribute(&v, a.attr, f) == CUDA_SUCCESS) (*out)[std::string("func.") + a.name] = v;
  }
}

}  // namespace

AgentConfig ConfigFromEnv() {
  AgentConfig c;
  static_cast<CommonAgentConfig&>(c) = CommonConfigFromEnv();
  c.arm_grace_ms = EnvInt("KERNCAP_AGENT_ARM_GRACE_MS", c.arm_grace_ms);
  c.callback_toggle = EnvInt("KERNCAP_AGENT_CALLBACK_TOGGLE", 1) != 0;
  c.graph_tracking = EnvInt("KERNCAP_AGENT_GRAPH_TRACKING", 1) != 0;
  if (const char* d = getenv("KERNCAP_AGENT_CUPTI_DOMAINS"); d != nullptr && *d != '\0') {
    c.cupti_domains = d;
  }
  return c;
}

CudaAgent::CudaAgent()
    : toggle_([this](bool on) { return SwitchArmedCallbacks(on); }, &g_callbacks_always_wanted) {}

bool CudaAgent::SwitchArmedCallbacks(bool on) {
  if (subscriber_ == nullptr) return true;
  if (config_.cupti_domains == "domains" && on) {
    return Cupti().cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS;
  }
  // One by one, both ways, never the whole domain: the always-on ids must
  // stay enabled (an allocation made meanwhile is still tracked), and a
  // whole-domain switch is what costs every launch (see EnableCallbacks).
  // Ids the driver does not know fail harmlessly.
  for (CUpti_CallbackId id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id) {
    if (!AlwaysOnDriverCallback(id)) {
      Cupti().cuptiEnableCallback(on ? 1 : 0, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, id);
    }
  }
  return true;
}

CudaAgent& CudaAgent::Instance() {
  // Leaked on purpose: callbacks can fire during static destruction.
  static CudaAgent* agent = new CudaAgent();
  return *agent;
}

bool CudaAgent::EnableCallbacks() {
  const std::string& mode = config_.cupti_domains;
  if (mode == "domains") {
    // Before P5's diagnosis: whole domains. Kept to measure the difference.
    KC_ALOG(kWarn, "KERNCAP_AGENT_CUPTI_DOMAINS=domains: whole CUPTI domains (slower launches)");
    return Cupti().cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS &&
           Cupti().cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE) == CUPTI_SUCCESS;
  }
  if (mode == "none") {
    // Diagnostic: what subscribing alone costs; nothing is tracked.
    KC_ALOG(kWarn, "KERNCAP_AGENT_CUPTI_DOMAINS=none: diagnostic mode, no captures");
    return true;
  }
  if (mode != "ids") {
    KC_ALOG(kError, "KERNCAP_AGENT_CUPTI_DOMAINS=%s: expected ids (default), domains or none",
            mode.c_str());
    return false;
  }
  // Every callback id by id. On the H200 (P5 diagnostics, 300k empty
  // launches) enabling the whole resource domain made every launch ~10%
  // slower although none of its callbacks fires per launch, while the same
  // callbacks enabled one by one cost nothing measurable (0.997 of the
  // no-agent rate with module + allocation ids).
  for (CUpti_CallbackId id : {CUPTI_CBID_RESOURCE_CU_INIT_FINISHED, CUPTI_CBID_RESOURCE_MODULE_LOADED,
                              CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING,
                              CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING}) {
    if (Cupti().cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, id) != CUPTI_SUCCESS) return false;
  }
  bool any = false;
  for (CUpti_CallbackId id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id) {
    // KERNCAP_AGENT_GRAPH_TRACKING=0 (diagnostic: what tracking graphs costs
    // graph launches): graphs are then not tracked, and their kernels refused.
    if (AlwaysOnDriverCallback(id) && (config_.graph_tracking || !IsGraphTrackingCall(id))) {
      any |= Cupti().cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, id) == CUPTI_SUCCESS;
    }
  }
  // The toggle starts "on": the armed ids too, until the link says unarmed.
  return any && SwitchArmedCallbacks(true);
}

bool CudaAgent::Initialize(const char* how) {
  std::lock_guard lock(init_mu_);
  if (init_attempted_) return active();
  init_attempted_ = true;
  InitLogFromEnv();
  config_ = ConfigFromEnv();
  if (config_.disabled) {
    KC_ALOG(kInfo, "disabled by KERNCAP_AGENT_DISABLE");
    return false;
  }
  // Neither the driver nor CUPTI is a link dependency: a host without a
  // driver runs every process as if the agent were not loaded (not a word on
  // stderr: the agent may be preloaded into everything there).
  std::string why;
  if (!LoadDriverApi(&why)) {
    KC_ALOG(kInfo, "inactive: %s", why.c_str());
    return false;
  }
  if (DriverVersion() <= 0) {
    KC_ALOG(kWarn, "inactive: libcuda.so.1 does not report a CUDA version (a stub library?)");
    return false;
  }
  if (!LoadCuptiApi(DriverVersion() / 1000, &why)) {
    // Once per process (Initialize runs once): the host has a driver, so the
    // user expects captures.
    KC_ALOG(kWarn, "inactive, no captures from this process: %s", why.c_str());
    return false;
  }
  KC_ALOG(kInfo, "CUDA %d.%d driver, CUPTI %d from %s", DriverVersion() / 1000,
          DriverVersion() % 1000 / 10, Cupti().major, Cupti().path.c_str());
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "kerncap";
  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {0};
  params.oldSubscriberName = old_name;
  params.oldSubscriberSize = sizeof(old_name);
  // CUPTI 12 has no cuptiSubscribe_v2 (it cannot name the other subscriber).
  CUptiResult r = Cupti().cuptiSubscribe_v2 != nullptr
                      ? Cupti().cuptiSubscribe_v2(&subscriber_, &CudaAgent::Callback, this, &params)
                      : Cupti().cuptiSubscribe(&subscriber_, &CudaAgent::Callback, this);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    // One line, then out of the way: the app runs exactly as without us.
    KC_ALOG(kError,
            "CUPTI is already in use by another tool (%s); kerncap agent inactive, no captures "
            "from this process",
            old_name[0] ? old_name : "unknown subscriber");
    return false;
  }
  if (r != CUPTI_SUCCESS) {
    const char* msg = nullptr;
    Cupti().cuptiGetResultString(r, &msg);
    KC_ALOG(kError, "cuptiSubscribe failed (%s); kerncap agent inactive", msg ? msg : "?");
    return false;
  }
  if (!EnableCallbacks()) {
    KC_ALOG(kError, "enabling CUPTI callbacks failed; kerncap agent inactive");
    Cupti().cuptiUnsubscribe(subscriber_);
    return false;
  }
  active_.store(true, std::memory_order_release);
  KC_ALOG(kInfo, "active (loaded via %s)", how);
  return true;
}

void CudaAgent::SetTransport(CaptureTransport* transport, bool notifies_arming) {
  {
    std::lock_guard lock(arm_ref_mu_);
    transport_notifies_ = notifies_arming;
    service_.SetTransport(transport);
  }
  SyncArmRef();
  // Callbacks can go off while unarmed only when arming is reported.
  toggle_.SetSource(notifies_arming && config_.callback_toggle ? &armed_path_refs_
                                                               : &g_callbacks_always_wanted);
}

void CudaAgent::SyncArmRef() {
  std::lock_guard lock(arm_ref_mu_);
  CaptureTransport* t = service_.transport();
  // No transport yet: the slow path starts the link (unless the link is off).
  // A transport that reports arming holds the armed path only while armed;
  // one installed without reporting (in-process tests) holds it always.
  bool hold = !link_off_;
  if (t != nullptr) hold = transport_notifies_ ? t->Armed() : true;
  if (hold == arm_ref_held_) return;
  arm_ref_held_ = hold;
  if (hold) {
    armed_since_ns_.store(NowNs());
    armed_path_refs_.fetch_add(1);
  } else {
    armed_path_refs_.fetch_sub(1);
  }
  toggle_.Update();
}

void CudaAgent::StopArmedPath() {
  {
    std::lock_guard lock(arm_ref_mu_);
    link_off_ = true;
  }
  SyncArmRef();
  toggle_.SetSource(config_.callback_toggle ? &armed_path_refs_ : &g_callbacks_always_wanted);
}

void CudaAgent::HoldLaunchCallbacks(bool on) {
  if (on) {
    armed_path_refs_.fetch_add(1);
    toggle_.Update();
  } else if (armed_path_refs_.fetch_sub(1) == 1) {
    toggle_.Update();
  }
}

void CudaAgent::AcquireCaptureRef() {
  armed_path_refs_.fetch_add(1);
  captures_in_flight_.fetch_add(1);
}

void CudaAgent::ReleaseCaptureRef() {
  captures_in_flight_.fetch_sub(1);
  if (armed_path_refs_.fetch_sub(1) == 1) toggle_.Update();
}

void CudaAgent::ResetAfterFork() {
  allocations_.ResetAfterFork();
  jit_metadata_.ResetAfterFork();
  // Module/kernel caches are only read by captures; the child starts empty
  // (a forked child must re-initialize CUDA anyway).
  new (&vmm_mu_) std::mutex();
  vmm_handles_.clear();
  textures_.ResetAfterFork();
  streams_capturing_.store(0);
  graphs_.ResetAfterFork();
  empty_execs_.ResetAfterFork();
  t_held_n = 0;
  t_substituted_n = 0;
#ifdef KERNCAP_AGENT_HAVE_LINK
  if (CudaSubstituter* sub = substituter_.load()) sub->ResetAfterFork();
#endif
  // Fresh gate; the transport resets itself; the counters carry on.
  service_.ResetAfterFork(/*zero_counters=*/false);
  // No capture runs in the child; the arm's reference follows the
  // transport's (reset) state.
  new (&arm_ref_mu_) std::mutex();
  captures_in_flight_.store(0);
  armed_path_refs_.store(arm_ref_held_ ? 1 : 0);
  SyncArmRef();
  toggle_.ResetAfterFork();  // after the transport: its armed flag is reset now
}

void CUPTIAPI CudaAgent::Callback(void* userdata, CUpti_CallbackDomain domain,
                                  CUpti_CallbackId cbid, const void* data) {
  auto* self = static_cast<CudaAgent*>(userdata);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    if (t_agent_depth > 0) return;  // the agent's own driver calls
    self->OnDriverApi(cbid, static_cast<const CUpti_CallbackData*>(data));
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    self->OnResource(cbid, static_cast<const CUpti_ResourceData*>(data));
  }
}

void CudaAgent::OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* data) {
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_CU_INIT_FINISHED:
      StartLink();
      break;
    case CUPTI_CBID_RESOURCE_MODULE_LOADED: {
      auto* m = static_cast<const CUpti_ModuleResourceData*>(data->resourceDescriptor);
      if (m != nullptr && m->pCubin != nullptr && m->cubinSize > 0) {
        modules_.OnModuleLoaded(m->moduleId, reinterpret_cast<uint64_t>(data->context), m->pCubin,
                                m->cubinSize);
      }
      break;
    }
    case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING: {
      auto* m = static_cast<const CUpti_ModuleResourceData*>(data->resourceDescriptor);
      if (m != nullptr) modules_.OnModuleUnloading(m->moduleId);
      break;
    }
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
      // A drain still reading this context's snapshot (cudaDeviceReset right
      // after the captured launch) finishes first.
      CaptureService::WaitForAllDrains("context teardown");
      allocations_.EraseContext(reinterpret_cast<uint64_t>(data->context));
      textures_.EraseContext(reinterpret_cast<uint64_t>(data->context));
      break;
    default:
      break;
  }
}

void CudaAgent::OnDriverApi(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  const bool launch = IsKernelLaunch(cbid);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    *cb->correlationData = 0;
    // Not a launch: images loaded before this call belong to no handle it
    // will name (see AttributesLoadedModules).
    if (!launch && AttributesLoadedModules(cbid)) modules_.DiscardPending();
    // Before the driver can hand the handle out again (graph_registry.h).
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy && cb->functionParams != nullptr) {
      AgentScope scope;
      graphs_.OnDestroy(reinterpret_cast<uint64_t>(
          static_cast<const cuGraphExecDestroy_params*>(cb->functionParams)->hGraphExec));
    }
    // The unarmed path: one atomic load, nothing else.
    if (armed_path_refs_.load(std::memory_order_acquire) == 0) return;
#ifdef KERNCAP_AGENT_HAVE_LINK
    // Live substitution decides first: a capture of a substituted dispatch
    // is a capture of the variant (what ran).
    if (launch && t_substituted_n < kMaxHeld) {
      CudaSubstituter* sub = substituter_.load(std::memory_order_acquire);
      if (sub != nullptr && sub->live()) {
        AgentScope scope;
        const uint64_t cookie = sub->OnLaunchEnter(cbid, cb);
        if (cookie != 0) t_substituted[t_substituted_n++] = SubstitutedCall{cb->correlationId, cookie};
      }
    }
    if (launch || IsGraphLaunch(cbid)) {
      LaunchSampler* sampler = sampler_.load(std::memory_order_acquire);
      if (sampler != nullptr && sampler->active()) {
        AgentScope scope;
        SampleLaunch(cbid, cb, *sampler);
      }
    }
#endif
    CaptureTransport* t = service_.transport();
    if (t == nullptr) {
      // No CU_INIT_FINISHED seen (agent attached late): connect on first launch.
      if (launch) StartLink();
      return;
    }
    // A capture in flight gates every call, armed or not any more.
    if (!t->Armed() && captures_in_flight_.load() == 0) return;
    // Armed path: counted in flight until EXIT, so the callbacks cannot be
    // switched off between this ENTER and its EXIT.
    if (t_held_n >= kMaxHeld || !toggle_.BeginCall()) return;
    if (launch) {
      OnLaunchEnter(cbid, cb, t);
      const uint64_t held = *cb->correlationData;
      if (held != 0) {
        PushHeld(cb, cbid, held);
      } else {
        toggle_.EndCall();
      }
      return;
    }
    if (IsGraphLaunch(cbid)) {
      AgentScope scope;
      OnGraphLaunchEnter(cbid, cb, t);
    }
    service_.gate().EnterShared();
    *cb->correlationData = kGateShared;
    PushHeld(cb, cbid, kGateShared);
    return;
  }
  // EXIT: only what this thread's ENTER recorded is trusted.
#ifdef KERNCAP_AGENT_HAVE_LINK
  if (launch && t_substituted_n > 0) {
    const uint64_t cookie = PopSubstituted(cb);
    CudaSubstituter* sub = substituter_.load(std::memory_order_acquire);
    if (cookie != 0 && sub != nullptr) {
      AgentScope scope;
      sub->OnLaunchExit(cookie, cb);
    }
  }
#endif
  const uint64_t corr = t_held_n > 0 ? PopHeld(cb, cbid) : 0;
  if (launch && corr > kGateShared) {
    OnLaunchExit(cb, corr);  // completes even if disarmed meanwhile
    toggle_.EndCall();
    return;
  }
  if (!launch && Succeeded(cb)) Track(cbid, cb);
  if (!launch && (cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture ||
                  cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz)) {
    // The capture ends whether or not EndCapture succeeded.
    int v = streams_capturing_.load();
    while (v > 0 && !streams_capturing_.compare_exchange_weak(v, v - 1)) {
    }
  }
  if (corr == kGateShared) service_.gate().ExitShared();
  if (corr != 0) {
    toggle_.EndCall();
  } else {
    toggle_.FinishPending();
  }
}

#ifdef KERNCAP_AGENT_HAVE_LINK
void CudaAgent::SampleLaunch(CUpti_CallbackId cbid, const CUpti_CallbackData* cb,
                             LaunchSampler& sampler) {
  // A launch into a stream being captured into a graph does not run now (as
  // for arms): its kernels count when the graph is launched.
  if (IsGraphLaunch(cbid)) {
    auto* params = static_cast<const cuGraphLaunch_params*>(cb->functionParams);
    if (params == nullptr || params->hGraph == nullptr) return;
    if (StreamBeingCaptured(GraphLaunchStream(cbid, *params))) return;
    sampler.RecordGraphLaunch();
    // Not counted as a launch of the exec: the armed path counts it.
    std::shared_ptr<const GraphLaunchPlan> plan = graphs_.BeginLaunch(
        static_cast<uint64_t>(reinterpret_cast<uintptr_t>(params->hGraph)), /*count=*/false);
    if (plan == nullptr) return;  // instantiated before the agent: its nodes are unknown
    for (const FlatNode& n : plan->nodes()) {
      if (n.kind != GraphNodeKind::kKernel || !n.enabled) continue;
      std::shared_ptr<const KernelInfo> info =
          kernels_.Get(reinterpret_cast<CUfunction>(static_cast<uintptr_t>(n.function)), nullptr);
      EagerOp op;
      if (PrepareEagerOp(n, *plan, cb->context, &op).ok()) {
        sampler.Record(info->mangled_name, info->demangled_name, ToSampledConfig(op.desc),
                       LaunchShapeOf(link::PerShape::kScalars, op.desc, op.kernel_params,
                                     op.extra, *info));
      } else {
        sampler.Record(info->mangled_name, info->demangled_name, link::SampledConfig{},
                       std::nullopt);
      }
    }
    return;
  }
  std::optional<LaunchCall> call = DecodeLaunch(cbid, cb->functionParams);
  if (!call || call->function == nullptr) {
    sampler.Record("", "", link::SampledConfig{}, std::nullopt);
    return;
  }
  if (StreamBeingCaptured(LaunchStream(*call))) return;
  std::shared_ptr<const KernelInfo> info = kernels_.Get(call->function, cb->symbolName);
  sampler.Record(info->mangled_name, info->demangled_name, ToSampledConfig(call->desc),
                 LaunchShapeOf(link::PerShape::kScalars, call->desc, call->kernel_params,
                               call->extra, *info));
}
#endif

int CudaAgent::DeviceOf(CUcontext ctx) {
  uint32_t id = 0;
  if (ctx != nullptr && Cupti().cuptiGetDeviceId(ctx, &id) == CUPTI_SUCCESS) return static_cast<int>(id);
  CUdevice dev = 0;
  AgentScope scope;
  if (Driver().cuCtxGetDevice(&dev) == CUDA_SUCCESS) return static_cast<int>(dev);
  return 0;
}

void CudaAgent::Track(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  const void* p = cb->functionParams;
  const uint64_t ctx = reinterpret_cast<uint64_t>(cb->context);
  auto device_alloc = [&](uint64_t va, uint64_t size, AllocationKind kind) {
    Allocation a;
    a.va = va;
    a.size = size;
    a.kind = kind;
    a.context = ctx;
    a.device = (kind == AllocationKind::kManaged || IsHostKind(kind)) ? kAnyDevice
                                                                      : DeviceOf(cb->context);
    allocations_.Insert(a);
  };
  auto range_of = [&](CUdeviceptr ptr, AllocationKind kind) {
    CUdeviceptr base = 0;
    size_t size = 0;
    AgentScope scope;
    if (Driver().cuMemGetAddressRange(&base, &size, ptr) == CUDA_SUCCESS) device_alloc(base, size, kind);
  };
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      auto* q = static_cast<const cuMemAlloc_v2_params*>(p);
      device_alloc(*q->dptr, q->bytesize, AllocationKind::kDevice);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      auto* q = static_cast<const cuMemAllocPitch_v2_params*>(p);
      device_alloc(*q->dptr, static_cast<uint64_t>(*q->pPitch) * q->Height, AllocationKind::kDevice);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      auto* q = static_cast<const cuMemAllocAsync_params*>(p);
      device_alloc(*q->dptr, q->bytesize, AllocationKind::kDeviceAsync);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      auto* q = static_cast<const cuMemAllocFromPoolAsync_params*>(p);
      device_alloc(*q->dptr, q->bytesize, AllocationKind::kDeviceAsync);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      allocations_.Erase(static_cast<const cuMemFree_v2_params*>(p)->dptr);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
      allocations_.Erase(static_cast<const cuMemFreeAsync_params*>(p)->dptr);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      auto* q = static_cast<const cuMemAllocManaged_params*>(p);
      device_alloc(*q->dptr, q->bytesize, AllocationKind::kManaged);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
      auto* q = static_cast<const cuMemHostAlloc_params*>(p);
      device_alloc(reinterpret_cast<uint64_t>(*q->pp), q->bytesize, AllocationKind::kHostPinned);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
      auto* q = static_cast<const cuMemAllocHost_v2_params*>(p);
      device_alloc(reinterpret_cast<uint64_t>(*q->pp), q->bytesize, AllocationKind::kHostPinned);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
      allocations_.Erase(reinterpret_cast<uint64_t>(static_cast<const cuMemFreeHost_params*>(p)->p));
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2: {
      auto* q = static_cast<const cuMemHostRegister_v2_params*>(p);
      device_alloc(reinterpret_cast<uint64_t>(q->p), q->bytesize, AllocationKind::kHostRegistered);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister:
      allocations_.Erase(
          reinterpret_cast<uint64_t>(static_cast<const cuMemHostUnregister_params*>(p)->p));
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2:
      range_of(*static_cast<const cuIpcOpenMemHandle_v2_params*>(p)->pdptr, AllocationKind::kDevice);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle:
      allocations_.Erase(static_cast<const cuIpcCloseMemHandle_params*>(p)->dptr);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolImportPointer:
      range_of(*static_cast<const cuMemPoolImportPointer_params*>(p)->ptr_out,
               AllocationKind::kDeviceAsync);
      break;
    // VMM (PyTorch expandable segments): physical handles become readable
    // memory only once mapped (cuMemMap) and made accessible (cuMemSetAccess).
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      auto* q = static_cast<const cuMemCreate_params*>(p);
      VmmHandle h;
      h.size = q->size;
      if (q->prop != nullptr && q->prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        h.device = q->prop->location.id;
      }
      std::lock_guard lock(vmm_mu_);
      vmm_handles_[static_cast<uint64_t>(*q->handle)] = h;
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
      std::lock_guard lock(vmm_mu_);
      vmm_handles_.erase(static_cast<uint64_t>(static_cast<const cuMemRelease_params*>(p)->handle));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      auto* q = static_cast<const cuMemMap_params*>(p);
      Allocation a;
      a.va = q->ptr;
      a.size = q->size;
      a.kind = AllocationKind::kVmmMapping;
      a.context = ctx;
      a.handle = static_cast<uint64_t>(q->handle);
      a.access_mask = 0;
      {
        std::lock_guard lock(vmm_mu_);
        auto it = vmm_handles_.find(a.handle);
        a.device = it != vmm_handles_.end() && it->second.device != kAnyDevice
                       ? it->second.device
                       : DeviceOf(cb->context);  // imported handle: assume this device
      }
      allocations_.Insert(a);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      auto* q = static_cast<const cuMemUnmap_params*>(p);
      allocations_.EraseRange(q->ptr, q->size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemSetAccess: {
      auto* q = static_cast<const cuMemSetAccess_params*>(p);
      uint64_t mask = 0;
      for (size_t i = 0; q->desc != nullptr && i < q->count; ++i) {
        const CUmemAccessDesc& d = q->desc[i];
        if (d.location.type == CU_MEM_LOCATION_TYPE_DEVICE && d.flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            d.location.id >= 0 && d.location.id < 64) {
          mask |= 1ull << d.location.id;
        }
      }
      if (mask != 0) allocations_.GrantAccess(q->ptr, q->size, mask);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
      auto* q = static_cast<const cuMemAddressFree_params*>(p);
      allocations_.EraseRange(q->ptr, q->size);
      break;
    }
    // Modules: attribute images loaded during the call to the handle it made
    // or named (with lazy loading, e.g. Triton's load-then-get, the image
    // arrives in cuModuleGetFunction).
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoad:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx:
    case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary:
      // All four parameter structs start with `CUmodule* module`.
      modules_.AttributePending(
          reinterpret_cast<uint64_t>(*static_cast<const cuModuleLoadData_params*>(p)->module));
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuModuleGetFunction:
      modules_.AttributePending(
          reinterpret_cast<uint64_t>(static_cast<const cuModuleGetFunction_params*>(p)->hmod));
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz:
      streams_capturing_.fetch_add(1);
      break;
    // Texture and surface objects, with the descriptors they were made from
    // (read at EXIT: the application's structs are still in place).
    case CUPTI_DRIVER_TRACE_CBID_cuTexObjectCreate: {
      auto* q = static_cast<const cuTexObjectCreate_params*>(p);
      if (q->pTexObject == nullptr || q->pResDesc == nullptr) break;
      textures_.Add(ctx, DescribeTextureObject(static_cast<uint64_t>(*q->pTexObject), *q->pResDesc,
                                               q->pTexDesc, q->pResViewDesc));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuSurfObjectCreate: {
      auto* q = static_cast<const cuSurfObjectCreate_params*>(p);
      if (q->pSurfObject == nullptr || q->pResDesc == nullptr) break;
      textures_.Add(ctx, DescribeSurfaceObject(static_cast<uint64_t>(*q->pSurfObject), *q->pResDesc));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuTexObjectDestroy:
      textures_.Remove(ctx, TextureObjectDesc::Type::kTexture,
                       static_cast<uint64_t>(static_cast<const cuTexObjectDestroy_params*>(p)->texObject));
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuSurfObjectDestroy:
      textures_.Remove(
          ctx, TextureObjectDesc::Type::kSurface,
          static_cast<uint64_t>(static_cast<const cuSurfObjectDestroy_params*>(p)->surfObject));
      break;
    default:
      if (IsGraphTrackingCall(cbid)) {
        AgentScope scope;
        TrackGraphCall(cbid, p, &graphs_);
      }
      break;
  }
}

void CudaAgent::OnLaunchEnter(CUpti_CallbackId cbid, const CUpti_CallbackData* cb,
                              CaptureTransport* t) {
  AgentScope scope;
  auto hold_shared = [&] {
    service_.gate().EnterShared();
    *cb->correlationData = kGateShared;
  };
  std::optional<LaunchCall> call = DecodeLaunch(cbid, cb->functionParams);
  if (!call || call->function == nullptr) return hold_shared();
  const int device = DeviceOf(cb->context);
  // A launch into a stream that is being captured into a graph does not run
  // now: it is not a dispatch (the arm neither counts nor sees it; the node
  // is counted when its graph is launched).
  const CUstream stream = LaunchStream(*call);
  if (StreamBeingCaptured(stream)) return hold_shared();
  std::shared_ptr<const KernelInfo> info = kernels_.Get(call->function, cb->symbolName);
  // Taken before the decision: the arm may be used up by it, and other
  // threads must stay gated until this capture is over.
  AcquireCaptureRef();
  KernelMatchInfo selecting{info->mangled_name, info->demangled_name, device, {}};
  // One reference captured, so the std::function holds it without a heap
  // allocation on this path.
  struct ShapeOfThisLaunch {
    CudaAgent* agent;
    const LaunchCall* call;
    const KernelInfo* info;
  } shape_of{this, &*call, info.get()};
  selecting.launch_shape = [&shape_of](link::PerShape mode) {
    return shape_of.agent->LaunchShapeOf(mode, shape_of.call->desc, shape_of.call->kernel_params,
                                         shape_of.call->extra, *shape_of.info);
  };
  std::optional<CaptureTicket> ticket = t->ShouldCapture(selecting);
  // Released on every way out of here except a capture that goes on to
  // OnLaunchExit, which releases it there.
  bool capture_continues = false;
  struct ReleaseUnlessContinued {
    CudaAgent* agent;
    const bool* continues;
    ~ReleaseUnlessContinued() {
      if (!*continues) agent->ReleaseCaptureRef();
    }
  } capture_ref{this, &capture_continues};
  if (!ticket) return hold_shared();

  const KernelMatchInfo match_info{info->mangled_name, info->demangled_name, device, {}};
  // Skips that depend on the moment (a graph being recorded, threads inside
  // CUDA calls) give the capture back to the arm: a later matching dispatch
  // is taken. Skips due to the kernel itself do not (they would repeat).
  auto skip = [&](const std::string& why, bool give_back = false) {
    Skip(t, *ticket, match_info, why, give_back);
  };

  // Never synchronize while any stream is being captured into a graph: the
  // sync fails (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and invalidates the
  // application's capture (measured).
  if (streams_capturing_.load() > 0) {
    skip("another stream of the process is capturing a CUDA graph; synchronizing would break it",
         /*give_back=*/true);
    return hold_shared();
  }

  // A thread that checked "armed" just before the arm arrived may still be
  // between its check and the driver enqueueing its work; give such calls a
  // moment to land before the gate is closed and the device drained.
  int64_t since = NowNs() - armed_since_ns_.load();
  int64_t grace = static_cast<int64_t>(config_.arm_grace_ms) * 1000000;
  if (since < grace) std::this_thread::sleep_for(std::chrono::nanoseconds(grace - since));

  if (!service_.gate().TryEnterExclusive(std::chrono::milliseconds(config_.gate_timeout_ms))) {
    skip("other threads stayed inside CUDA calls for longer than KERNCAP_AGENT_GATE_TIMEOUT_MS",
         /*give_back=*/true);
    return;
  }
  const auto gate_taken = std::chrono::steady_clock::now();

  // Everything below runs with the process quiesced (gate held exclusively).
  auto lc = BeginCapture(&*call, info, device, stream, &*ticket, t, nullptr, gate_taken);
  if (!lc.ok()) {
    service_.gate().ExitExclusive();
    return skip(lc.error());
  }
  *cb->correlationData = reinterpret_cast<uint64_t>(lc.value());
  capture_continues = true;
}

std::optional<uint64_t> CudaAgent::LaunchShapeOf(link::PerShape mode, const LaunchDesc& desc,
                                                 void* const* kernel_params, void* const* extra,
                                                 const KernelInfo& info) {
  std::string blob;
  if (mode == link::PerShape::kScalars) {
    if (!info.params_known && kernel_params != nullptr) return std::nullopt;
    Result<std::string> b = AssembleParamBlob(kernel_params, extra, info.params);
    if (!b.ok()) return std::nullopt;
    blob = std::move(b.value());
  }
  return DispatchShapeKey(mode, desc, blob, allocations_);
}

Result<ActiveCapture*> CudaAgent::BeginCapture(const LaunchCall* call,
                                               const std::shared_ptr<const KernelInfo>& info,
                                               int device, CUstream stream,
                                               const CaptureTicket* ticket, CaptureTransport* t,
                                               const GraphOriginDesc* graph,
                                               std::chrono::steady_clock::time_point gate_taken) {
  auto blob = AssembleParamBlob(call->kernel_params, call->extra, info->params);
  if (!info->params_known && call->kernel_params != nullptr) {
    return Error("the parameter layout is unknown (cuFuncGetParamInfo needs driver >= 12.4)");
  }
  if (!blob.ok()) return Error("argument blob: " + blob.error());

  // The real CUfunction in this context (cudart passes CUkernel handles), and
  // its module. Forcing the load makes a lazily loaded image show up now.
  const DriverApi& api = Driver();
  CUfunction f = call->function;
  if (info->is_kernel_handle && api.KernelGetFunction != nullptr) {
    CUfunction real = nullptr;
    if (api.KernelGetFunction(&real, reinterpret_cast<CUkernel>(call->function)) == CUDA_SUCCESS) {
      f = real;
    }
  }
  // Only images loaded by this forced load belong to the function's module;
  // earlier unattributed ones may be other modules defining the same name.
  modules_.DiscardPending();
  if (api.FuncLoad != nullptr) api.FuncLoad(f);
  CUmodule module = nullptr;
  if (Driver().cuFuncGetModule(&module, f) != CUDA_SUCCESS) module = nullptr;
  if (module != nullptr) {
    modules_.AttributePending(reinterpret_cast<uint64_t>(module));
  } else {
    modules_.DiscardPending();
  }

  CaptureHeader header;
  header.arm_id = ticket->arm_id;
  header.dispatch_index = ticket->dispatch_index;
  header.launch_shape = ticket->launch_shape;
  header.kernel.mangled_name = info->mangled_name;
  header.kernel.demangled_name = info->demangled_name;
  header.kernel.platform = Platform::kCuda;
  header.kernel.jit_metadata_json = jit_metadata_.Lookup(info->mangled_name);
  header.device = DescribeDevice(device);
  header.kernel.arch = header.device.arch;
  header.driver.driver_version = DriverVersionString();
  header.driver.runtime_version = RuntimeVersionString();
  uint32_t cupti_version = 0;
  Cupti().cuptiGetVersion(&cupti_version);
  header.driver.tool_version = "cupti-" + std::to_string(cupti_version);
  header.launch = call->desc;
  if (graph != nullptr) {
    header.from_graph = true;
    header.graph = *graph;
  }
  AddFunctionAttributes(f, &header.launch.attributes);
  for (const ParamInfo& pi : info->params) {
    ArgumentDesc a;
    a.offset = pi.offset;
    a.size = pi.size;
    a.kind = ArgumentKind::kValue;
    if (pi.size == 8 && pi.offset + 8 <= blob->size()) {
      uint64_t v;
      std::memcpy(&v, blob->data() + pi.offset, 8);
      if (allocations_.Lookup(v).has_value()) {
        a.kind = ArgumentKind::kPointer;  // points into a tracked allocation
      }
    }
    header.arguments.push_back(a);
  }

  DispatchTarget target;
  target.device = device;
  target.stream = stream;
  target.module = module;
  target.module_record = modules_.FindForKernel(reinterpret_cast<uint64_t>(module), info->mangled_name);
  target.host_regions = config_.host_regions;
  target.pinned = &pinned_rings_;
  target.enter_agent_thread = [] { ++t_agent_depth; };  // a snapshot's drain thread

  // Texture and surface handles in the arguments: recorded with their
  // descriptors so replay can recreate them, or the dispatch is refused.
  {
    TextureUse use;
    if (target.module_record != nullptr && target.module_record->info.has_value()) {
      use = cubin::KernelTextureUse(*target.module_record->info, info->mangled_name);
    }
    static const std::vector<ParamInfo> kUnknownLayout;
    // Objects are per context: the launching thread's current one (what
    // CUPTI reports as the callback's context for direct and graph launches).
    CUcontext ctx = nullptr;
    if (Driver().cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) ctx = nullptr;
    TextureParamMatch tex = MatchTextureParams(
        *blob, info->params_known ? info->params : kUnknownLayout, use, textures_,
        reinterpret_cast<uint64_t>(ctx), [this](uint64_t va, uint64_t size) {
          std::optional<Allocation> a = allocations_.Lookup(va);
          return a.has_value() && size <= a->end() - va;
        });
    if (!tex.refusal.empty()) return Error("texture/surface objects: " + tex.refusal);
    header.texture_objects = std::move(tex.objects);
  }

  auto capture = service_.Begin(t, std::make_unique<CudaDispatchSource>(&allocations_, target),
                                header, *blob, gate_taken);
  if (!capture.ok()) return capture.status();
  return capture.value().release();  // until the launch's EXIT (correlationData)
}

void CudaAgent::OnLaunchExit(const CUpti_CallbackData* cb, uint64_t corr) {
  AgentScope scope;
  *cb->correlationData = 0;
  EndCapture(reinterpret_cast<ActiveCapture*>(corr), Succeeded(cb),
             service_.transport(), [this] {
               service_.gate().ExitExclusive();  // the application continues
               ReleaseCaptureRef();
             });
}

void CudaAgent::EndCapture(ActiveCapture* capture, bool launch_ok, CaptureTransport* t,
                           const std::function<void()>& release) {
  service_.End(t, std::unique_ptr<ActiveCapture>(capture), launch_ok, release);
}

namespace {

// cuMemHostRegister needs a current context; the link thread has none. Borrow
// an already active primary context (never create one: that would cost the
// application device memory). Returns false when there is none.
class BorrowedContext {
 public:
  BorrowedContext() {
    CUcontext cur = nullptr;
    if (Driver().cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != nullptr) {
      ok_ = true;
      return;
    }
    int n = 0;
    if (Driver().cuDeviceGetCount(&n) != CUDA_SUCCESS) return;
    for (int i = 0; i < n && !ok_; ++i) {
      CUdevice dev;
      unsigned flags = 0;
      int active = 0;
      if (Driver().cuDeviceGet(&dev, i) != CUDA_SUCCESS) continue;
      if (Driver().cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active) continue;
      CUcontext ctx = nullptr;
      if (Driver().cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) continue;
      if (Driver().cuCtxPushCurrent(ctx) != CUDA_SUCCESS) {
        Driver().cuDevicePrimaryCtxRelease(dev);
        continue;
      }
      dev_ = dev;
      pushed_ = true;
      ok_ = true;
    }
  }
  ~BorrowedContext() {
    if (!pushed_) return;
    CUcontext popped = nullptr;
    Driver().cuCtxPopCurrent(&popped);
    Driver().cuDevicePrimaryCtxRelease(dev_);
  }
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
  bool pushed_ = false;
  CUdevice dev_ = 0;
};

}  // namespace

void CudaAgent::RegisterRing(uint8_t* base, uint64_t bytes) {
  AgentScope scope;  // not the application's allocation: never tracked or captured
  const auto t0 = std::chrono::steady_clock::now();
  BorrowedContext ctx;
  if (!ctx.ok()) {
    KC_ALOG(kInfo,
            "capture ring (%.2f GiB) not registered: no active CUDA context yet; captures pin "
            "its slots as they use them",
            bytes / 1073741824.0);
    return;
  }
  CUresult r = Driver().cuMemHostRegister(base, bytes, CU_MEMHOSTREGISTER_PORTABLE);
  if (r != CUDA_SUCCESS) {
    KC_ALOG(kWarn, "registering the capture ring (%.2f GiB) failed (%s); captures pin slots "
            "as they use them", bytes / 1073741824.0, CuErrorString(r).c_str());
    return;
  }
  pinned_rings_.Add(base, bytes);
  KC_ALOG(kInfo, "capture ring of %.2f GiB mapped and registered in %.3f s",
          bytes / 1073741824.0,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void CudaAgent::UnregisterRing(uint8_t* base, uint64_t bytes) {
  if (!pinned_rings_.Contains(base, bytes)) return;
  AgentScope scope;
  pinned_rings_.Remove(base);
  BorrowedContext ctx;
  Driver().cuMemHostUnregister(base);
}

void CudaAgent::StartLink() {
  std::call_once(link_once_, [this] {
    if (!config_.connect || service_.transport() != nullptr) {
      if (service_.transport() == nullptr) StopArmedPath();  // tracking only
      return;
    }
#ifdef KERNCAP_AGENT_HAVE_LINK
    AgentScope scope;
    link::HelloMsg identity;
    identity.platform = link::Platform::kCuda;
    identity.agent_version = ::kerncap::kVersion;
    int count = 0;
    if (Driver().cuDeviceGetCount(&count) == CUDA_SUCCESS) {
      for (int i = 0; i < count; ++i) {
        DeviceDesc d = DescribeDevice(i);
        link::DeviceInfo di;
        di.ordinal = static_cast<uint32_t>(i);
        di.name = d.name;
        di.arch = d.arch;
        di.uuid = d.uuid;
        di.total_memory = d.total_memory;
        di.pci_bus_id = d.pci_bus_id;
        identity.devices.push_back(di);
      }
    }
    identity.driver.driver_version = DriverVersionString();
    identity.driver.runtime_version = RuntimeVersionString();
    uint32_t cupti_version = 0;
    Cupti().cuptiGetVersion(&cupti_version);
    identity.driver.tool_version = "cupti-" + std::to_string(cupti_version);
    // The ring (asked for when an arm applies to this process) is registered
    // as pinned memory once per connection here, not per capture; launches
    // take the armed path only while an arm applies to this process.
    DaemonLinkHooks hooks;
    hooks.on_ring_mapped = [this](uint8_t* base, uint64_t bytes) { RegisterRing(base, bytes); };
    hooks.on_ring_unmapping = [this](uint8_t* base, uint64_t bytes) {
      UnregisterRing(base, bytes);
    };
    hooks.on_armed_changed = [this] { SyncArmRef(); };
    // The kernel census: the kernels of every module image the driver loaded.
    hooks.list_kernels = [this] {
      std::vector<link::LoadedKernelInfo> out;
      for (const ModuleRegistry::LoadedKernel& k : modules_.LoadedKernels()) {
        link::LoadedKernelInfo info;
        info.mangled_name = k.mangled_name;
        info.demangled_name = Demangle(k.mangled_name);
        info.module = "cuda-module-" + std::to_string(k.module_id);
        out.push_back(std::move(info));
      }
      return out;
    };
    // Live substitution: the link's hooks go to the substituter, which sends
    // its reports through the client once the link exists.
    std::string comm = link::ProcessName();  // as the link reports it
    auto* daemon_slot = new std::atomic<DaemonLink*>(nullptr);  // leaked with the link
    CudaSubstituter::Hooks sub_hooks;
    sub_hooks.send_report = [daemon_slot](const link::SubstitutionReportMsg& r) {
      if (DaemonLink* d = daemon_slot->load()) d->client()->SendSubstitutionReport(r);
    };
    sub_hooks.hold_launch_callbacks = [this](bool on) { HoldLaunchCallbacks(on); };
    sub_hooks.enter_agent_scope = [] { ++t_agent_depth; };
    sub_hooks.exit_agent_scope = [] { --t_agent_depth; };
    auto* sub = new CudaSubstituter(&kernels_, std::move(sub_hooks),
                                    static_cast<uint32_t>(::getpid()), comm);
    substituter_.store(sub, std::memory_order_release);
    hooks.on_substitute = [sub](const link::SubstituteMsg& m, std::string code) {
      return sub->OnSubstitute(m, std::move(code));
    };
    hooks.on_unsubstitute = [sub](const link::UnsubstituteMsg& m) { sub->OnUnsubstitute(m); };
    hooks.on_link_lost = [sub] { sub->OnLinkLost(); };
    auto* sampler = new LaunchSampler([this](bool on) { HoldLaunchCallbacks(on); });  // leaked
    sampler_.store(sampler, std::memory_order_release);
    hooks.launch_sampler = sampler;
    DaemonLink* daemon = DaemonLink::Start(&service_, std::move(identity), std::move(hooks));
    daemon_slot->store(daemon);
    SetTransport(daemon->transport(), /*notifies_arming=*/true);
#else
    StopArmedPath();
    KC_ALOG(kWarn, "built without the agent link; tracking only");
#endif
  });
}

}  // namespace kerncap::agent::cuda
