#include "reproducer/replay/hsa/hsa_replay.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/digest.h"
#include "common/hsa/code_object.h"
#include "common/hsa/hsa_tables.h"
#include "common/status_macros.h"
#include "reproducer/replay/core/restore_pipeline.h"

namespace kerncap::replay::hsa {
namespace {

using ::kerncap::hsa::AmdExtTableRocm6Tail;
using ::kerncap::hsa::VmemAccessDesc;
using ::kerncap::hsa::VmemAllocHandle;

constexpr uint64_t kPage = 4096;

struct PoolPick {
  const AmdExtTable* amd;
  bool gpu;
  hsa_amd_memory_pool_t* device;
  hsa_amd_memory_pool_t* kernarg;
};

hsa_status_t PickPool(hsa_amd_memory_pool_t pool, void* data) {
  auto* p = static_cast<PoolPick*>(data);
  hsa_amd_segment_t seg;
  uint32_t flags = 0;
  bool alloc = false;
  if (p->amd->hsa_amd_memory_pool_get_info_fn(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg) !=
          HSA_STATUS_SUCCESS ||
      seg != HSA_AMD_SEGMENT_GLOBAL) {
    return HSA_STATUS_SUCCESS;
  }
  p->amd->hsa_amd_memory_pool_get_info_fn(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
  p->amd->hsa_amd_memory_pool_get_info_fn(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
                                          &alloc);
  if (!alloc) return HSA_STATUS_SUCCESS;
  if (p->gpu && p->device->handle == 0) *p->device = pool;
  if (!p->gpu && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT) && p->kernarg->handle == 0) {
    *p->kernarg = pool;
  }
  return HSA_STATUS_SUCCESS;
}

struct AgentList {
  const CoreApiTable* core;
  std::vector<std::pair<hsa_agent_t, bool>> list;  // (agent, is_gpu)
};

hsa_status_t CollectAgents(hsa_agent_t a, void* data) {
  auto* l = static_cast<AgentList*>(data);
  hsa_device_type_t t;
  if (l->core->hsa_agent_get_info_fn(a, HSA_AGENT_INFO_DEVICE, &t) == HSA_STATUS_SUCCESS) {
    l->list.push_back({a, t == HSA_DEVICE_TYPE_GPU});
  }
  return HSA_STATUS_SUCCESS;
}

// A page-aligned range restored with vmem, covering one or more regions.
struct Mapping {
  uint64_t base = 0, size = 0;
  VmemAllocHandle handle{0};
  bool reserved = false, mapped = false;
};

bool Wait(const CoreApiTable* core, hsa_signal_t s, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (core->hsa_signal_wait_scacquire_fn(s, HSA_SIGNAL_CONDITION_EQ, 0, 1000000,
                                            HSA_WAIT_STATE_BLOCKED) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
  return true;
}

// The device side of the restore pipeline. hsa_memory_copy is synchronous,
// so a slot is free again as soon as its copies returned.
class HsaCopier : public RestoreCopier {
 public:
  explicit HsaCopier(const CoreApiTable* core) : core_(core) {}
  absl::Status CopyAsync(int, uint64_t dst, const void* src, size_t size) override {
    if (core_->hsa_memory_copy_fn(reinterpret_cast<void*>(dst), src, size) != HSA_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrFormat("hsa_memory_copy to 0x%x (%u bytes) failed", dst,
                                                 size));
    }
    return absl::OkStatus();
  }
  absl::Status SlotSubmitted(int) override { return absl::OkStatus(); }
  absl::Status WaitSlot(int) override { return absl::OkStatus(); }
  absl::Status ZeroAsync(uint64_t dst, size_t size) override {
    static const std::string kZeros(1u << 20, '\0');
    for (size_t off = 0; off < size; off += kZeros.size()) {
      KC_RETURN_IF_ERROR(CopyAsync(0, dst + off, kZeros.data(),
                                   std::min(kZeros.size(), size - off)));
    }
    return absl::OkStatus();
  }
  absl::Status Drain() override { return absl::OkStatus(); }

 private:
  const CoreApiTable* core_;
};

}  // namespace

std::string InMemoryChunks::Add(const std::string& bytes) {
  if (bytes.find_first_not_of('\0') == std::string::npos) return "";
  std::string d = Sha256(bytes).ToBytes();
  chunks_.emplace(d, bytes);
  return d;
}

ReplayRegion InMemoryChunks::Region(uint64_t va, const std::string& pre, const std::string* post,
                                    bool module_variable, std::string name) {
  ReplayRegion r;
  r.va = va;
  r.size = pre.size();
  r.module_variable = module_variable;
  r.name = std::move(name);
  r.validated = post != nullptr;
  for (size_t off = 0; off < pre.size(); off += chunk_size_) {
    RegionChunk c;
    c.size = static_cast<uint32_t>(std::min<size_t>(chunk_size_, pre.size() - off));
    c.pre_digest = Add(pre.substr(off, c.size));
    if (post != nullptr) c.post_digest = Add(post->substr(off, c.size));
    r.chunks.push_back(std::move(c));
  }
  return r;
}

HsaChunkReader InMemoryChunks::reader() const {
  return [this](const std::string& digest, uint32_t size, char* out) -> absl::Status {
    auto it = chunks_.find(digest);
    if (it == chunks_.end() || it->second.size() != size) {
      return absl::NotFoundError("chunk not held in memory");
    }
    std::memcpy(out, it->second.data(), size);
    return absl::OkStatus();
  };
}

absl::StatusOr<std::string> RegionBytes(const HsaReplayInput& in, const ReplayRegion& r,
                                        bool post) {
  std::string out;
  out.reserve(r.size);
  for (const RegionChunk& c : r.chunks) {
    const std::string& d = post ? c.post_digest : c.pre_digest;
    std::string bytes(c.size, '\0');
    if (!d.empty()) KC_RETURN_IF_ERROR(in.read(d, c.size, bytes.data()));
    out += bytes;
  }
  return out;
}

absl::StatusOr<HsaReplayReport> ReplayDispatch(HsaApiTable* table, const HsaReplayInput& in,
                                               const HsaReplayOptions& opt) {
  const CoreApiTable* core = table->core_;
  const AmdExtTable* amd = table->amd_ext_;
  AmdExtTableRocm6Tail* vmem = ::kerncap::hsa::Rocm6Tail(table->amd_ext_);
  if (vmem == nullptr || vmem->hsa_amd_vmem_address_reserve_fn == nullptr) {
    return absl::FailedPreconditionError(
        "the HSA runtime has no hsa_amd_vmem_* API (ROCm >= 6 is required to restore memory at "
        "its original addresses)");
  }
  HsaReplayReport report;

  // Agents and pools.
  AgentList agents{core, {}};
  core->hsa_iterate_agents_fn(CollectAgents, &agents);
  hsa_agent_t gpu{0};
  hsa_amd_memory_pool_t device_pool{0}, kernarg_pool{0};
  for (auto& [a, is_gpu] : agents.list) {
    if (is_gpu && gpu.handle == 0) gpu = a;
    PoolPick pick{amd, is_gpu, &device_pool, &kernarg_pool};
    if (is_gpu && a.handle != gpu.handle) continue;
    amd->hsa_amd_agent_iterate_memory_pools_fn(a, PickPool, &pick);
  }
  if (gpu.handle == 0 || device_pool.handle == 0 || kernarg_pool.handle == 0) {
    return absl::FailedPreconditionError("no GPU agent with a device pool and a kernarg pool");
  }

  // 1. Restore memory at the original addresses (before anything else can
  //    take them): group regions by overlapping pages.
  std::vector<const ReplayRegion*> by_va;
  for (const ReplayRegion& r : in.regions) {
    if (!r.module_variable && r.size > 0) by_va.push_back(&r);
  }
  std::sort(by_va.begin(), by_va.end(), [](auto* a, auto* b) { return a->va < b->va; });
  std::vector<Mapping> maps;
  for (const ReplayRegion* r : by_va) {
    uint64_t b = r->va / kPage * kPage;
    uint64_t e = (r->va + r->size + kPage - 1) / kPage * kPage;
    if (!maps.empty() && b <= maps.back().base + maps.back().size) {
      maps.back().size = std::max(maps.back().size, e - maps.back().base);
    } else {
      maps.push_back(Mapping{b, e - b});
    }
  }
  auto unmap_all = [&] {
    for (Mapping& m : maps) {
      if (m.mapped) vmem->hsa_amd_vmem_unmap_fn(reinterpret_cast<void*>(m.base), m.size);
      if (m.handle.handle != 0) vmem->hsa_amd_vmem_handle_release_fn(m.handle);
      if (m.reserved) vmem->hsa_amd_vmem_address_free_fn(reinterpret_cast<void*>(m.base), m.size);
    }
  };
  absl::Cleanup cleanup_maps = unmap_all;
  for (Mapping& m : maps) {
    void* va = nullptr;
    if (vmem->hsa_amd_vmem_address_reserve_fn(&va, m.size, m.base, 0) != HSA_STATUS_SUCCESS) {
      return absl::ResourceExhaustedError(absl::StrFormat("reserving 0x%x+%u failed", m.base, m.size));
    }
    if (reinterpret_cast<uint64_t>(va) != m.base) {
      vmem->hsa_amd_vmem_address_free_fn(va, m.size);
      return absl::FailedPreconditionError(absl::StrFormat(
          "relocation detected: 0x%x was not available (got %p); restore at the original "
          "address is required", m.base, va));
    }
    m.reserved = true;
    if (vmem->hsa_amd_vmem_handle_create_fn(device_pool, m.size, ::kerncap::hsa::kVmemMemoryTypeNone, 0,
                                            &m.handle) != HSA_STATUS_SUCCESS ||
        vmem->hsa_amd_vmem_map_fn(va, m.size, 0, m.handle, 0) != HSA_STATUS_SUCCESS) {
      return absl::ResourceExhaustedError("vmem handle create/map failed");
    }
    m.mapped = true;
    VmemAccessDesc desc[2] = {{HSA_ACCESS_PERMISSION_RW, gpu}};
    size_t n = 1;
    for (auto& [a, is_gpu] : agents.list) {
      if (!is_gpu) {
        desc[1] = {HSA_ACCESS_PERMISSION_RW, a};
        n = 2;
        break;
      }
    }
    vmem->hsa_amd_vmem_set_access_fn(va, m.size, desc, n);
  }

  // 2. Code object and kernel.
  auto md = ::kerncap::hsa::ParseCodeObjectMetadata(in.code_object);
  if (!md.ok()) return absl::InvalidArgumentError("code object metadata: " + md.error());
  const ::kerncap::hsa::KernelMetadata* kmd = md->FindKernel(in.kernel);
  hsa_code_object_reader_t reader;
  if (core->hsa_code_object_reader_create_from_memory_fn(in.code_object.data(), in.code_object.size(),
                                                         &reader) != HSA_STATUS_SUCCESS) {
    return absl::InvalidArgumentError("the runtime rejected the code object");
  }
  absl::Cleanup cleanup_reader = [&] { core->hsa_code_object_reader_destroy_fn(reader); };
  hsa_executable_t exe{0};
  core->hsa_executable_create_alt_fn(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                                     nullptr, &exe);
  absl::Cleanup cleanup_exe = [&] { core->hsa_executable_destroy_fn(exe); };
  if (core->hsa_executable_load_agent_code_object_fn(exe, gpu, reader, nullptr, nullptr) !=
          HSA_STATUS_SUCCESS ||
      core->hsa_executable_freeze_fn(exe, nullptr) != HSA_STATUS_SUCCESS) {
    return absl::InvalidArgumentError("loading the code object failed");
  }
  hsa_executable_symbol_t sym;
  // No fallback to "the first kernel": a wrong kernel would validate nothing.
  if (core->hsa_executable_get_symbol_by_name_fn(exe, (in.kernel + ".kd").c_str(), &gpu, &sym) !=
      HSA_STATUS_SUCCESS) {
    return absl::NotFoundError("kernel " + in.kernel + " is not in the code object");
  }
  uint64_t kernel_object = 0;
  core->hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
                                          &kernel_object);

  // Module variables by name (their addresses are the new load's).
  std::map<const ReplayRegion*, uint64_t> var_addr;
  for (const ReplayRegion& r : in.regions) {
    if (!r.module_variable) continue;
    hsa_executable_symbol_t vs;
    if (core->hsa_executable_get_symbol_by_name_fn(exe, r.name.c_str(), &gpu, &vs) !=
        HSA_STATUS_SUCCESS) {
      report.warnings.push_back("module variable " + r.name + " not found; not restored");
      continue;
    }
    uint64_t addr = 0;
    uint32_t size = 0;
    core->hsa_executable_symbol_get_info_fn(vs, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &addr);
    core->hsa_executable_symbol_get_info_fn(vs, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, &size);
    if (size != r.size) {
      report.warnings.push_back(absl::StrCat("module variable ", r.name, " changed size"));
    }
    var_addr[&r] = addr;
  }
  // The restore: every chunk of every region (at its address) and module
  // variable (at the new load's address), through the restore pipeline.
  std::vector<RestoreTask> tasks;
  auto add_tasks = [&](const ReplayRegion& r, uint64_t base) {
    uint64_t off = 0;
    for (const RegionChunk& c : r.chunks) {
      RestoreTask t;
      t.digest = &c.pre_digest;
      t.size = c.size;
      t.dst = base + off;
      t.src_va = r.va + off;
      tasks.push_back(t);
      off += c.size;
    }
  };
  for (const ReplayRegion* r : by_va) add_tasks(*r, r->va);
  for (auto& [r, addr] : var_addr) add_tasks(*r, addr);
  RestorePipelineOptions popt;
  popt.workers = opt.restore_workers;
  std::vector<char> staging(RestoreStagingBytes(tasks, popt));
  report.staging_bytes = staging.size();
  HsaCopier copier(core);
  const ChunkReader read_task = [&in](const RestoreTask& t, char* out) {
    return in.read(*t.digest, t.size, out);
  };
  auto restore = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(RestorePipelineStats st,
                        RunRestorePipeline(tasks, read_task, nullptr, &copier, staging.data(),
                                           popt));
    report.restored_bytes = st.bytes;
    return absl::OkStatus();
  };

  // 3. Queue, kernarg segment with hidden arguments patched.
  hsa_queue_t* queue = nullptr;
  if (core->hsa_queue_create_fn(gpu, 64, HSA_QUEUE_TYPE_MULTI, nullptr, nullptr, UINT32_MAX,
                                UINT32_MAX, &queue) != HSA_STATUS_SUCCESS) {
    return absl::InternalError("hsa_queue_create failed");
  }
  absl::Cleanup cleanup_queue = [&] { core->hsa_queue_destroy_fn(queue); };
  amd->hsa_amd_profiling_set_profiler_enabled_fn(queue, 1);
  std::string kernarg = in.kernarg;
  // Which value kinds to patch: the capture's, else the code object's.
  std::vector<ReplayArgument> args;
  for (const ReplayArgument& a : in.arguments) {
    if (!a.value_kind.empty()) args.push_back(a);
  }
  if (!args.empty()) {
    report.hidden_args_from = "capture";
  } else if (kmd != nullptr) {
    for (const ::kerncap::hsa::KernelArg& a : kmd->args) args.push_back({a.offset, a.size, a.value_kind});
    report.hidden_args_from = "code_object";
  } else {
    report.warnings.push_back(
        "no argument value kinds in the capture and no metadata for the kernel: hidden "
        "arguments not patched");
  }
  for (const ReplayArgument& a : args) {
    if (a.value_kind.rfind("hidden_", 0) != 0) continue;
    if (a.size == 0 || static_cast<uint64_t>(a.offset) + a.size > kernarg.size()) {
      report.warnings.push_back(absl::StrCat(a.value_kind, "@", a.offset,
                                             " lies outside the captured kernarg segment"));
      continue;
    }
    uint64_t v;
    if (a.value_kind == "hidden_queue_ptr") {
      v = reinterpret_cast<uint64_t>(queue);
    } else if (a.value_kind == "hidden_hostcall_buffer" || a.value_kind == "hidden_printf_buffer" ||
               a.value_kind == "hidden_heap_v1" || a.value_kind == "hidden_default_queue" ||
               a.value_kind == "hidden_completion_action" ||
               a.value_kind == "hidden_multigrid_sync_arg") {
      v = 0;
    } else {
      continue;  // launch geometry and offsets: kept as captured
    }
    std::memcpy(kernarg.data() + a.offset, &v, std::min<size_t>(a.size, 8));
    report.patched_hidden_args.push_back(absl::StrCat(a.value_kind, "@", a.offset));
  }
  void* kernarg_buf = nullptr;
  if (amd->hsa_amd_memory_pool_allocate_fn(kernarg_pool, std::max<size_t>(kernarg.size(), 16), 0,
                                           &kernarg_buf) != HSA_STATUS_SUCCESS) {
    return absl::ResourceExhaustedError("kernarg allocation failed");
  }
  absl::Cleanup cleanup_kernarg = [&] { amd->hsa_amd_memory_pool_free_fn(kernarg_buf); };
  core->hsa_memory_copy_fn(kernarg_buf, kernarg.data(), kernarg.size());

  hsa_signal_t done;
  core->hsa_signal_create_fn(1, 0, nullptr, &done);
  absl::Cleanup cleanup_signal = [&] { core->hsa_signal_destroy_fn(done); };
  auto dispatch = [&]() -> absl::StatusOr<uint64_t> {
    core->hsa_signal_store_screlease_fn(done, 1);
    uint64_t idx = core->hsa_queue_add_write_index_scacq_screl_fn(queue, 1);
    auto* p = reinterpret_cast<hsa_kernel_dispatch_packet_t*>(
        static_cast<uint8_t*>(queue->base_address) + (idx % queue->size) * 64);
    std::memset(reinterpret_cast<uint8_t*>(p) + 2, 0, 62);
    p->setup = 3 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
    p->workgroup_size_x = in.workgroup[0];
    p->workgroup_size_y = in.workgroup[1];
    p->workgroup_size_z = in.workgroup[2];
    p->grid_size_x = in.grid[0];
    p->grid_size_y = in.grid[1];
    p->grid_size_z = in.grid[2];
    p->group_segment_size = in.group_segment_size;
    p->private_segment_size = in.private_segment_size;
    p->kernel_object = kernel_object;
    p->kernarg_address = kernarg_buf;
    p->completion_signal = done;
    uint16_t header = static_cast<uint16_t>(
        (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) | (1 << HSA_PACKET_HEADER_BARRIER) |
        (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
        (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
    __atomic_store_n(reinterpret_cast<uint16_t*>(p), header, __ATOMIC_RELEASE);
    core->hsa_signal_store_screlease_fn(queue->doorbell_signal, static_cast<hsa_signal_value_t>(idx));
    if (!Wait(core, done, opt.timeout_ms)) return absl::DeadlineExceededError("dispatch timed out");
    hsa_amd_profiling_dispatch_time_t t{};
    amd->hsa_amd_profiling_get_dispatch_time_fn(gpu, done, &t);
    return t.end - t.start;
  };

  // 4. Validate: one dispatch from the captured pre-state, compared chunk
  //    by chunk with the post image.
  KC_RETURN_IF_ERROR(restore());
  auto first = dispatch();
  if (!first.ok()) return first.status();
  report.first_ns = *first;
  report.valid = true;
  std::string now, expected;
  for (size_t ri = 0; ri < in.regions.size(); ++ri) {
    const ReplayRegion& r = in.regions[ri];
    if (!r.validated) continue;
    uint64_t addr = r.va;
    if (r.module_variable) {
      auto it = var_addr.find(&r);
      if (it == var_addr.end()) continue;
      addr = it->second;
    }
    RegionResult rr;
    rr.va = r.va;
    rr.replay_va = addr;
    rr.name = r.name;
    rr.size = r.size;
    uint64_t off = 0;
    for (const RegionChunk& c : r.chunks) {
      now.assign(c.size, '\0');
      expected.assign(c.size, '\0');
      core->hsa_memory_copy_fn(now.data(), reinterpret_cast<const void*>(addr + off), c.size);
      if (!c.post_digest.empty()) KC_RETURN_IF_ERROR(in.read(c.post_digest, c.size, expected.data()));
      for (size_t i = 0; i < c.size; ++i) {
        if (now[i] != expected[i]) {
          if (rr.first_mismatch < 0) rr.first_mismatch = static_cast<int64_t>(off + i);
          ++rr.mismatched_bytes;
        }
      }
      if (opt.on_compare) opt.on_compare(ri, off, expected.data(), now.data(), c.size);
      off += c.size;
    }
    if (rr.mismatched_bytes > 0) report.valid = false;
    report.regions.push_back(std::move(rr));
  }

  // 5. Bench: warm-up, then timed iterations (device timestamps).
  for (int i = 0; i < opt.warmup + opt.iterations; ++i) {
    if (opt.restore_each_iteration) KC_RETURN_IF_ERROR(restore());
    auto t = dispatch();
    if (!t.ok()) return t.status();
    if (i >= opt.warmup) report.times_ns.push_back(*t);
  }
  if (!report.times_ns.empty()) {
    std::vector<uint64_t> s = report.times_ns;
    std::sort(s.begin(), s.end());
    report.median_ns = s[s.size() / 2];
  }
  return report;
}

}  // namespace kerncap::replay::hsa
