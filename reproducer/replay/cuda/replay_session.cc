#include "reproducer/replay/cuda/replay_session.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "reproducer/replay/cuda/l2_control.h"
#include "reproducer/replay/core/pointer_scan.h"
#include "reproducer/replay/core/restore_pipeline.h"

namespace kerncap::replay {
namespace {

bool IsDeviceKind(v1::RegionKind k) {
  return k == v1::REGION_DEVICE || k == v1::REGION_DEVICE_VMM || k == v1::REGION_MANAGED ||
         k == v1::REGION_KIND_UNSPECIFIED;
}
bool IsGlobalKind(v1::RegionKind k) {
  return k == v1::REGION_MODULE_GLOBAL || k == v1::REGION_CONSTANT;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The restore pipeline's device side: one stream, one event per staging slot.
class CudaCopier : public RestoreCopier {
 public:
  CudaCopier(const CudaDriver& cu, CUcontext ctx) : cu_(cu), ctx_(ctx) {}
  ~CudaCopier() override {
    for (CUevent e : events_) cu_.cuEventDestroy(e);
    if (stream_) cu_.cuStreamDestroy(stream_);
  }
  absl::Status Init(int slots) {
    KC_RETURN_IF_ERROR(
        cu_.Check(cu_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    events_.assign(static_cast<size_t>(slots), nullptr);
    for (CUevent& e : events_) {
      KC_RETURN_IF_ERROR(
          cu_.Check(cu_.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
    }
    return absl::OkStatus();
  }
  absl::Status BindThread() override {
    return cu_.Check(cu_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent (restore worker)");
  }
  absl::Status CopyAsync(int, uint64_t dst, const void* src, size_t size) override {
    return cu_.Check(cu_.cuMemcpyHtoDAsync(dst, src, size, stream_),
                     absl::StrFormat("cuMemcpyHtoDAsync(0x%x, %u)", dst, size));
  }
  absl::Status SlotSubmitted(int slot) override {
    return cu_.Check(cu_.cuEventRecord(events_[static_cast<size_t>(slot)], stream_),
                     "cuEventRecord");
  }
  absl::Status WaitSlot(int slot) override {
    return cu_.Check(cu_.cuEventSynchronize(events_[static_cast<size_t>(slot)]),
                     "cuEventSynchronize (restore slot)");
  }
  absl::Status ZeroAsync(uint64_t dst, size_t size) override {
    return cu_.Check(cu_.cuMemsetD8Async(dst, 0, size, stream_),
                     absl::StrFormat("cuMemsetD8Async(0x%x, %u)", dst, size));
  }
  absl::Status Drain() override {
    return cu_.Check(cu_.cuStreamSynchronize(stream_), "cuStreamSynchronize (restore)");
  }

 private:
  const CudaDriver& cu_;
  CUcontext ctx_;
  CUstream stream_ = nullptr;
  std::vector<CUevent> events_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReplaySession>> ReplaySession::Create(
    const CaptureSource* source, const SessionOptions& options) {
  KC_ASSIGN_OR_RETURN(const CudaDriver* drv, CudaDriver::Get());
  const v1::CaptureManifest& m = source->manifest();
  if (m.kernel().platform() != v1::PLATFORM_CUDA &&
      m.kernel().platform() != v1::PLATFORM_UNSPECIFIED) {
    return absl::FailedPreconditionError(
        absl::StrCat("capture ", m.capture_id(), " is not a CUDA capture (platform ",
                     v1::Platform_Name(m.kernel().platform()), ")"));
  }
  if (m.code_objects_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("capture ", m.capture_id(), " has no code object: cannot launch"));
  }
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    KC_RETURN_IF_ERROR(CheckRegion(m.pre().regions(i), absl::StrCat("pre[", i, "]")));
  }
  for (int i = 0; i < m.post().regions_size(); ++i) {
    KC_RETURN_IF_ERROR(CheckRegion(m.post().regions(i), absl::StrCat("post[", i, "]")));
  }
  // Before any GPU work: an object that cannot be recreated fails the replay.
  KC_RETURN_IF_ERROR(TextureObjects::Check(m));
  std::unique_ptr<ReplaySession> s(new ReplaySession(source, drv, options));
  s->info_.capture_id = m.capture_id();
  s->info_.kernel = m.kernel().demangled_name().empty() ? m.kernel().mangled_name()
                                                        : m.kernel().demangled_name();
  s->placements_.resize(static_cast<size_t>(m.pre().regions_size()));
  s->captured_launch_ = CapturedLaunch(m.launch());
  s->launch_ = s->captured_launch_;
  KC_RETURN_IF_ERROR(s->SetLaunchOverride(options.launch));
  return s;
}

ReplaySession::~ReplaySession() {
  CancelMapping();  // before anything it maps is released
  if (ctx_ != nullptr) {
    cu_.cuCtxSetCurrent(ctx_);
    cu_.cuCtxSynchronize();
    expectation_.reset();
    textures_.Destroy();
    if (start_) cu_.cuEventDestroy(start_);
    if (stop_) cu_.cuEventDestroy(stop_);
    if (stream_) cu_.cuStreamDestroy(stream_);
    if (code_ != nullptr) Unload(code_.get());
    if (original_ != nullptr) Unload(original_.get());
  }
  for (auto& [va, size] : mapped_) cu_.cuMemUnmap(va, size);
  for (CUmemGenericAllocationHandle h : handles_) cu_.cuMemRelease(h);
  for (auto& [va, size] : reservations_) cu_.cuMemAddressFree(va, size);
  for (auto& [p, size] : host_mmaps_) {
    cu_.cuMemHostUnregister(p);
    ::munmap(p, size);
  }
  for (void* p : host_allocs_) cu_.cuMemFreeHost(p);
  if (ctx_ != nullptr) cu_.cuDevicePrimaryCtxRelease(device_);
}

void ReplaySession::Warn(const std::string& w) {
  std::fprintf(stderr, "kerncap-replay: warning: %s\n", w.c_str());
  info_.warnings.push_back(w);
}

absl::Status ReplaySession::InitDevice() {
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuInit(0), "cuInit"));
  int count = 0;
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0) return absl::FailedPreconditionError("no CUDA device");
  int ordinal = options_.device >= 0 ? options_.device
                                     : static_cast<int>(src_->manifest().device().ordinal());
  if (ordinal >= count) {
    if (options_.device >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--device ", ordinal, ": only ", count,
                                                     " device(s)"));
    }
    Warn(absl::StrCat("captured on device ", ordinal, " but only ", count,
                      " device(s) here; using device 0"));
    ordinal = 0;
  }
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuDeviceGet(&device_, ordinal), "cuDeviceGet"));
  char name[256] = {};
  cu_.cuDeviceGetName(name, sizeof(name), device_);
  int major = 0, minor = 0;
  cu_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_);
  cu_.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_);
  const std::string arch = absl::StrCat("sm_", major, minor);
  info_.device = absl::StrCat(ordinal, ": ", name, " (", arch, ")");
  const std::string& captured_arch = src_->manifest().device().arch();
  if (!captured_arch.empty() && captured_arch != arch) {
    Warn(absl::StrCat("captured on ", captured_arch, ", replaying on ", arch,
                      ": the cubin may not load"));
  }
  return absl::OkStatus();
}

absl::Status ReplaySession::ReserveRanges() {
  const v1::CaptureManifest& m = src_->manifest();
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device_;
  size_t gran = 0;
  KC_RETURN_IF_ERROR(cu_.Check(
      cu_.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
      "cuMemGetAllocationGranularity"));
  PlanOptions plan = options_.plan;
  plan.granularity = std::max<uint64_t>(gran, 4096);

  std::vector<PlanInput> inputs;
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    const v1::Region& r = m.pre().regions(i);
    if (IsDeviceKind(r.kind()) && r.data().size() > 0) {
      inputs.push_back(PlanInput{r.va(), r.data().size(), static_cast<size_t>(i)});
    } else if (r.kind() == v1::REGION_KERNARG) {
      Warn(absl::StrFormat("region %d (kernarg at 0x%x) is not restored: the argument blob is "
                           "passed directly", i, r.va()));
    }
  }
  KC_ASSIGN_OR_RETURN(std::vector<Reservation> reservations, PlanReservations(inputs, plan));

  // Reserve everything first, before the context and any other allocation.
  // Measured on H200/580 (first GPU run of these tests): with alignment 0 the
  // driver rounds a hint up to a 32 MiB boundary (0x7f8a64800000 came back as
  // 0x7f8a66000000), so first ask for a range that starts at a 32 MiB
  // boundary at or below the wanted base, with an explicit alignment, and
  // only then for the exact base.
  constexpr uint64_t kHintAlign = 32ull << 20;
  std::vector<CUdeviceptr> bases;  // where each planned reservation's va landed
  uint64_t prev_end = 0;
  for (const Reservation& res : reservations) {
    CUdeviceptr got = 0;
    auto reserve = [&](uint64_t base, uint64_t size) -> absl::Status {
      got = 0;
      return cu_.Check(cu_.cuMemAddressReserve(&got, size, plan.granularity, base, 0),
                       absl::StrFormat("cuMemAddressReserve(%u bytes at 0x%x)", size, base));
    };
    if (options_.force_relocation) {
      KC_RETURN_IF_ERROR(reserve(0, res.size));
      reservations_.emplace_back(got, res.size);
      bases.push_back(got);
      std::fprintf(stderr, "kerncap-replay: RELOCATING: range 0x%llx+%llu forced to 0x%llx\n",
                   static_cast<unsigned long long>(res.va),
                   static_cast<unsigned long long>(res.size), static_cast<unsigned long long>(got));
      continue;
    }
    const uint64_t aligned = res.va & ~(kHintAlign - 1);
    if (aligned != res.va && aligned >= prev_end) {
      const uint64_t size = res.va + res.size - aligned;
      KC_RETURN_IF_ERROR(reserve(aligned, size));
      if (got == aligned) {
        reservations_.emplace_back(got, size);
        bases.push_back(res.va);
        prev_end = aligned + size;
        continue;
      }
      cu_.cuMemAddressFree(got, size);
    }
    KC_RETURN_IF_ERROR(reserve(res.va, res.size));
    reservations_.emplace_back(got, res.size);
    bases.push_back(got);
    prev_end = res.va + res.size;
    if (got != res.va) {
      if (!options_.allow_relocation) {
        return absl::UnavailableError(absl::StrFormat(
            "the driver would not give 0x%x+%u (got 0x%x) and relocation is disabled "
            "(--no-relocate)", res.va, res.size, got));
      }
      std::fprintf(stderr,
                   "kerncap-replay: RELOCATING: range 0x%llx+%llu not available, mapped at "
                   "0x%llx; pointers will be patched\n",
                   static_cast<unsigned long long>(res.va),
                   static_cast<unsigned long long>(res.size), static_cast<unsigned long long>(got));
    }
  }
  info_.reservations = reservations.size();

  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuDevicePrimaryCtxRetain(&ctx_, device_),
                               "cuDevicePrimaryCtxRetain"));
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"));

  // Every placement is known now (a reservation's delta fixes its regions'
  // replay addresses), so the relocator can be completed and the upload can
  // start before any physical memory exists. The mappings themselves are
  // made by the mapping thread (StartMapping), in upload order: ordered by
  // the first pre region (task order) they hold.
  for (size_t ri = 0; ri < reservations.size(); ++ri) {
    const Reservation& res = reservations[ri];
    const uint64_t delta = bases[ri] - res.va;  // wraps; added back below
    for (const Mapping& mp : res.mappings) {
      size_t first = SIZE_MAX;
      for (size_t idx : mp.region_indices) {
        const v1::Region& r = m.pre().regions(static_cast<int>(idx));
        placements_[idx] = Placement{true, false, r.va() + delta};
        relocator_.Add(r.va(), r.data().size(), r.va() + delta);
        moved_region_[r.va()] = idx;
        first = std::min(first, idx);
      }
      map_jobs_.push_back(MapJob{mp.va + delta, mp.size, first, mp.region_indices});
    }
  }
  std::stable_sort(map_jobs_.begin(), map_jobs_.end(),
                   [](const MapJob& a, const MapJob& b) { return a.first_region < b.first_region; });
  region_mapping_.assign(placements_.size(), 0);
  for (size_t j = 0; j < map_jobs_.size(); ++j) {
    for (size_t idx : map_jobs_[j].regions) region_mapping_[idx] = static_cast<uint32_t>(j);
  }
  map_prop_ = prop;
  return absl::OkStatus();
}

absl::Status ReplaySession::MapOne(size_t job) {
  const MapJob& mj = map_jobs_[job];
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUmemGenericAllocationHandle h = 0;
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemCreate(&h, mj.size, &map_prop_, 0),
                               absl::StrFormat("cuMemCreate(%u bytes)", mj.size)));
  handles_.push_back(h);
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemMap(mj.va, mj.size, 0, h, 0),
                               absl::StrFormat("cuMemMap(0x%x, %u)", mj.va, mj.size)));
  mapped_.emplace_back(mj.va, mj.size);
  return cu_.Check(cu_.cuMemSetAccess(mj.va, mj.size, &access, 1), "cuMemSetAccess");
}

absl::Status ReplaySession::StartMapping() {
  if (map_jobs_.empty()) return absl::OkStatus();
  auto body = [this] {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s = cu_.Check(cu_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent (mapping thread)");
    if (!s.ok()) {
      map_progress_.Fail(s);
    } else {
      s = MapInOrder(
          map_jobs_.size(), [this](size_t j) { return MapOne(j); }, &map_progress_, &map_cancel_);
    }
    map_status_ = std::move(s);
    map_seconds_ = Seconds(t0);
  };
  // KERNCAP_REPLAY_SERIAL_MAP=1: map everything before the upload (the
  // former behaviour; for comparing the overlap on a GPU).
  const char* serial = std::getenv("KERNCAP_REPLAY_SERIAL_MAP");
  if (serial != nullptr && std::atoi(serial) > 0) {
    body();
    info_.map_seconds = map_seconds_;
    return map_status_;
  }
  mapper_ = std::thread(body);
  return absl::OkStatus();
}

absl::Status ReplaySession::FinishMapping() {
  if (mapper_.joinable()) mapper_.join();
  info_.map_seconds = map_seconds_;
  return map_status_;
}

void ReplaySession::CancelMapping() {
  map_cancel_ = true;
  if (mapper_.joinable()) mapper_.join();
}

absl::Status ReplaySession::PlaceHostRegions() {
  const v1::CaptureManifest& m = src_->manifest();
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    const v1::Region& r = m.pre().regions(i);
    if (r.kind() != v1::REGION_HOST_PINNED || r.data().size() == 0) continue;
    const uint64_t begin = r.va() & ~(page - 1);
    const uint64_t end = (r.va() + r.data().size() + page - 1) & ~(page - 1);
    void* want = reinterpret_cast<void*>(begin);
    void* got = MAP_FAILED;
    if (!options_.force_relocation) {
      got = ::mmap(want, end - begin, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (got != MAP_FAILED && got != want) {  // old kernels ignore the flag
        ::munmap(got, end - begin);
        got = MAP_FAILED;
      }
    }
    bool placed = false;
    if (got != MAP_FAILED) {
      CUresult cr = cu_.cuMemHostRegister(got, end - begin,
                                          CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
      CUdeviceptr dptr = 0;
      if (cr == CUDA_SUCCESS &&
          cu_.cuMemHostGetDevicePointer(&dptr, reinterpret_cast<void*>(r.va()), 0) == CUDA_SUCCESS &&
          dptr == r.va()) {
        host_mmaps_.emplace_back(got, end - begin);
        placements_[i] = Placement{true, true, r.va()};
        placed = true;
      } else {
        if (cr == CUDA_SUCCESS) cu_.cuMemHostUnregister(got);
        ::munmap(got, end - begin);
      }
    }
    if (!placed) {
      if (!options_.allow_relocation) {
        return absl::UnavailableError(absl::StrFormat(
            "host region 0x%x+%u cannot be placed at its address and relocation is disabled",
            r.va(), r.data().size()));
      }
      void* p = nullptr;
      KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemAllocHost(&p, r.data().size()), "cuMemAllocHost"));
      host_allocs_.push_back(p);
      const uint64_t nva = reinterpret_cast<uint64_t>(p);
      placements_[i] = Placement{true, true, nva};
      relocator_.Add(r.va(), r.data().size(), nva);
      moved_region_[r.va()] = static_cast<size_t>(i);  // said once placed (a note or the alarm)
    }
  }
  return absl::OkStatus();
}

absl::Status ReplaySession::CopyToReplay(const Placement& p, uint64_t offset,
                                         const std::string& bytes) {
  if (p.host) {
    std::memcpy(reinterpret_cast<void*>(p.replay_va + offset), bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  return cu_.Check(cu_.cuMemcpyHtoD(p.replay_va + offset, bytes.data(), bytes.size()),
                   absl::StrFormat("cuMemcpyHtoD(0x%x, %u)", p.replay_va + offset, bytes.size()));
}

absl::Status ReplaySession::CopyFromReplay(const Placement& p, uint64_t offset, size_t size,
                                           std::string* out) {
  out->resize(size);
  if (p.host) {
    std::memcpy(out->data(), reinterpret_cast<const void*>(p.replay_va + offset), size);
    return absl::OkStatus();
  }
  return cu_.Check(cu_.cuMemcpyDtoH(out->data(), p.replay_va + offset, size),
                   absl::StrFormat("cuMemcpyDtoH(0x%x, %u)", p.replay_va + offset, size));
}

absl::Status ReplaySession::UploadPreImage() {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<RestoreTask> tasks;
  for (size_t idx = 0; idx < placements_.size(); ++idx) {
    const Placement& p = placements_[idx];
    if (!p.restored) continue;
    const v1::Region& r = src_->manifest().pre().regions(static_cast<int>(idx));
    const v1::ChunkList& list = r.data();
    for (uint64_t i = 0; i < ChunkCount(list); ++i) {
      const uint64_t off = ChunkOffset(list, i);
      tasks.push_back(RestoreTask{&list.chunk_digests(static_cast<int>(i)), ChunkLength(list, i),
                                  p.replay_va + off, r.va() + off, p.host,
                                  p.host ? 0u : region_mapping_[idx]});
    }
  }
  absl::StatusOr<RestorePipelineStats> stats =
      RunUpload(tasks, map_jobs_.empty() ? nullptr : &map_progress_, tally_.get(),
                &info_.staging_seconds);
  // Every device task waited for its mapping, but a mapping holding no task
  // may still be in progress: wait for the mapper (stop it on failure).
  if (!stats.ok()) map_cancel_ = true;
  absl::Status mapped = FinishMapping();
  if (!mapped.ok() && !absl::IsCancelled(mapped)) return mapped;
  KC_RETURN_IF_ERROR(stats.status());
  KC_RETURN_IF_ERROR(mapped);
  info_.map_wait_seconds = stats->map_wait_seconds;
  info_.restored_bytes += stats->bytes;
  info_.patched_words += stats->patched_words;
  info_.upload_bytes = stats->bytes;
  info_.upload_workers = stats->workers;
  info_.upload_seconds = Seconds(t0);
  return absl::OkStatus();
}

absl::StatusOr<RestorePipelineStats> ReplaySession::RunUpload(
    const std::vector<RestoreTask>& tasks, MappingProgress* mapping, PatchTally* tally,
    double* staging_seconds) {
  RestorePipelineOptions options;
  // KERNCAP_REPLAY_RESTORE_THREADS overrides the worker count (default: hardware threads).
  const char* env = std::getenv("KERNCAP_REPLAY_RESTORE_THREADS");
  options.workers = env != nullptr && std::atoi(env) > 0
                        ? std::min(std::atoi(env), 64)
                        : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 32);
  options.slots = options.workers + 4;
  const size_t staging_bytes = RestoreStagingBytes(tasks, options);
  // Pinned staging: for the pre image allocated while the mapping thread
  // maps the first regions (the first copy waits for the first mapping anyway).
  const auto ts = std::chrono::steady_clock::now();
  void* staging = nullptr;
  if (staging_bytes > 0) {
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemAllocHost(&staging, staging_bytes),
                                 absl::StrCat("cuMemAllocHost(restore staging, ", staging_bytes,
                                              " bytes)")));
  }
  if (staging_seconds != nullptr) *staging_seconds = Seconds(ts);
  absl::StatusOr<RestorePipelineStats> stats;
  {
    CudaCopier copier(cu_, ctx_);
    absl::Status init = copier.Init(options.slots);
    if (init.ok()) {
      stats = RunRestorePipeline(
          tasks,
          [this](const RestoreTask& t, char* out) {
            return src_->ReadChunkInto(*t.digest, t.size, out);
          },
          &relocator_, &copier, static_cast<char*>(staging), options, mapping, tally);
    } else {
      stats = init;
    }
  }
  if (staging != nullptr) cu_.cuMemFreeHost(staging);
  return stats;
}

absl::Status ReplaySession::UploadRegionTo(size_t index, const Placement& p, bool count) {
  const v1::Region& r = src_->manifest().pre().regions(static_cast<int>(index));
  const v1::ChunkList& list = r.data();
  std::string buf;
  for (uint64_t i = 0; i < ChunkCount(list); ++i) {
    const uint64_t off = ChunkOffset(list, i);
    const uint32_t len = ChunkLength(list, i);
    const std::string& digest = list.chunk_digests(static_cast<int>(i));
    if (digest.empty() && !p.host) {
      KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemsetD8(p.replay_va + off, 0, len), "cuMemsetD8"));
    } else {
      KC_RETURN_IF_ERROR(src_->ReadChunk(digest, len, &buf));
      if (!relocator_.empty()) {
        const uint64_t patched = relocator_.PatchWords(r.va() + off, buf.data(), buf.size(),
                                                       count ? tally_.get() : nullptr);
        if (count) info_.patched_words += patched;
      }
      KC_RETURN_IF_ERROR(CopyToReplay(p, off, buf));
    }
    if (count) info_.restored_bytes += len;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReplaySession::CapturedImage(std::string* name) const {
  const v1::CaptureManifest& m = src_->manifest();
  const v1::CodeObject* code = &m.code_objects(0);
  for (const v1::CodeObject& c : m.code_objects()) {
    if (!m.kernel().code_object_digest().empty() && c.digest() == m.kernel().code_object_digest()) {
      code = &c;
    }
  }
  *name = code->name().empty() ? "captured" : code->name();
  std::string image;
  image.reserve(code->data().size() + 1);
  std::string buf;
  for (uint64_t i = 0; i < ChunkCount(code->data()); ++i) {
    KC_RETURN_IF_ERROR(src_->ReadChunk(code->data().chunk_digests(static_cast<int>(i)),
                                       ChunkLength(code->data(), i), &buf));
    image += buf;
  }
  if (code->format() == v1::CODE_OBJECT_PTX) image.push_back('\0');
  return image;
}

std::vector<CapturedVariable> ReplaySession::CapturedVariables() const {
  const v1::CaptureManifest& m = src_->manifest();
  std::vector<CapturedVariable> out;
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    const v1::Region& r = m.pre().regions(i);
    if (!IsGlobalKind(r.kind())) continue;
    out.push_back(CapturedVariable{static_cast<size_t>(i), r.name(), r.data().size()});
  }
  return out;
}

const std::vector<VariableMatch>& ReplaySession::variable_matches() const {
  static const std::vector<VariableMatch> kNone;
  return code_ != nullptr ? code_->matches : kNone;
}

absl::Status ReplaySession::LoadCode() {
  std::string image;
  std::string image_name;
  if (!options_.code_object_path.empty()) {
    // --code-object: a rebuilt kernel (reproducer `make recompile`).
    KC_ASSIGN_OR_RETURN(image, ReadFile(options_.code_object_path));
    image_name = options_.code_object_path;
    if (image.compare(0, 4, "\x7f" "ELF") != 0) image.push_back('\0');  // PTX text
  } else {
    KC_ASSIGN_OR_RETURN(image, CapturedImage(&image_name));
  }
  KC_ASSIGN_OR_RETURN(code_, LoadImage(std::move(image), image_name, /*primary=*/true));
  function_ = code_->function;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ReplaySession::LoadedCode>> ReplaySession::LoadImage(
    std::string image, std::string name, bool primary) {
  const v1::CaptureManifest& m = src_->manifest();
  auto code = std::make_unique<LoadedCode>();
  code->name = std::move(name);
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuModuleLoadData(&code->module, image.data()),
                               absl::StrCat("cuModuleLoadData(", code->name, ", ", image.size(),
                                            " bytes)")));
  // From here on the module is unloaded on any error.
  struct Guard {
    ReplaySession* s;
    LoadedCode* c;
    ~Guard() {
      if (c != nullptr) s->Unload(c);
    }
  } guard{this, code.get()};
  const ModuleSymbols symbols = ListModuleSymbols(image);
  const std::string& kernel = m.kernel().mangled_name();
  code->kernel = kernel;
  CUresult gr = cu_.cuModuleGetFunction(&code->function, code->module, kernel.c_str());
  if (gr != CUDA_SUCCESS) {
    // A kernel in an anonymous namespace carries its unit's uniquifier.
    absl::StatusOr<std::string> other = MatchKernel(kernel, symbols);
    if (!other.ok()) {
      return absl::NotFoundError(absl::StrCat("the code object ", code->name,
                                              " has no kernel named ", kernel,
                                              " (the captured kernel): ", cu_.ErrorText(gr), "; ",
                                              other.status().message()));
    }
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuModuleGetFunction(&code->function, code->module,
                                                         other->c_str()),
                                 absl::StrCat("cuModuleGetFunction(", *other, ")")));
    code->kernel = *other;
    const std::string note = absl::StrCat("the captured kernel ", kernel, " is ", *other, " in ",
                                          code->name, " (matched by its stable name)");
    if (primary) {
      Warn(note);
    } else {
      std::fprintf(stderr, "kerncap-replay: %s\n", note.c_str());
    }
  }
  // The captured module variables, matched to this module's and restored.
  CUmodule module = code->module;
  code->matches = MatchModuleVariables(
      CapturedVariables(), symbols, [&](const std::string& sym) -> std::optional<uint64_t> {
        CUdeviceptr dptr = 0;
        size_t bytes = 0;
        if (cu_.cuModuleGetGlobal(&dptr, &bytes, module, sym.c_str()) != CUDA_SUCCESS) {
          return std::nullopt;
        }
        return bytes;
      });
  for (const VariableMatch& v : code->matches) {
    if (!v.matched()) {
      const std::string w = absl::StrCat("module variable '", v.captured, "' not restored in ",
                                         code->name, ": ", v.problem,
                                         " (it is not compared either: the verdict says so)");
      if (primary) {
        Warn(w);
      } else {
        std::fprintf(stderr, "kerncap-replay: warning: %s\n", w.c_str());
      }
      continue;
    }
    CUdeviceptr dptr = 0;
    size_t bytes = 0;
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuModuleGetGlobal(&dptr, &bytes, module, v.symbol.c_str()),
                                 absl::StrCat("cuModuleGetGlobal(", v.symbol, ")")));
    code->globals[v.region] = dptr;
    const Placement p{true, false, dptr};
    if (primary) placements_[v.region] = p;
    KC_RETURN_IF_ERROR(UploadRegionTo(v.region, p, /*count=*/primary));
  }
  if (const std::string renamed = DescribeRenamedVariables(code->matches, code->name);
      !renamed.empty()) {
    if (primary) {
      Warn(renamed);
    } else {
      std::fprintf(stderr, "kerncap-replay: %s\n", renamed.c_str());
    }
  }
  KC_RETURN_IF_ERROR(ApplyAttributesTo(code->function, nullptr));
  guard.c = nullptr;
  return code;
}

void ReplaySession::Unload(LoadedCode* code) {
  if (code->module != nullptr) cu_.cuModuleUnload(code->module);
  code->module = nullptr;
  code->function = nullptr;
}

absl::Status ReplaySession::LoadOriginal() {
  if (original_ != nullptr) return absl::OkStatus();
  std::string name;
  KC_ASSIGN_OR_RETURN(std::string image, CapturedImage(&name));
  absl::StatusOr<std::unique_ptr<LoadedCode>> code =
      LoadImage(std::move(image), name, /*primary=*/false);
  if (!code.ok()) {
    return absl::Status(code.status().code(),
                        absl::StrCat("the captured code object, loaded beside the variant: ",
                                     code.status().message()));
  }
  original_ = std::move(*code);
  return cu_.Check(cu_.cuCtxSynchronize(), "cuCtxSynchronize (captured code object loaded)");
}

absl::Status ReplaySession::SetLaunchOverride(const LaunchOverride& o) {
  KC_ASSIGN_OR_RETURN(LaunchShape shape, ApplyLaunchOverride(captured_launch_, o));
  options_.launch = o;
  launch_ = shape;
  info_.launch_override = o.empty() ? "" : DescribeLaunch(launch_);
  info_.launch_override_json = o.empty() ? nlohmann::json() : LaunchOverrideJson(o);
  return absl::OkStatus();
}

absl::Status ReplaySession::ApplyAttributesTo(CUfunction f, std::vector<std::string>* warnings) {
  const v1::LaunchConfig& l = src_->manifest().launch();
  const LaunchOverride& o = options_.launch;
  auto attr = [&](const char* key) -> std::optional<int64_t> {
    auto it = l.attributes().find(absl::StrCat("func.", key));
    if (it == l.attributes().end()) return std::nullopt;
    return it->second;
  };
  // A block the kernel cannot run (its __launch_bounds__ or register use)
  // is refused here, with the kernel's limit, not as a launch error.
  int max_threads = 0;
  if (!o.empty() && cu_.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                           f) == CUDA_SUCCESS &&
      max_threads > 0) {
    const uint64_t threads = uint64_t{launch_.block[0]} * launch_.block[1] * launch_.block[2];
    if (threads > static_cast<uint64_t>(max_threads)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "launch override: a block of ", threads, " threads exceeds this kernel's limit of ",
          max_threads, " (its launch bounds or register use)"));
    }
  }
  int64_t max_dyn = o.max_dynamic_shared_mem ? int64_t{*o.max_dynamic_shared_mem}
                                             : attr("max_dynamic_shared_size_bytes").value_or(0);
  max_dyn = std::max<int64_t>(max_dyn, std::max(launch_.shared_mem_bytes, l.shared_mem_bytes()));
  if (max_dyn > 0) {
    KC_RETURN_IF_ERROR(cu_.Check(
        cu_.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               static_cast<int>(max_dyn)),
        absl::StrCat("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES=", max_dyn, ")")));
  }
  // Hints and cluster permissions: failures only warn (the launch may still work).
  const struct {
    const char* key;
    CUfunction_attribute attr;
  } kOptional[] = {
      {"preferred_shared_memory_carveout", CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT},
      {"non_portable_cluster_size_allowed", CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED},
      {"cluster_scheduling_policy_preference",
       CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE},
  };
  if (o.cache_preference) {
    static constexpr CUfunc_cache kCache[] = {CU_FUNC_CACHE_PREFER_NONE,
                                              CU_FUNC_CACHE_PREFER_SHARED,
                                              CU_FUNC_CACHE_PREFER_L1, CU_FUNC_CACHE_PREFER_EQUAL};
    KC_RETURN_IF_ERROR(cu_.Check(
        cu_.cuFuncSetCacheConfig(f, kCache[static_cast<int>(*o.cache_preference)]),
        absl::StrCat("cuFuncSetCacheConfig(", CachePreferenceName(*o.cache_preference), ")")));
  }
  if (launch_.has_cluster() && !captured_launch_.has_cluster()) {
    // A cluster the captured launch did not have: allow sizes above 8.
    const uint64_t blocks = uint64_t{launch_.cluster[0]} * launch_.cluster[1] * launch_.cluster[2];
    if (blocks > 8) {
      KC_RETURN_IF_ERROR(cu_.Check(
          cu_.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
          "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED=1)"));
    }
  }
  for (const auto& o : kOptional) {
    std::optional<int64_t> v = attr(o.key);
    if (!v || *v < 0) continue;
    int current = 0;
    if (cu_.cuFuncGetAttribute(&current, o.attr, f) == CUDA_SUCCESS && current == *v) {
      continue;
    }
    CUresult cr = cu_.cuFuncSetAttribute(f, o.attr, static_cast<int>(*v));
    if (cr != CUDA_SUCCESS) {
      std::string w =
          absl::StrCat("cuFuncSetAttribute(", o.key, "=", *v, "): ", cu_.ErrorText(cr));
      if (warnings != nullptr) {
        warnings->push_back(std::move(w));
      } else {
        Warn(w);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReplaySession::PrepareArguments() {
  const v1::CaptureManifest& m = src_->manifest();
  args_ = m.argument_blob();
  if (!relocator_.empty()) {
    // The blob is 8-byte aligned on the device; patch every aligned word.
    info_.patched_words += relocator_.PatchWords(0, args_.data(), args_.size(), tally_.get());
  }
  // The driver wants CU_LAUNCH_PARAM_BUFFER_SIZE to be the kernel's parameter
  // size; a blob with trailing padding beyond the last argument is trimmed.
  uint64_t end = 0;
  for (const v1::Argument& a : m.arguments()) {
    end = std::max<uint64_t>(end, static_cast<uint64_t>(a.offset()) + a.size());
  }
  if (m.arguments_size() > 0 && end < args_.size()) args_.resize(end);
  kernel_params_.clear();
  for (const v1::Argument& a : m.arguments()) {
    if (static_cast<uint64_t>(a.offset()) + a.size() > args_.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "argument at offset %u (%u bytes) lies outside the %u-byte argument blob", a.offset(),
          a.size(), args_.size()));
    }
    kernel_params_.push_back(args_.data() + a.offset());
  }
  // Texture and surface handles: recreated here, patched in place (the
  // kernel_params_ pointers see the new values).
  KC_RETURN_IF_ERROR(textures_.Create(
      m, [this](uint64_t va, uint64_t size) { return PlaceCaptured(va, size); }, &args_));
  info_.texture_objects = textures_.objects();
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ReplaySession::PlaceCaptured(uint64_t va, uint64_t size) const {
  const v1::CaptureManifest& m = src_->manifest();
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    const v1::Region& r = m.pre().regions(i);
    const Placement& p = placements_[static_cast<size_t>(i)];
    if (!p.restored || va < r.va() || va - r.va() >= r.data().size()) continue;
    if (size > r.data().size() - (va - r.va())) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "its memory 0x%x+%u runs past the end of captured region %d (0x%x+%u)", va, size, i,
          r.va(), r.data().size()));
    }
    return p.replay_va + (va - r.va());
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "its memory 0x%x+%u is in no region restored by this replay", va, size));
}

ReplaySession::RegionPlacement ReplaySession::placement(size_t index) const {
  if (index >= placements_.size()) return {};
  const Placement& p = placements_[index];
  return RegionPlacement{p.restored, p.host, p.replay_va};
}

absl::Status ReplaySession::Prepare() {
  if (prepared_) return absl::OkStatus();
  const auto t0 = std::chrono::steady_clock::now();
  KC_RETURN_IF_ERROR(InitDevice());
  info_.init_seconds = Seconds(t0);
  const auto tr = std::chrono::steady_clock::now();
  KC_RETURN_IF_ERROR(ReserveRanges());
  info_.reserve_seconds = Seconds(tr);
  // Physical memory is mapped on a thread, overlapped with the host regions,
  // the staging allocation and the upload (UploadPreImage joins it).
  KC_RETURN_IF_ERROR(StartMapping());
  KC_RETURN_IF_ERROR(PlaceHostRegions());
  KC_RETURN_IF_ERROR(relocator_.Finalize());
  tally_ = std::make_unique<PatchTally>(relocator_.ranges().size());
  info_.relocated = !relocator_.empty();
  KC_RETURN_IF_ERROR(UploadPreImage());
  const auto tc = std::chrono::steady_clock::now();
  KC_RETURN_IF_ERROR(LoadCode());
  KC_RETURN_IF_ERROR(PrepareArguments());
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuCtxSynchronize(), "restore (cuCtxSynchronize)"));
  KC_RETURN_IF_ERROR(
      cu_.Check(cu_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate"));
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventCreate(&stop_, CU_EVENT_DEFAULT), "cuEventCreate"));
  info_.code_seconds = Seconds(tc);
  info_.regions = static_cast<uint64_t>(
      std::count_if(placements_.begin(), placements_.end(), [](const Placement& p) { return p.restored; }));
  info_.restore_seconds = Seconds(t0);
  ReportRelocation();
  prepared_ = true;
  return absl::OkStatus();
}

void ReplaySession::ReportRelocation() {
  const v1::CaptureManifest& m = src_->manifest();
  info_.moved.clear();
  const std::vector<MovedRange>& ranges = relocator_.ranges();
  for (size_t i = 0; i < ranges.size(); ++i) {
    MovedRegion mr;
    auto it = moved_region_.find(ranges[i].old_va);
    mr.region = it == moved_region_.end() ? 0 : it->second;
    mr.kind = it == moved_region_.end()
                  ? "unknown"
                  : RegionKindName(m.pre().regions(static_cast<int>(mr.region)).kind());
    mr.old_va = ranges[i].old_va;
    mr.size = ranges[i].size;
    mr.new_va = ranges[i].new_va;
    mr.pointers_patched = tally_ != nullptr ? tally_->count(i) : 0;
    info_.moved.push_back(std::move(mr));
  }
  const std::string text = FormatRelocation(info_);
  if (text.empty()) return;
  // One message where the user looks first; --json carries the same facts.
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::fprintf(stderr, "kerncap-replay: %.*s\n", static_cast<int>(line.size()), line.data());
  }
}

absl::Status ReplaySession::LaunchAsync() { return LaunchFunctionAsync(function_, stream_); }

absl::Status ReplaySession::LaunchFunctionAsync(CUfunction f, CUstream stream) {
  launched_ = true;  // the device memory is no longer (only) the restored pre image
  const LaunchShape& l = use_captured_launch_ ? captured_launch_ : launch_;
  size_t blob_size = args_.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args_.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &blob_size, CU_LAUNCH_PARAM_END};
  void** extra_ptr = args_.empty() ? nullptr : extra;
  const bool cluster = l.has_cluster();
  if (!cluster && !l.cooperative) {
    return cu_.Check(cu_.cuLaunchKernel(f, l.grid[0], l.grid[1], l.grid[2], l.block[0],
                                        l.block[1], l.block[2], l.shared_mem_bytes, stream,
                                        nullptr, extra_ptr),
                     "cuLaunchKernel");
  }
  CUlaunchAttribute attrs[2] = {};
  unsigned n = 0;
  if (cluster) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = l.cluster[0];
    attrs[n].value.clusterDim.y = l.cluster[1];
    attrs[n].value.clusterDim.z = l.cluster[2];
    ++n;
  }
  if (l.cooperative) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n].value.cooperative = 1;
    ++n;
  }
  CUlaunchConfig cfg = {};
  cfg.gridDimX = l.grid[0];
  cfg.gridDimY = l.grid[1];
  cfg.gridDimZ = l.grid[2];
  cfg.blockDimX = l.block[0];
  cfg.blockDimY = l.block[1];
  cfg.blockDimZ = l.block[2];
  cfg.sharedMemBytes = l.shared_mem_bytes;
  cfg.hStream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  // Cooperative launches historically accept only kernelParams; use them
  // whenever the parameter layout is known.
  if (!kernel_params_.empty()) {
    return cu_.Check(cu_.cuLaunchKernelEx(&cfg, f, kernel_params_.data(), nullptr),
                     "cuLaunchKernelEx");
  }
  return cu_.Check(cu_.cuLaunchKernelEx(&cfg, f, nullptr, extra_ptr), "cuLaunchKernelEx");
}

absl::StatusOr<double> ReplaySession::Launch() {
  KC_RETURN_IF_ERROR(Prepare());
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventRecord(start_, stream_), "cuEventRecord"));
  KC_RETURN_IF_ERROR(LaunchAsync());
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventRecord(stop_, stream_), "cuEventRecord"));
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventSynchronize(stop_), "kernel execution"));
  float ms = 0;
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime"));
  info_.launch_ms = ms;
  return static_cast<double>(ms);
}

absl::StatusOr<ValidationReport> ReplaySession::Validate(const CompareOptions& options) {
  const v1::CaptureManifest& m = src_->manifest();
  if (!m.post_complete()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "capture ", m.capture_id(), " has no complete post-dispatch image: nothing to validate"));
  }
  const auto t0 = std::chrono::steady_clock::now();
  const bool restored_now = !prepared_;
  KC_RETURN_IF_ERROR(Prepare());
  KC_RETURN_IF_ERROR(PrepareComparison(options));
  KC_RETURN_IF_ERROR(Launch().status());
  KC_ASSIGN_OR_RETURN(ValidationReport report, CompareWithPostImage(options));
  // The command's time: restore (when this call did it), expected image,
  // launch, comparison; the probe below is extra.
  report.validate_seconds = restored_now ? Seconds(t0) : 0;
  if (options_.launch.changes_shape() && !report.passed() &&
      std::string(report.verdict()) == "fail") {
    KC_RETURN_IF_ERROR(ProbeLaunchShape(options, &report));
  }
  return report;
}

absl::Status ReplaySession::ProbeLaunchShape(const CompareOptions& options,
                                             ValidationReport* report) {
  // The captured code object: the session's own, or loaded beside it.
  LoadedCode* captured = code_.get();
  if (!options_.code_object_path.empty()) {
    KC_RETURN_IF_ERROR(LoadOriginal());
    captured = original_.get();
  }
  KC_ASSIGN_OR_RETURN(std::vector<Chunk> written, WrittenChunks());
  const std::vector<Chunk> chunks = ChunksFor(*captured, written);
  // Put back what the failed launch left before the probes.
  KC_RETURN_IF_ERROR(RepairDiffering(*code_, *report).status());
  std::string at_override = report->verdict();
  if (captured != code_.get()) {
    KC_ASSIGN_OR_RETURN(ValidationReport p, ValidateLoaded(*captured, chunks, options));
    at_override = p.verdict();
  }
  use_captured_launch_ = true;
  absl::StatusOr<ValidationReport> q = ValidateLoaded(*captured, chunks, options);
  use_captured_launch_ = false;
  KC_RETURN_IF_ERROR(q.status());
  report->shape_probe = {{"captured_code_at_override", at_override},
                         {"captured_code_at_captured_launch", q->verdict()}};
  report->launch_shape_dependent = q->passed() && at_override != "pass";
  return absl::OkStatus();
}

absl::StatusOr<ValidationReport> ReplaySession::CompareWithPostImage(
    const CompareOptions& options) {
  const v1::CaptureManifest& m = src_->manifest();
  if (!m.post_complete()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "capture ", m.capture_id(), " has no complete post-dispatch image: nothing to validate"));
  }
  if (!prepared_) {
    return absl::FailedPreconditionError("the replay is not prepared: nothing to compare yet");
  }
  return Compare(*code_, options, nullptr);
}

absl::Status ReplaySession::PrepareComparison(const CompareOptions& options) {
  if (comparison_prepared_) return absl::OkStatus();
  comparison_prepared_ = true;
  const auto t0 = std::chrono::steady_clock::now();
  const v1::CaptureManifest& m = src_->manifest();
  comparison_ = ComparisonInfo{};
  comparison_.requested = ComparePlaceName(options.place);
  absl::flat_hash_map<std::pair<uint64_t, uint32_t>, const v1::Region*> post;
  for (const v1::Region& r : m.post().regions()) post[{r.va(), r.device()}] = &r;

  // The device regions Compare() will compare (restored in device memory,
  // a post image of the same shape or none).
  struct Candidate {
    size_t index;
    const v1::Region* pre;
    const v1::Region* post;
  };
  std::vector<Candidate> candidates;
  uint64_t total = 0;
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    const v1::Region& r = m.pre().regions(i);
    const Placement& p = placements_[static_cast<size_t>(i)];
    if (!p.restored || p.host || IsGlobalKind(r.kind()) || r.kind() == v1::REGION_KERNARG ||
        r.data().size() == 0) {
      continue;
    }
    auto it = post.find({r.va(), r.device()});
    const v1::Region* pr = it == post.end() ? nullptr : it->second;
    if (pr != nullptr && (pr->data().size() != r.data().size() ||
                          (!pr->diff() && pr->data().chunk_size() != r.data().chunk_size()))) {
      continue;  // not compared at all (Compare() says why)
    }
    candidates.push_back(Candidate{static_cast<size_t>(i), &r, pr});
    total += r.data().size();
  }
  std::string& why = comparison_.host_reason;
  if (candidates.empty()) {
    why = "no device region to compare";
  } else if (options.place == ComparePlace::kHost) {
    why = "--compare-on=host";
  } else if (launched_) {
    why = "the device memory was launched on before its expected image could be copied";
  } else if (kCompareKernelPtxSize == 0) {
    why = "this kerncap-replay was built without nvcc: no comparison kernel";
  } else if (options.place == ComparePlace::kAuto && total < kAutoDeviceCompareBytes) {
    why = absl::StrFormat("the device regions hold %.1f MiB, less than the %u MiB from which "
                          "--compare-on=auto compares on the GPU",
                          total / 1048576.0, kAutoDeviceCompareBytes >> 20);
  }
  if (!why.empty()) return absl::OkStatus();

  // What fits: free device memory beyond a margin for the launch (its local
  // memory), modules and the driver. KERNCAP_REPLAY_COMPARE_MARGIN_MIB
  // replaces the margin (tests: force the fallback on a large GPU).
  size_t free_bytes = 0, total_bytes = 0;
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo"));
  uint64_t margin = DeviceCompareMargin(total_bytes);
  if (const char* env = std::getenv("KERNCAP_REPLAY_COMPARE_MARGIN_MIB");
      env != nullptr && *env != '\0') {
    margin = std::strtoull(env, nullptr, 10) << 20;
  }
  uint64_t budget = free_bytes > margin ? free_bytes - margin : 0;
  std::vector<DeviceExpectation::RegionInput> chosen;
  std::vector<DeviceExpectation::LeftOut> left_out;
  for (const Candidate& c : candidates) {
    const uint64_t size = c.pre->data().size();
    // Its share of the comparator's tables (tiles, parameters, counters).
    const uint64_t need = size + (size / kDefaultUnitBytes + 1) * 256;
    if (need > budget) {
      left_out.push_back(DeviceExpectation::LeftOut{
          c.index, absl::StrFormat("its %.1f MiB device copy does not fit (%.1f MiB free beyond "
                                   "the %.0f MiB margin)",
                                   size / 1048576.0, budget / 1048576.0, margin / 1048576.0)});
      continue;
    }
    budget -= need;
    DeviceExpectation::RegionInput in;
    in.index = c.index;
    in.actual = placements_[c.index].replay_va;
    in.size = size;
    for (uint64_t k = 0; k < ChunkCount(c.pre->data()); ++k) {
      in.chunk_lengths.push_back(ChunkLength(c.pre->data(), k));
    }
    chosen.push_back(std::move(in));
  }
  if (!chosen.empty()) {
    absl::StatusOr<std::unique_ptr<DeviceExpectation>> e =
        DeviceExpectation::Create(cu_, chosen, stream_, &left_out);
    if (!e.ok()) {
      // The host path still gives the right verdict: fall back, saying why.
      for (const DeviceExpectation::RegionInput& in : chosen) {
        left_out.push_back(DeviceExpectation::LeftOut{
            in.index, absl::StrCat("the device copy failed: ", e.status().message())});
      }
    } else if ((*e)->regions() > 0) {
      // The chunks the kernel changed: their post bytes over the copy,
      // through the restore pipeline (patched as the host path patches).
      std::vector<RestoreTask> tasks;
      for (const Candidate& c : candidates) {
        const uint64_t base = (*e)->expected(c.index);
        if (base == 0) continue;
        const v1::ChunkList& list = c.pre->data();
        for (uint64_t k = 0; k < ChunkCount(list); ++k) {
          const std::string& digest = PostDigest(*c.pre, c.post, k);
          if (digest == list.chunk_digests(static_cast<int>(k))) continue;
          const uint64_t off = ChunkOffset(list, k);
          tasks.push_back(RestoreTask{&digest, ChunkLength(list, k), base + off,
                                      c.pre->va() + off, false, 0});
          comparison_.golden_upload_bytes += ChunkLength(list, k);
        }
      }
      absl::StatusOr<RestorePipelineStats> up = RunUpload(tasks, nullptr, nullptr, nullptr);
      if (!up.ok()) {
        return absl::Status(up.status().code(),
                            absl::StrCat("uploading the changed chunks of the expected image: ",
                                         up.status().message()));
      }
      comparison_.expectation_bytes = (*e)->bytes();
      expectation_ = std::move(*e);
    }
  }
  if (!left_out.empty()) {
    std::vector<std::string> parts;
    for (size_t k = 0; k < left_out.size() && k < 3; ++k) {
      parts.push_back(absl::StrCat("region ", left_out[k].index, ": ", left_out[k].reason));
    }
    why = absl::StrCat(left_out.size(), " device region(s) compared on the host (",
                       absl::StrJoin(parts, "; "), left_out.size() > 3 ? "; ..." : "", ")");
  }
  comparison_.expectation_seconds = Seconds(t0);
  return absl::OkStatus();
}

absl::StatusOr<ValidationReport> ReplaySession::Compare(const LoadedCode& code,
                                                        const CompareOptions& options,
                                                        const std::function<bool(size_t)>* only) {
  const v1::CaptureManifest& m = src_->manifest();
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuCtxSynchronize(), "cuCtxSynchronize after the launch"));
  absl::flat_hash_map<std::pair<uint64_t, uint32_t>, int> post;
  for (int i = 0; i < m.post().regions_size(); ++i) {
    post[{m.post().regions(i).va(), m.post().regions(i).device()}] = i;
  }
  std::vector<bool> post_used(static_cast<size_t>(m.post().regions_size()), false);
  absl::flat_hash_map<size_t, const VariableMatch*> match;
  for (const VariableMatch& v : code.matches) match[v.region] = &v;

  ValidationReport report;
  auto not_compared = [&](int i, const v1::Region& r, bool post_only, std::string reason) {
    NotCompared n;
    n.index = static_cast<size_t>(i);
    n.post_only = post_only;
    n.va = r.va();
    n.kind = RegionKindName(r.kind());
    n.name = r.name();
    n.size = r.data().size();
    n.reason = std::move(reason);
    report.not_compared.push_back(std::move(n));
  };
  const auto tc = std::chrono::steady_clock::now();
  report.comparison = comparison_;
  if (!comparison_prepared_) {
    report.comparison.host_reason =
        "the device copy of the expected image is made only by validate and bench, before "
        "the first launch";
  }
  if (expectation_ != nullptr) {
    const auto td = std::chrono::steady_clock::now();
    KC_RETURN_IF_ERROR(expectation_->Compare(stream_));
    report.comparison.device_compare_seconds = Seconds(td);
  }
  ComparisonInfo& ci = report.comparison;
  ci.device_regions = ci.device_bytes = ci.host_regions = ci.host_bytes = ci.rechecked_bytes = 0;
  std::string expected, actual;
  std::vector<int> absent_unchanged;  // module variables the loaded code lacks, left unchanged
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    const v1::Region& r = m.pre().regions(i);
    auto it = post.find({r.va(), r.device()});
    const v1::Region* pr = nullptr;
    if (it != post.end()) {
      pr = &m.post().regions(it->second);
      post_used[static_cast<size_t>(it->second)] = true;
    }
    if (only != nullptr && !(*only)(static_cast<size_t>(i))) continue;
    // The argument blob is passed directly: a kernel cannot write its parameters.
    if (r.kind() == v1::REGION_KERNARG || r.data().size() == 0) continue;
    Placement p;
    if (IsGlobalKind(r.kind())) {
      auto g = code.globals.find(static_cast<size_t>(i));
      if (g == code.globals.end()) {
        auto v = match.find(static_cast<size_t>(i));
        if (v != match.end() && v->second->absent) {
          // The loaded kernel cannot name it. Unchanged by the captured
          // dispatch and unreachable by pointer (checked below): a note.
          bool unchanged = true;
          for (uint64_t c = 0; c < ChunkCount(r.data()) && unchanged; ++c) {
            unchanged = PostDigest(r, pr, c) == r.data().chunk_digests(static_cast<int>(c));
          }
          if (unchanged) {
            absent_unchanged.push_back(i);
            continue;
          }
          not_compared(i, r, false,
                       absl::StrCat("module variable not in ", code.name, ": ", v->second->problem,
                                    "; the captured dispatch changed it, which the loaded kernel "
                                    "cannot have done"));
          continue;
        }
        not_compared(i, r, false,
                     absl::StrCat("module variable not in ", code.name, ": ",
                                  v != match.end() ? v->second->problem : "not looked up"));
        continue;
      }
      p = Placement{true, false, g->second};
    } else {
      p = placements_[static_cast<size_t>(i)];
      if (!p.restored) {
        not_compared(i, r, false, "not restored in this replay");
        continue;
      }
    }
    // A post image of another shape says nothing reliable about any byte.
    if (pr != nullptr && (pr->data().size() != r.data().size() ||
                          (!pr->diff() && pr->data().chunk_size() != r.data().chunk_size()))) {
      not_compared(i, r, false,
                   absl::StrFormat("its post image has another shape (%u bytes in chunks of %u; "
                                   "the region: %u bytes in chunks of %u)",
                                   pr->data().size(), pr->data().chunk_size(), r.data().size(),
                                   r.data().chunk_size()));
      continue;
    }
    auto [dtype, tol] = options.For(static_cast<size_t>(i), r.va(), r.name());
    RegionComparator cmp(dtype, tol);
    const v1::ChunkList& list = r.data();
    // Device path: chunks the GPU found bitwise equal are counted as equal;
    // the others (and every chunk on the host path) are compared here.
    const bool on_device = !IsGlobalKind(r.kind()) && expectation_ != nullptr &&
                           expectation_->covers(static_cast<size_t>(i));
    if (on_device) {
      ++ci.device_regions;
      ci.device_bytes += list.size();
    } else if (!IsGlobalKind(r.kind()) && !p.host) {
      ++ci.host_regions;
      ci.host_bytes += list.size();
    }
    for (uint64_t c = 0; c < ChunkCount(list); ++c) {
      const uint64_t off = ChunkOffset(list, c);
      const uint32_t len = ChunkLength(list, c);
      if (on_device) {
        if (expectation_->ChunkEqual(static_cast<size_t>(i), c)) {
          cmp.CountEqual(off, len);
          continue;
        }
        ci.rechecked_bytes += len;
      }
      KC_RETURN_IF_ERROR(src_->ReadChunk(PostDigest(r, pr, c), len, &expected));
      if (!relocator_.empty()) relocator_.PatchWords(r.va() + off, expected.data(), expected.size());
      KC_RETURN_IF_ERROR(CopyFromReplay(p, off, len, &actual));
      cmp.Compare(off, expected.data(), actual.data(), len);
    }
    RegionResult rr;
    rr.index = static_cast<size_t>(i);
    rr.va = r.va();
    rr.replay_va = p.replay_va;
    rr.kind = RegionKindName(r.kind());
    rr.name = r.name();
    rr.size = list.size();
    rr.dtype = dtype;
    rr.tolerance = tol;
    rr.stats = cmp.stats();
    rr.passed = cmp.passed();
    rr.on_device = on_device;
    report.regions.push_back(std::move(rr));
  }
  ci.path = ci.device_regions == 0 ? "host" : ci.host_regions == 0 ? "device" : "mixed";
  ci.compare_seconds = Seconds(tc);
  if (!absent_unchanged.empty()) {
    KC_RETURN_IF_ERROR(ClassifyAbsentVariables(code, absent_unchanged, &report));
  }
  if (only == nullptr) {
    for (int i = 0; i < m.post().regions_size(); ++i) {
      if (post_used[static_cast<size_t>(i)]) continue;
      not_compared(i, m.post().regions(i), true,
                   "in the post image but not in the pre image: never restored, so what the "
                   "kernel wrote there cannot be compared");
    }
  }
  report.info = info_;
  return report;
}

absl::Status ReplaySession::ClassifyAbsentVariables(const LoadedCode& code,
                                                    const std::vector<int>& regions,
                                                    ValidationReport* report) const {
  const v1::CaptureManifest& m = src_->manifest();
  KC_ASSIGN_OR_RETURN(std::vector<uint64_t> pointers, CountCapturedPointersInto(*src_, regions));
  for (size_t k = 0; k < regions.size(); ++k) {
    const v1::Region& r = m.pre().regions(regions[k]);
    NotCompared n;
    n.index = static_cast<size_t>(regions[k]);
    n.va = r.va();
    n.kind = RegionKindName(r.kind());
    n.name = r.name();
    n.size = r.data().size();
    if (pointers[k] == 0) {
      n.reason = absl::StrCat("not in ", code.name,
                              ", unchanged by the captured dispatch, no captured pointer into it");
      n.unreachable = true;
      report->unreachable.push_back(std::move(n));
    } else {
      n.reason = absl::StrCat("module variable not in ", code.name, ", and ", pointers[k],
                              " captured word(s) point into it: the kernel may reach it through "
                              "them, so it cannot be left out");
      report->not_compared.push_back(std::move(n));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ReplaySession::Chunk>> ReplaySession::WrittenChunks() {
  const v1::CaptureManifest& m = src_->manifest();
  absl::flat_hash_map<std::pair<uint64_t, uint32_t>, int> pre;
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    pre[{m.pre().regions(i).va(), m.pre().regions(i).device()}] = i;
  }
  std::vector<Chunk> out;
  for (const v1::Region& pr : m.post().regions()) {
    auto it = pre.find({pr.va(), pr.device()});
    if (it == pre.end()) continue;
    const v1::Region& r = m.pre().regions(it->second);
    const Placement& p = placements_[static_cast<size_t>(it->second)];
    // Module variables live in each module: ChunksFor() places them.
    const bool global = IsGlobalKind(r.kind());
    if (!p.restored && !global) continue;
    std::vector<uint64_t> chunks;
    if (pr.diff()) {
      chunks.assign(pr.changed_chunks().begin(), pr.changed_chunks().end());
    } else {
      for (uint64_t c = 0; c < ChunkCount(r.data()); ++c) chunks.push_back(c);
    }
    for (uint64_t c : chunks) {
      if (c >= ChunkCount(r.data())) continue;
      Chunk ch;
      ch.replay_va = global ? 0 : p.replay_va + ChunkOffset(r.data(), c);
      ch.host = p.host;
      ch.region = static_cast<size_t>(it->second);
      ch.offset = ChunkOffset(r.data(), c);
      KC_RETURN_IF_ERROR(src_->ReadChunk(r.data().chunk_digests(static_cast<int>(c)),
                                         ChunkLength(r.data(), c), &ch.bytes));
      if (!relocator_.empty()) {
        relocator_.PatchWords(r.va() + ChunkOffset(r.data(), c), ch.bytes.data(), ch.bytes.size());
      }
      out.push_back(std::move(ch));
    }
  }
  return out;
}

std::vector<ReplaySession::Chunk> ReplaySession::ChunksFor(const LoadedCode& code,
                                                           const std::vector<Chunk>& written) const {
  const v1::CaptureManifest& m = src_->manifest();
  std::vector<Chunk> out;
  out.reserve(written.size());
  for (const Chunk& c : written) {
    if (!IsGlobalKind(m.pre().regions(static_cast<int>(c.region)).kind())) {
      out.push_back(c);
      continue;
    }
    auto g = code.globals.find(c.region);
    if (g == code.globals.end()) continue;  // not in this module (the verdict says so)
    Chunk gc = c;
    gc.replay_va = g->second + c.offset;
    gc.host = false;
    out.push_back(std::move(gc));
  }
  return out;
}

absl::Status ReplaySession::RestoreWrittenRegions() {
  if (!prepared_) {
    return absl::FailedPreconditionError("the replay is not prepared: nothing to restore yet");
  }
  if (!written_) {
    KC_ASSIGN_OR_RETURN(std::vector<Chunk> chunks, WrittenChunks());
    written_ = ChunksFor(*code_, chunks);
  }
  KC_RETURN_IF_ERROR(
      cu_.Check(cu_.cuCtxSynchronize(), "cuCtxSynchronize (before restoring written regions)"));
  return RestoreChunks(*written_);
}

absl::Status ReplaySession::RestoreChunks(const std::vector<Chunk>& chunks) {
  for (const Chunk& c : chunks) {
    KC_RETURN_IF_ERROR(CopyToReplay(Placement{true, c.host, c.replay_va}, 0, c.bytes));
  }
  // cuMemcpyHtoD from pageable memory (the chunks are std::strings) may return
  // once the bytes are staged, before the DMA has landed, and it runs on the
  // legacy stream, which the non-blocking launch stream does not wait for: a
  // kernel launched now could read half-restored inputs. Wait for the copies.
  return cu_.Check(cu_.cuCtxSynchronize(), "cuCtxSynchronize (after restoring written regions)");
}

absl::StatusOr<std::vector<RegionResult>> ReplaySession::RepairDiffering(
    const LoadedCode& code, const ValidationReport& report) {
  const v1::CaptureManifest& m = src_->manifest();
  std::vector<RegionResult> repaired;
  for (const RegionResult& rr : report.regions) {
    if (rr.stats.bytes_differing == 0 && rr.stats.elements_differing == 0) continue;
    Placement p = placements_[rr.index];
    if (IsGlobalKind(m.pre().regions(static_cast<int>(rr.index)).kind())) {
      auto g = code.globals.find(rr.index);
      if (g == code.globals.end()) continue;
      p = Placement{true, false, g->second};
    }
    KC_RETURN_IF_ERROR(UploadRegionTo(rr.index, p, /*count=*/false));
    repaired.push_back(rr);
  }
  if (!repaired.empty()) {
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuCtxSynchronize(), "cuCtxSynchronize (regions put back)"));
  }
  return repaired;
}

absl::StatusOr<ValidationReport> ReplaySession::ValidateLoaded(LoadedCode& code,
                                                               const std::vector<Chunk>& written,
                                                               const CompareOptions& options) {
  KC_RETURN_IF_ERROR(RestoreChunks(written));
  KC_RETURN_IF_ERROR(LaunchFunctionAsync(code.function, stream_));
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuStreamSynchronize(stream_), "kernel execution"));
  KC_ASSIGN_OR_RETURN(ValidationReport report, Compare(code, options, nullptr));
  KC_RETURN_IF_ERROR(RepairDiffering(code, report).status());
  return report;
}

absl::StatusOr<BenchReport> ReplaySession::Bench(const BenchOptions& options) {
  KC_RETURN_IF_ERROR(Prepare());
  const v1::CaptureManifest& m = src_->manifest();
  BenchReport report;
  report.warmup = options.warmup;
  report.cold_l2 = options.cold_l2;

  // The binary timed (`kernel`): the session's, a variant loaded for this
  // bench, or the captured one; with compare_original the captured one
  // beside it (`original`, its own module).
  std::unique_ptr<LoadedCode> variant;
  struct UnloadVariant {
    ReplaySession* s;
    std::unique_ptr<LoadedCode>* v;
    ~UnloadVariant() {
      if (*v != nullptr) s->Unload(v->get());
    }
  } unload_variant{this, &variant};
  LoadedCode* kernel = code_.get();
  std::string kernel_name = options_.code_object_path;
  if (!options.variant_path.empty()) {
    KC_ASSIGN_OR_RETURN(std::string image, ReadFile(options.variant_path));
    const ModuleSymbols probe = ListModuleSymbols(image);
    if (probe.format != "cubin" && probe.format != "fatbin") image.push_back('\0');  // PTX text
    KC_ASSIGN_OR_RETURN(variant, LoadImage(std::move(image), options.variant_path, false));
    kernel = variant.get();
    kernel_name = options.variant_path;
  } else if (options.captured && !options_.code_object_path.empty()) {
    std::string name;
    KC_ASSIGN_OR_RETURN(std::string image, CapturedImage(&name));
    KC_ASSIGN_OR_RETURN(variant, LoadImage(std::move(image), name, false));
    kernel = variant.get();
    kernel_name.clear();
  }
  LoadedCode* original = nullptr;
  if (options.compare_original) {
    KC_RETURN_IF_ERROR(LoadOriginal());
    original = original_.get();
    report.compared = true;
    report.comparison.variant = kernel_name;
    report.comparison.original = original->name;
    report.comparison.order = "ABBA";
  }
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuCtxSynchronize(), "cuCtxSynchronize (code loaded)"));
  // The validations below compare on the device when they may (before the
  // first launch: the expected image starts as a copy of the restored state).
  if (m.post_complete()) KC_RETURN_IF_ERROR(PrepareComparison(options.compare));

  KC_ASSIGN_OR_RETURN(std::vector<Chunk> written, WrittenChunks());
  const std::vector<Chunk> kernel_chunks = ChunksFor(*kernel, written);
  const std::vector<Chunk> original_chunks =
      original != nullptr ? ChunksFor(*original, written) : std::vector<Chunk>{};
  report.restore_each = options.restore_each < 0 ? !written.empty() : options.restore_each != 0;
  for (const Chunk& c : kernel_chunks) report.restore_bytes_per_iteration += c.bytes.size();
  if (!report.restore_each) report.restore_bytes_per_iteration = 0;

  // Every timed binary validated first, from restored inputs.
  const bool validate = m.post_complete();
  if (!validate) {
    report.validation_note =
        "the capture has no complete post-dispatch image: the timed binaries are not validated";
  } else {
    KC_ASSIGN_OR_RETURN(report.kernel_before, ValidateLoaded(*kernel, kernel_chunks,
                                                             options.compare));
    if (original != nullptr) {
      use_captured_launch_ = true;
      auto v = ValidateLoaded(*original, original_chunks, options.compare);
      use_captured_launch_ = false;
      KC_ASSIGN_OR_RETURN(report.original_before, std::move(v));
    }
  }

  // The L2 the timing runs with: nothing set aside for persisting accesses,
  // no persisting lines, no access-policy window; cold when asked.
  report.persisting_l2 = ResetPersistingL2(cu_, stream_);
  std::optional<L2Flusher> flusher;
  if (options.cold_l2) {
    absl::StatusOr<L2Flusher> f = L2Flusher::Create(cu_, device_);
    if (!f.ok()) {
      RestorePersistingL2Limit(cu_, report.persisting_l2);
      return f.status();
    }
    flusher.emplace(std::move(*f));
    report.l2_flush_bytes = flusher->bytes();
  }
  report.protocol = absl::StrCat(
      report.restore_each ? "restore the written regions and wait; " : "",
      flusher ? absl::StrCat("overwrite ", flusher->bytes(),
                             " bytes (2x L2) on the launch stream; ")
              : std::string(),
      "start event; launch; stop event (the events time the kernel alone)");

  // One timed launch of `f` from its restored inputs (and a cold L2).
  // The original (compare_original) runs at the captured launch: what an
  // overridden launch must beat.
  auto time_one = [&](CUfunction f, const std::vector<Chunk>& restore,
                      float* ms) -> absl::Status {
    if (report.restore_each) KC_RETURN_IF_ERROR(RestoreChunks(restore));
    if (flusher) KC_RETURN_IF_ERROR(flusher->Flush(stream_));
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventRecord(start_, stream_), "cuEventRecord"));
    use_captured_launch_ = original != nullptr && f == original->function;
    const absl::Status launched = LaunchFunctionAsync(f, stream_);
    use_captured_launch_ = false;
    KC_RETURN_IF_ERROR(launched);
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventRecord(stop_, stream_), "cuEventRecord"));
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventSynchronize(stop_), "kernel execution"));
    return cu_.Check(cu_.cuEventElapsedTime(ms, start_, stop_), "cuEventElapsedTime");
  };
  absl::Status st;
  const int total = options.warmup + options.iterations;
  for (int it = 0; it < total && st.ok(); ++it) {
    float ms = 0;
    if (!report.compared) {
      st = time_one(kernel->function, kernel_chunks, &ms);
      if (st.ok() && it >= options.warmup) report.samples_ms.push_back(ms);
      continue;
    }
    // ABBA: pair `it` runs variant then original when even, the other way
    // round when odd (A B B A A B ...), so a drift of clocks or temperature
    // over the run, or a launch favoured by coming first or second, hits both.
    float orig_ms = 0;
    const bool variant_first = it % 2 == 0;
    for (int k = 0; k < 2 && st.ok(); ++k) {
      const bool is_variant = (k == 0) == variant_first;
      st = is_variant ? time_one(kernel->function, kernel_chunks, &ms)
                      : time_one(original->function, original_chunks, &orig_ms);
    }
    if (st.ok() && it >= options.warmup) {
      report.samples_ms.push_back(ms);
      report.comparison.original_samples_ms.push_back(orig_ms);
    }
  }
  flusher.reset();
  RestorePersistingL2Limit(cu_, report.persisting_l2);
  KC_RETURN_IF_ERROR(st);
  report.stats = ComputeBenchStats(report.samples_ms);
  if (report.compared) {
    report.comparison.original_stats = ComputeBenchStats(report.comparison.original_samples_ms);
    report.comparison.speedup =
        ComputeSpeedup(report.comparison.original_samples_ms, report.samples_ms);
  }

  // After the timing: what the launches left in the memory the binaries
  // share (a write outside the captured written set shows here), put back;
  // then each binary once more from restored inputs.
  if (validate) {
    absl::flat_hash_map<size_t, bool> written_region;
    for (const Chunk& c : written) written_region[c.region] = true;
    const std::function<bool(size_t)> shared = [&](size_t i) {
      return !IsGlobalKind(m.pre().regions(static_cast<int>(i)).kind());
    };
    KC_ASSIGN_OR_RETURN(ValidationReport left, Compare(*kernel, CompareOptions{}, &shared));
    KC_ASSIGN_OR_RETURN(std::vector<RegionResult> repaired, RepairDiffering(*kernel, left));
    for (RegionResult& r : repaired) {
      if (!written_region.contains(r.index)) report.changed_during_timing.push_back(std::move(r));
    }
    KC_ASSIGN_OR_RETURN(report.kernel_after,
                        ValidateLoaded(*kernel, kernel_chunks, options.compare));
    if (original != nullptr) {
      use_captured_launch_ = true;
      auto v = ValidateLoaded(*original, original_chunks, options.compare);
      use_captured_launch_ = false;
      KC_ASSIGN_OR_RETURN(report.original_after, std::move(v));
    }
  }
  if (!report.samples_ms.empty()) info_.launch_ms = report.stats.median_ms;
  report.info = info_;
  return report;
}

}  // namespace kerncap::replay
