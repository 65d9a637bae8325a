#include "agent/hsa/hsa_agent.h"

#include <pthread.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "agent/core/capture_orchestrator.h"
#include "agent/core/log.h"
#include "agent/hsa/hsa_dispatch_source.h"
#include "agent/hsa/packets.h"
#ifdef KERNCAP_AGENT_HAVE_LINK
#include "agent/link/daemon_link.h"
#include "agent/link/launch_sampler.h"
#include "common/version.h"
#endif

namespace kerncap::agent::hsa {
namespace {

struct AgentScan {
  const CoreApiTable* core;
  std::vector<hsa_agent_t>* gpus;
};

hsa_status_t CollectGpu(hsa_agent_t agent, void* data) {
  auto* s = static_cast<AgentScan*>(data);
  hsa_device_type_t type;
  if (s->core->hsa_agent_get_info_fn(agent, HSA_AGENT_INFO_DEVICE, &type) == HSA_STATUS_SUCCESS &&
      type == HSA_DEVICE_TYPE_GPU) {
    s->gpus->push_back(agent);
  }
  return HSA_STATUS_SUCCESS;
}

struct PoolScan {
  std::map<uint64_t, int>* out;
  int device;
};

hsa_status_t CollectPool(hsa_amd_memory_pool_t pool, void* data) {
  auto* s = static_cast<PoolScan*>(data);
  (*s->out)[pool.handle] = s->device;
  return HSA_STATUS_SUCCESS;
}

struct AllAgents {
  std::vector<hsa_agent_t> list;
};

hsa_status_t CollectAny(hsa_agent_t agent, void* data) {
  static_cast<AllAgents*>(data)->list.push_back(agent);
  return HSA_STATUS_SUCCESS;
}

void AtForkChild() { HsaAgent::Instance().ForkChild(); }

// Abandons a container without reading or destroying it (a parent thread may
// have been modifying it at fork time; its elements may be the data of the
// parent's intercept handlers) and constructs an empty one in its place.
template <typename T>
void Abandon(T* object) {
  new (object) T();
}

}  // namespace

AgentConfig ConfigFromEnv() {
  AgentConfig c;
  static_cast<CommonAgentConfig&>(c) = CommonConfigFromEnv();
  c.wait_timeout_ms = EnvInt("KERNCAP_AGENT_WAIT_TIMEOUT_MS", c.wait_timeout_ms);
  return c;
}

HsaAgent& HsaAgent::Instance() {
  // Leaked on purpose: runtime threads may call wrappers during static
  // destruction of the application.
  static HsaAgent* agent = new HsaAgent();
  return *agent;
}

bool HsaAgent::Load(HsaApiTable* table, uint64_t runtime_version) {
  std::lock_guard lock(mu_);
  InitLogFromEnv();
  if (active_.load()) {
    KC_ALOG(kWarn, "OnLoad called twice; keeping the first installation");
    return true;
  }
  config_ = ConfigFromEnv();
  if (config_.disabled) {
    KC_ALOG(kInfo, "disabled by KERNCAP_AGENT_DISABLE");
    return true;  // loaded, passive
  }
  tables_ = SavedTables{};
  const char* why = "";
  if (!SaveTables(table, &tables_, &why)) {
    KC_ALOG(kWarn, "not intercepting: %s", why);
    return true;
  }
  runtime_version_ = runtime_version;
  runtime_info_ = false;
  static bool atfork_installed = false;  // under mu_
  if (!atfork_installed) {
    // No prepare handler: taking mu_ there could deadlock against a thread
    // that holds mu_ and waits for the link client's lock (which the link
    // client's own prepare handler takes). The child abandons state instead.
    atfork_installed = ::pthread_atfork(nullptr, nullptr, &AtForkChild) == 0;
  }
  kernels_ = std::make_unique<KernelRegistry>(&tables_);

  CoreApiTable* core = table->core_;
  AmdExtTable* amd = table->amd_ext_;
  core->hsa_queue_create_fn = &HsaAgent::QueueCreate;
  core->hsa_queue_destroy_fn = &HsaAgent::QueueDestroy;
  core->hsa_memory_allocate_fn = &HsaAgent::MemoryAllocate;
  core->hsa_memory_free_fn = &HsaAgent::MemoryFree;
  core->hsa_executable_destroy_fn = &HsaAgent::ExecutableDestroy;
  amd->hsa_amd_memory_pool_allocate_fn = &HsaAgent::PoolAllocate;
  amd->hsa_amd_memory_pool_free_fn = &HsaAgent::PoolFree;
  amd->hsa_amd_memory_lock_fn = &HsaAgent::MemoryLock;
  amd->hsa_amd_memory_unlock_fn = &HsaAgent::MemoryUnlock;
  amd->hsa_amd_ipc_memory_attach_fn = &HsaAgent::IpcAttach;
  amd->hsa_amd_ipc_memory_detach_fn = &HsaAgent::IpcDetach;
  if (TableHas(amd->version, offsetof(AmdExtTable, hsa_amd_memory_lock_to_pool_fn))) {
    amd->hsa_amd_memory_lock_to_pool_fn = &HsaAgent::MemoryLockToPool;
  }
  if (AmdExtTableRocm6Tail* tail = Rocm6Tail(amd); tail != nullptr && tables_.has_rocm6_vmem) {
    tail->hsa_amd_vmem_handle_create_fn = &HsaAgent::VmemHandleCreate;
    tail->hsa_amd_vmem_handle_release_fn = &HsaAgent::VmemHandleRelease;
    tail->hsa_amd_vmem_map_fn = &HsaAgent::VmemMap;
    tail->hsa_amd_vmem_unmap_fn = &HsaAgent::VmemUnmap;
    tail->hsa_amd_vmem_set_access_fn = &HsaAgent::VmemSetAccess;
    tail->hsa_amd_vmem_address_free_fn = &HsaAgent::VmemAddressFree;
  }
  // hsa_amd_queue_create (ROCm 10) is not hooked: its table slot and
  // descriptor layout are not in any header available to this build. Detect
  // a table larger than the layout we know and say so.
  unknown_amd_ext_entries_ = UnknownAmdExtEntries(amd);
  if (unknown_amd_ext_entries_ > 0) {
    KC_ALOG(kWarn,
            "the runtime's AmdExtTable has %zu entries beyond the ROCm 6.1 layout this agent "
            "knows (%u of %zu bytes); they are not hooked. On ROCm >= 10, HIP creates queues "
            "with hsa_amd_queue_create, which is among them: dispatches on such queues are NOT "
            "intercepted and cannot be captured",
            unknown_amd_ext_entries_, amd->version.minor_id, kAmdExtKnownSize);
  }
  active_.store(true, std::memory_order_release);
  KC_ALOG(kInfo, "HSA tool loaded (runtime version %llu, vmem %s)",
          static_cast<unsigned long long>(runtime_version),
          tables_.has_rocm6_vmem ? "tracked" : "absent");
  return true;
}

void HsaAgent::Unload() {
  StopLink();
  std::lock_guard lock(mu_);
  active_.store(false, std::memory_order_release);
  for (auto& [q, state] : queues_) {
    if (state->fence.handle != 0 && tables_.core.hsa_signal_destroy_fn != nullptr) {
      tables_.core.hsa_signal_destroy_fn(state->fence);
    }
  }
  queues_.clear();
  locked_.clear();
  pool_device_.clear();
  gpus_.clear();
  runtime_info_ = false;
  allocations_.Clear();
  if (kernels_) kernels_->Clear();
  {
    std::lock_guard vlock(vmem_mu_);
    vmem_handles_.clear();
  }
}

// --- fork ---------------------------------------------------------------------

void HsaAgent::ForkChild() {
  // Single-threaded here. The parent's queues and their intercept handler
  // data are abandoned (not freed: a stale handler call must not touch freed
  // memory); the runtime re-describes agents and pools at the child's first
  // queue creation.
  new (&mu_) std::mutex();
  new (&vmem_mu_) std::mutex();
  Abandon(&queues_);
  Abandon(&locked_);
  Abandon(&vmem_handles_);
  Abandon(&pool_device_);
  Abandon(&gpus_);
  runtime_info_ = false;
  tables_.has_loader = false;
  allocations_.ResetAfterFork();
  jit_metadata_.ResetAfterFork();
  if (kernels_) {
    (void)kernels_.release();  // its lock may have been held by a parent thread
    kernels_ = std::make_unique<KernelRegistry>(&tables_);
  }
  packets_.store(0);
  gating_.store(0);  // parent threads inside the gated path do not exist here
  // Fresh gate, zeroed counters; the transport resets itself.
  service_.ResetAfterFork(/*zero_counters=*/true);
}

AgentStats HsaAgent::stats() const {
  AgentStats s;
  s.tracked_allocations = allocations_.size();
  s.intercepted_queues = queues_.size();
  s.kernels_resolved = kernels_ ? kernels_->size() : 0;
  s.packets_forwarded = packets_.load();
  s.captures_committed = service_.captures_committed();
  s.captures_failed = service_.captures_failed();
  return s;
}

bool HsaAgent::WaitArms(size_t n, int timeout_ms) {
#ifdef KERNCAP_AGENT_HAVE_LINK
  auto* daemon = static_cast<DaemonLink*>(daemon_link_);
  return daemon != nullptr && daemon->client()->WaitArms(n, timeout_ms);
#else
  return false;
#endif
}

void HsaAgent::EnsureRuntimeInfo() {
  // Requires mu_. Runs at the first queue creation: by then the runtime is
  // fully initialized (OnLoad runs inside hsa_init).
  if (runtime_info_) return;
  runtime_info_ = true;
  const CoreApiTable& core = tables_.core;
  AgentScan scan{&core, &gpus_};
  core.hsa_iterate_agents_fn(CollectGpu, &scan);
  for (size_t i = 0; i < gpus_.size() && i < 64; ++i) {
    char name[64] = {0};
    core.hsa_agent_get_info_fn(gpus_[i], HSA_AGENT_INFO_NAME, name);
    gpu_names_[i] = name;
  }
  AllAgents all;
  core.hsa_iterate_agents_fn(CollectAny, &all);
  for (hsa_agent_t a : all.list) {
    PoolScan ps{&pool_device_, DeviceOfAgent(a)};
    if (tables_.amd.hsa_amd_agent_iterate_memory_pools_fn != nullptr) {
      tables_.amd.hsa_amd_agent_iterate_memory_pools_fn(a, CollectPool, &ps);
    }
  }
  if (core.hsa_system_get_major_extension_table_fn != nullptr &&
      core.hsa_system_get_major_extension_table_fn(HSA_EXTENSION_AMD_LOADER, 1,
                                                   sizeof(tables_.loader),
                                                   &tables_.loader) == HSA_STATUS_SUCCESS &&
      tables_.loader.hsa_ven_amd_loader_iterate_executables != nullptr) {
    tables_.has_loader = true;
  } else {
    KC_ALOG(kWarn, "loader extension 1.03 unavailable: kernels cannot be named or captured");
  }
  StartLink();
}

int HsaAgent::DeviceOfAgent(hsa_agent_t agent) const {
  for (size_t i = 0; i < gpus_.size(); ++i) {
    if (gpus_[i].handle == agent.handle) return static_cast<int>(i);
  }
  return kAnyDevice;
}

int HsaAgent::DeviceOfPool(hsa_amd_memory_pool_t pool) const {
  auto it = pool_device_.find(pool.handle);
  return it == pool_device_.end() ? kAnyDevice : it->second;
}

void HsaAgent::TrackPointer(void* ptr, size_t size, int device, AllocationKind kind) {
  if (ptr == nullptr || size == 0) return;
  Allocation a;
  a.va = reinterpret_cast<uint64_t>(ptr);
  a.size = size;
  a.kind = kind;
  a.device = device;
  allocations_.Insert(a);
}

// --- queues -----------------------------------------------------------------

hsa_status_t HsaAgent::QueueCreate(hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                                   void (*callback)(hsa_status_t, hsa_queue_t*, void*),
                                   void* data, uint32_t private_segment_size,
                                   uint32_t group_segment_size, hsa_queue_t** queue) {
  HsaAgent& a = Instance();
  const SavedTables& t = a.tables_;
  hsa_status_t s = t.amd.hsa_amd_queue_intercept_create_fn(
      agent, size, type, callback, data, private_segment_size, group_segment_size, queue);
  if (s != HSA_STATUS_SUCCESS) {
    // Fall back to a plain queue: the application must not notice the agent.
    KC_ALOG(kWarn, "intercept queue creation failed (%d); this queue is not intercepted", s);
    return t.core.hsa_queue_create_fn(agent, size, type, callback, data, private_segment_size,
                                      group_segment_size, queue);
  }
  std::lock_guard lock(a.mu_);
  a.EnsureRuntimeInfo();
  auto state = std::make_unique<QueueState>();
  state->queue = *queue;
  state->agent = agent;
  state->device = a.DeviceOfAgent(agent);
  if (state->device == kAnyDevice) state->device = 0;
  t.core.hsa_signal_create_fn(0, 0, nullptr, &state->fence);
  s = t.amd.hsa_amd_queue_intercept_register_fn(*queue, &HsaAgent::Intercept, state.get());
  if (s != HSA_STATUS_SUCCESS) {
    KC_ALOG(kWarn, "registering the intercept handler failed (%d)", s);
    if (state->fence.handle != 0) t.core.hsa_signal_destroy_fn(state->fence);
    return HSA_STATUS_SUCCESS;  // the queue works; packets pass unobserved
  }
  a.queues_[*queue] = std::move(state);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t HsaAgent::QueueDestroy(hsa_queue_t* queue) {
  HsaAgent& a = Instance();
  hsa_status_t s = a.tables_.core.hsa_queue_destroy_fn(queue);
  std::lock_guard lock(a.mu_);
  auto it = a.queues_.find(queue);
  if (it != a.queues_.end()) {
    if (it->second->fence.handle != 0) a.tables_.core.hsa_signal_destroy_fn(it->second->fence);
    a.queues_.erase(it);
  }
  return s;
}

void HsaAgent::Intercept(const void* packets, uint64_t count, uint64_t user_index, void* data,
                         hsa_amd_queue_intercept_packet_writer writer) {
  HsaAgent& a = Instance();
  a.packets_.fetch_add(count, std::memory_order_relaxed);
#ifdef KERNCAP_AGENT_HAVE_LINK
  // While kerncapctl kernels --sample counts (one relaxed load otherwise).
  if (a.sampling_.load(std::memory_order_relaxed)) {
    if (LaunchSampler* sampler = a.sampler_.load(std::memory_order_acquire)) {
      a.SamplePackets(static_cast<const uint8_t*>(packets), count, *sampler);
    }
  }
#endif
  CaptureTransport* t = a.service_.transport();
  // Fast path unless armed or another submission is in the gated path. The
  // order matters: a handler that consumes the last arm has already raised
  // gating_, so a thread that reads armed == false afterwards also sees
  // gating_ > 0 and waits at the gate instead of writing during a snapshot.
  if (t == nullptr || !a.active() ||
      (!t->Armed() && a.gating_.load(std::memory_order_seq_cst) == 0)) {
    writer(packets, count);
    return;
  }
  a.gating_.fetch_add(1, std::memory_order_seq_cst);
  a.HandleArmed(static_cast<QueueState*>(data), static_cast<const uint8_t*>(packets), count,
                writer, t);
  a.gating_.fetch_sub(1, std::memory_order_seq_cst);
}

void HsaAgent::WriteFence(QueueState* q, hsa_amd_queue_intercept_packet_writer writer) {
  if (q->fence.handle == 0) return;
  tables_.core.hsa_signal_add_screlease_fn(q->fence, 1);
  hsa_barrier_and_packet_t b = MakeBarrier(q->fence);
  writer(&b, 1);
}

std::vector<hsa_signal_t> HsaAgent::OtherFences(const QueueState* q) {
  std::lock_guard lock(mu_);
  std::vector<hsa_signal_t> out;
  for (auto& [queue, state] : queues_) {
    if (state.get() != q && state->fence.handle != 0) out.push_back(state->fence);
  }
  return out;
}

std::optional<uint64_t> HsaAgent::LaunchShapeOf(link::PerShape mode,
                                                const hsa_kernel_dispatch_packet_t& packet,
                                                const KernelRecord& kernel) {
  std::string blob;
  if (mode == link::PerShape::kScalars) {
    if (!kernel.kernarg_error.empty()) return std::nullopt;
    blob.assign(kernel.kernarg_size, '\0');
    if (kernel.kernarg_size > 0 &&
        tables_.core.hsa_memory_copy_fn(blob.data(), packet.kernarg_address, blob.size()) !=
            HSA_STATUS_SUCCESS) {
      return std::nullopt;
    }
  }
  return DispatchShapeKey(mode, LaunchOf(packet), blob, allocations_);
}

void HsaAgent::SamplePackets(const uint8_t* p, uint64_t count, LaunchSampler& sampler) {
#ifdef KERNCAP_AGENT_HAVE_LINK
  if (kernels_ == nullptr) return;
  for (uint64_t i = 0; i < count; ++i) {
    const uint8_t* pkt = p + i * kAqlPacketSize;
    if (!IsKernelDispatch(pkt)) continue;
    hsa_kernel_dispatch_packet_t dispatch;
    std::memcpy(&dispatch, pkt, sizeof(dispatch));
    std::shared_ptr<const KernelRecord> kernel = kernels_->Get(dispatch.kernel_object);
    sampler.Record(kernel->mangled_name, kernel->demangled_name,
                   ToSampledConfig(LaunchOf(dispatch)),
                   LaunchShapeOf(link::PerShape::kScalars, dispatch, *kernel));
  }
#else
  (void)p;
  (void)count;
  (void)sampler;
#endif
}

void HsaAgent::HandleArmed(QueueState* q, const uint8_t* p, uint64_t count,
                           hsa_amd_queue_intercept_packet_writer writer, CaptureTransport* t) {
  uint64_t done = 0;  // packets [0, done) are forwarded
  bool shared = false;
  auto flush = [&](uint64_t upto) {
    if (upto <= done) return;
    if (!shared) {
      service_.gate().EnterShared();
      shared = true;
    }
    writer(p + done * kAqlPacketSize, upto - done);
    done = upto;
  };
  try {
    for (uint64_t i = 0; i < count; ++i) {
      const uint8_t* pkt = p + i * kAqlPacketSize;
      if (!IsKernelDispatch(pkt)) continue;  // barriers, vendor packets: untouched
      hsa_kernel_dispatch_packet_t dispatch;
      std::memcpy(&dispatch, pkt, sizeof(dispatch));
      std::shared_ptr<const KernelRecord> kernel = kernels_->Get(dispatch.kernel_object);
      KernelMatchInfo selecting{kernel->mangled_name, kernel->demangled_name, q->device, {}};
      // Read only when a per-shape arm's pattern matches (one reference
      // captured: no allocation on this path).
      struct ShapeOfThisDispatch {
        HsaAgent* agent;
        const hsa_kernel_dispatch_packet_t* packet;
        const KernelRecord* kernel;
      } shape_of{this, &dispatch, kernel.get()};
      selecting.launch_shape = [&shape_of](link::PerShape mode) {
        return shape_of.agent->LaunchShapeOf(mode, *shape_of.packet, *shape_of.kernel);
      };
      std::optional<CaptureTicket> ticket = t->ShouldCapture(selecting);
      if (!ticket) continue;
      flush(i);
      if (shared) {
        WriteFence(q, writer);
        service_.gate().ExitShared();
        shared = false;
      }
      if (!CaptureDispatch(q, dispatch, kernel, *ticket, writer, t)) writer(pkt, 1);
      done = i + 1;
    }
    flush(count);
    if (shared) WriteFence(q, writer);
  } catch (...) {
    // Never lose the application's packets.
    if (done < count) writer(p + done * kAqlPacketSize, count - done);
    service_.CountFailure();
    KC_ALOG(kError, "internal error while intercepting; packets forwarded unobserved");
  }
  if (shared) service_.gate().ExitShared();
}

bool HsaAgent::CaptureDispatch(QueueState* q, const hsa_kernel_dispatch_packet_t& packet,
                               const std::shared_ptr<const KernelRecord>& kernel,
                               const CaptureTicket& ticket,
                               hsa_amd_queue_intercept_packet_writer writer, CaptureTransport* t) {
  // Skips that depend on the moment (other threads inside the gate) give the
  // capture back to the arm: a later matching dispatch is taken. Skips due to
  // the kernel itself do not (they would repeat).
  const KernelMatchInfo match_info{kernel->mangled_name, kernel->demangled_name, q->device, {}};
  auto skip = [&](const std::string& why, bool give_back = false) {
    service_.Skip(t, ticket, match_info, why, give_back);
  };
  if (!kernel->kernarg_error.empty()) {
    skip(kernel->kernarg_error);
    return false;
  }
  std::vector<hsa_signal_t> fences = OtherFences(q);
  if (!service_.gate().TryEnterExclusive(std::chrono::milliseconds(config_.gate_timeout_ms))) {
    skip("other threads kept submitting for longer than KERNCAP_AGENT_GATE_TIMEOUT_MS",
         /*give_back=*/true);
    return false;
  }
  const auto gate_taken = std::chrono::steady_clock::now();
  // The kernarg segment, hidden arguments included.
  std::string blob(kernel->kernarg_size, '\0');
  if (kernel->kernarg_size > 0 &&
      tables_.core.hsa_memory_copy_fn(blob.data(), packet.kernarg_address, blob.size()) !=
          HSA_STATUS_SUCCESS) {
    service_.gate().ExitExclusive();
    skip("the kernarg segment is not readable");
    return false;
  }

  CaptureHeader header;
  header.arm_id = ticket.arm_id;
  header.dispatch_index = ticket.dispatch_index;
  header.launch_shape = ticket.launch_shape;
  header.kernel.mangled_name = kernel->mangled_name;
  header.kernel.demangled_name = kernel->demangled_name;
  header.kernel.platform = Platform::kHsa;
  header.kernel.jit_metadata_json = jit_metadata_.Lookup(kernel->mangled_name);
  header.device.ordinal = q->device;
  header.device.name = q->device < 64 ? gpu_names_[q->device] : "";
  header.kernel.arch = kernel->arch.empty() ? header.device.name : kernel->arch;
  header.device.arch = header.kernel.arch;
  header.driver.runtime_version = "hsa-" + std::to_string(runtime_version_);
  header.driver.tool_version = std::string("kerncap-hsa-tool-") + ::kerncap::kVersion;
  header.launch = LaunchOf(packet);
  header.launch.stream = reinterpret_cast<uint64_t>(q->queue);
  header.launch.attributes["hsa.kernarg_segment_size"] = kernel->kernarg_size;
  header.launch.attributes["hsa.kernarg_address"] =
      static_cast<int64_t>(reinterpret_cast<uint64_t>(packet.kernarg_address));
  header.launch.attributes["hsa.kernel_object"] = static_cast<int64_t>(packet.kernel_object);
  if (kernel->metadata) {
    header.arguments = ArgumentsOf(*kernel->metadata);
    header.launch.attributes["hsa.wavefront_size"] = kernel->metadata->wavefront_size;
    header.launch.attributes["hsa.sgpr_count"] = kernel->metadata->sgpr_count;
    header.launch.attributes["hsa.vgpr_count"] = kernel->metadata->vgpr_count;
  }

  HsaDispatchTarget target;
  target.device = q->device;
  target.writer = writer;
  target.other_queue_fences = std::move(fences);
  target.kernel = kernel;
  target.host_regions = config_.host_regions;
  target.wait_timeout_ms = config_.wait_timeout_ms;
  auto source = std::make_unique<HsaDispatchSource>(&tables_, &allocations_, target);
  HsaDispatchSource* src = source.get();

  auto capture = service_.Begin(t, std::move(source), header, blob, gate_taken);
  if (!capture.ok()) {
    service_.gate().ExitExclusive();
    skip(capture.error());
    return false;
  }
  // The application's packet, unmodified, then our barrier to wait on.
  hsa_barrier_and_packet_t post = MakeBarrier(src->post_signal());
  writer(&packet, 1);
  writer(&post, 1);
  service_.End(t, std::move(capture.value()), /*launch_ok=*/true,
               [this] { service_.gate().ExitExclusive(); });
  return true;
}

// --- allocations ------------------------------------------------------------

hsa_status_t HsaAgent::PoolAllocate(hsa_amd_memory_pool_t pool, size_t size, uint32_t flags,
                                    void** ptr) {
  HsaAgent& a = Instance();
  hsa_status_t s = a.tables_.amd.hsa_amd_memory_pool_allocate_fn(pool, size, flags, ptr);
  if (s == HSA_STATUS_SUCCESS && ptr != nullptr) {
    int device;
    {
      std::lock_guard lock(a.mu_);
      a.EnsureRuntimeInfo();
      device = a.DeviceOfPool(pool);
    }
    a.TrackPointer(*ptr, size, device,
                   device == kAnyDevice ? AllocationKind::kHostPinned : AllocationKind::kDevice);
  }
  return s;
}

hsa_status_t HsaAgent::PoolFree(void* ptr) {
  HsaAgent& a = Instance();
  a.allocations_.Erase(reinterpret_cast<uint64_t>(ptr));
  return a.tables_.amd.hsa_amd_memory_pool_free_fn(ptr);
}

hsa_status_t HsaAgent::MemoryAllocate(hsa_region_t region, size_t size, void** ptr) {
  HsaAgent& a = Instance();
  hsa_status_t s = a.tables_.core.hsa_memory_allocate_fn(region, size, ptr);
  if (s == HSA_STATUS_SUCCESS && ptr != nullptr) {
    // Legacy regions: ask the runtime who owns the pointer.
    int device = kAnyDevice;
    hsa_amd_pointer_info_t info;
    std::memset(&info, 0, sizeof(info));
    info.size = sizeof(info);
    if (a.tables_.amd.hsa_amd_pointer_info_fn != nullptr &&
        a.tables_.amd.hsa_amd_pointer_info_fn(*ptr, &info, nullptr, nullptr, nullptr) ==
            HSA_STATUS_SUCCESS) {
      std::lock_guard lock(a.mu_);
      a.EnsureRuntimeInfo();
      device = a.DeviceOfAgent(info.agentOwner);
    }
    a.TrackPointer(*ptr, size, device,
                   device == kAnyDevice ? AllocationKind::kHostPinned : AllocationKind::kDevice);
  }
  return s;
}

hsa_status_t HsaAgent::MemoryFree(void* ptr) {
  HsaAgent& a = Instance();
  a.allocations_.Erase(reinterpret_cast<uint64_t>(ptr));
  return a.tables_.core.hsa_memory_free_fn(ptr);
}

hsa_status_t HsaAgent::MemoryLock(void* host_ptr, size_t size, hsa_agent_t* agents, int num_agent,
                                  void** agent_ptr) {
  HsaAgent& a = Instance();
  hsa_status_t s = a.tables_.amd.hsa_amd_memory_lock_fn(host_ptr, size, agents, num_agent, agent_ptr);
  if (s == HSA_STATUS_SUCCESS && agent_ptr != nullptr && *agent_ptr != nullptr) {
    a.TrackPointer(*agent_ptr, size, kAnyDevice, AllocationKind::kHostRegistered);
    std::lock_guard lock(a.mu_);
    a.locked_[reinterpret_cast<uint64_t>(host_ptr)] = {reinterpret_cast<uint64_t>(*agent_ptr), size};
  }
  return s;
}

hsa_status_t HsaAgent::MemoryLockToPool(void* host_ptr, size_t size, hsa_agent_t* agents,
                                        int num_agent, hsa_amd_memory_pool_t pool, uint32_t flags,
                                        void** agent_ptr) {
  HsaAgent& a = Instance();
  hsa_status_t s = a.tables_.amd.hsa_amd_memory_lock_to_pool_fn(host_ptr, size, agents, num_agent,
                                                                pool, flags, agent_ptr);
  if (s == HSA_STATUS_SUCCESS && agent_ptr != nullptr && *agent_ptr != nullptr) {
    a.TrackPointer(*agent_ptr, size, kAnyDevice, AllocationKind::kHostRegistered);
    std::lock_guard lock(a.mu_);
    a.locked_[reinterpret_cast<uint64_t>(host_ptr)] = {reinterpret_cast<uint64_t>(*agent_ptr), size};
  }
  return s;
}

hsa_status_t HsaAgent::MemoryUnlock(void* host_ptr) {
  HsaAgent& a = Instance();
  {
    std::lock_guard lock(a.mu_);
    auto it = a.locked_.find(reinterpret_cast<uint64_t>(host_ptr));
    if (it != a.locked_.end()) {
      a.allocations_.Erase(it->second.first);
      a.locked_.erase(it);
    }
  }
  return a.tables_.amd.hsa_amd_memory_unlock_fn(host_ptr);
}

hsa_status_t HsaAgent::IpcAttach(const hsa_amd_ipc_memory_t* handle, size_t len,
                                 uint32_t num_agents, const hsa_agent_t* mapping_agents,
                                 void** mapped_ptr) {
  HsaAgent& a = Instance();
  hsa_status_t s =
      a.tables_.amd.hsa_amd_ipc_memory_attach_fn(handle, len, num_agents, mapping_agents, mapped_ptr);
  if (s == HSA_STATUS_SUCCESS && mapped_ptr != nullptr) {
    int device = 0;
    if (num_agents > 0 && mapping_agents != nullptr) {
      std::lock_guard lock(a.mu_);
      a.EnsureRuntimeInfo();
      device = a.DeviceOfAgent(mapping_agents[0]);
    }
    a.TrackPointer(*mapped_ptr, len, device == kAnyDevice ? 0 : device, AllocationKind::kDevice);
  }
  return s;
}

hsa_status_t HsaAgent::IpcDetach(void* mapped_ptr) {
  HsaAgent& a = Instance();
  a.allocations_.Erase(reinterpret_cast<uint64_t>(mapped_ptr));
  return a.tables_.amd.hsa_amd_ipc_memory_detach_fn(mapped_ptr);
}

hsa_status_t HsaAgent::ExecutableDestroy(hsa_executable_t executable) {
  HsaAgent& a = Instance();
  if (a.kernels_) a.kernels_->ForgetExecutable(executable.handle);
  return a.tables_.core.hsa_executable_destroy_fn(executable);
}

// --- ROCm >= 6 virtual memory -------------------------------------------------

hsa_status_t HsaAgent::VmemHandleCreate(hsa_amd_memory_pool_t pool, size_t size, int type,
                                        uint64_t flags, VmemAllocHandle* handle) {
  HsaAgent& a = Instance();
  hsa_status_t s = a.tables_.rocm6.hsa_amd_vmem_handle_create_fn(pool, size, type, flags, handle);
  if (s == HSA_STATUS_SUCCESS && handle != nullptr) {
    int device;
    {
      std::lock_guard lock(a.mu_);
      a.EnsureRuntimeInfo();
      device = a.DeviceOfPool(pool);
    }
    std::lock_guard lock(a.vmem_mu_);
    a.vmem_handles_[handle->handle] = {size, device};
  }
  return s;
}

hsa_status_t HsaAgent::VmemHandleRelease(VmemAllocHandle handle) {
  HsaAgent& a = Instance();
  {
    std::lock_guard lock(a.vmem_mu_);
    a.vmem_handles_.erase(handle.handle);
  }
  return a.tables_.rocm6.hsa_amd_vmem_handle_release_fn(handle);
}

hsa_status_t HsaAgent::VmemMap(void* va, size_t size, size_t in_offset, VmemAllocHandle handle,
                               uint64_t flags) {
  HsaAgent& a = Instance();
  hsa_status_t s = a.tables_.rocm6.hsa_amd_vmem_map_fn(va, size, in_offset, handle, flags);
  if (s == HSA_STATUS_SUCCESS) {
    Allocation al;
    al.va = reinterpret_cast<uint64_t>(va);
    al.size = size;
    al.kind = AllocationKind::kVmmMapping;
    al.handle = handle.handle;
    al.access_mask = 0;  // no access until hsa_amd_vmem_set_access
    {
      std::lock_guard lock(a.vmem_mu_);
      auto it = a.vmem_handles_.find(handle.handle);
      al.device = it != a.vmem_handles_.end() && it->second.second != kAnyDevice ? it->second.second : 0;
    }
    a.allocations_.Insert(al);
  }
  return s;
}

hsa_status_t HsaAgent::VmemUnmap(void* va, size_t size) {
  HsaAgent& a = Instance();
  a.allocations_.EraseRange(reinterpret_cast<uint64_t>(va), size);
  return a.tables_.rocm6.hsa_amd_vmem_unmap_fn(va, size);
}

hsa_status_t HsaAgent::VmemSetAccess(void* va, size_t size, const VmemAccessDesc* desc,
                                     size_t desc_cnt) {
  HsaAgent& a = Instance();
  hsa_status_t s = a.tables_.rocm6.hsa_amd_vmem_set_access_fn(va, size, desc, desc_cnt);
  if (s == HSA_STATUS_SUCCESS) {
    uint64_t mask = 0;
    {
      std::lock_guard lock(a.mu_);
      a.EnsureRuntimeInfo();
      for (size_t i = 0; desc != nullptr && i < desc_cnt; ++i) {
        int d = a.DeviceOfAgent(desc[i].agent_handle);
        if (d != kAnyDevice && d < 64 && static_cast<int>(desc[i].permissions) != 0 /* NONE (ROCm 6) */) {
          mask |= 1ull << d;
        }
      }
    }
    if (mask != 0) a.allocations_.GrantAccess(reinterpret_cast<uint64_t>(va), size, mask);
  }
  return s;
}

hsa_status_t HsaAgent::VmemAddressFree(void* va, size_t size) {
  HsaAgent& a = Instance();
  a.allocations_.EraseRange(reinterpret_cast<uint64_t>(va), size);
  return a.tables_.rocm6.hsa_amd_vmem_address_free_fn(va, size);
}

// --- daemon link --------------------------------------------------------------

void HsaAgent::StartLink() {
  // Requires mu_ (called from EnsureRuntimeInfo).
  if (!config_.connect || service_.transport() != nullptr) return;
#ifdef KERNCAP_AGENT_HAVE_LINK
  link::HelloMsg identity;
  identity.platform = link::Platform::kHsa;
  identity.agent_version = ::kerncap::kVersion;
  for (size_t i = 0; i < gpus_.size() && i < 64; ++i) {
    link::DeviceInfo di;
    di.ordinal = static_cast<uint32_t>(i);
    di.name = gpu_names_[i];
    di.arch = gpu_names_[i];
    identity.devices.push_back(di);
  }
  identity.driver.runtime_version = "hsa-" + std::to_string(runtime_version_);
  identity.driver.tool_version = std::string("kerncap-hsa-tool-") + ::kerncap::kVersion;
  // Lazy ring, asynchronous end, exit flush, verdicts: as for every backend.
  // The ring needs no registration here (hsa_memory_copy reads into it).
  DaemonLinkHooks hooks;
  // The kernel census: the kernel symbols of every loaded executable.
  hooks.list_kernels = [this] {
    std::vector<link::LoadedKernelInfo> out;
    KernelRegistry* kernels = kernels_.get();
    if (kernels == nullptr) return out;
    char module[48];
    for (const KernelRegistry::LoadedKernel& k : kernels->LoadedKernels()) {
      link::LoadedKernelInfo info;
      info.mangled_name = k.mangled_name;
      info.demangled_name = Demangle(k.mangled_name);
      std::snprintf(module, sizeof(module), "hsa-executable-0x%llx",
                    static_cast<unsigned long long>(k.executable));
      info.module = module;
      out.push_back(std::move(info));
    }
    return out;
  };
  // Launch sampling: packets are intercepted always; the sampler's hold only
  // opens the check every submission makes.
  auto* sampler = new LaunchSampler(
      [this](bool on) { sampling_.store(on, std::memory_order_relaxed); });  // leaked with the link
  sampler_.store(sampler, std::memory_order_release);
  hooks.launch_sampler = sampler;
  daemon_link_ = DaemonLink::Start(&service_, std::move(identity), std::move(hooks));
#else
  KC_ALOG(kWarn, "built without the agent link; tracking only");
#endif
}

void HsaAgent::StopLink() {
#ifdef KERNCAP_AGENT_HAVE_LINK
  auto* daemon = static_cast<DaemonLink*>(daemon_link_);
  daemon_link_ = nullptr;
  if (daemon != nullptr) daemon->Stop();  // never destroyed (daemon_link.h)
#endif
  service_.SetTransport(nullptr);
}

}  // namespace kerncap::agent::hsa
