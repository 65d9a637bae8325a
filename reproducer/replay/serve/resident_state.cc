#include "reproducer/replay/serve/resident_state.h"

#include <chrono>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "reproducer/replay/core/pointer_scan.h"
#include "reproducer/replay/core/report.h"

namespace kerncap::replay::serve {
namespace {

bool IsGlobalKind(v1::RegionKind k) {
  return k == v1::REGION_MODULE_GLOBAL || k == v1::REGION_CONSTANT;
}

std::string GiB(uint64_t bytes) {
  return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ResidentState>> ResidentState::Create(
    const CaptureSource* source, const SessionOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  KC_ASSIGN_OR_RETURN(const CudaDriver* drv, CudaDriver::Get());
  std::unique_ptr<ResidentState> s(new ResidentState(source, *drv));
  if (!source->manifest().post_complete()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "capture ", source->manifest().capture_id(),
        " has no complete post-dispatch image: candidates could not be validated"));
  }
  KC_ASSIGN_OR_RETURN(s->session_, ReplaySession::Create(source, options));
  KC_RETURN_IF_ERROR(s->session_->Prepare());
  KC_RETURN_IF_ERROR(s->BuildRegions());
  KC_RETURN_IF_ERROR(s->CheckMemory());
  KC_RETURN_IF_ERROR(s->BuildPristine());
  KC_RETURN_IF_ERROR(s->BuildGolden());
  KC_RETURN_IF_ERROR(s->cu_.Check(s->cu_.cuCtxSynchronize(), "building the resident copies"));
  s->startup_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

ResidentState::~ResidentState() {
  if (session_ != nullptr && session_->context() != nullptr) {
    cu_.cuCtxSetCurrent(session_->context());
    for (Region& r : regions_) {
      if (r.golden != 0 && r.golden != r.pristine) cu_.cuMemFree(r.golden);
      if (r.pristine != 0) cu_.cuMemFree(r.pristine);
    }
  }
  session_.reset();  // unmaps the restored state and releases the context
}

absl::Status ResidentState::BuildRegions() {
  const v1::CaptureManifest& m = source_->manifest();
  absl::flat_hash_map<std::pair<uint64_t, uint32_t>, const v1::Region*> post;
  for (const v1::Region& r : m.post().regions()) post[{r.va(), r.device()}] = &r;
  absl::flat_hash_map<std::pair<uint64_t, uint32_t>, bool> in_pre;
  auto uncovered = [&](int i, const v1::Region& r, bool post_only, std::string reason) {
    uncovered_.push_back(NotCompared{static_cast<size_t>(i), post_only, r.va(),
                                     RegionKindName(r.kind()), r.name(), r.data().size(),
                                     std::move(reason)});
  };
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    const v1::Region& pre = m.pre().regions(i);
    in_pre[{pre.va(), pre.device()}] = true;
    const ReplaySession::RegionPlacement p = session_->placement(static_cast<size_t>(i));
    if (pre.data().size() == 0 || pre.kind() == v1::REGION_KERNARG) continue;
    // Module variables live in each candidate's module (bound per candidate),
    // whether or not the session's own module has them.
    if (!p.restored && !IsGlobalKind(pre.kind())) {
      uncovered(i, pre, false, "not restored in this replay");
      continue;
    }
    auto shape = post.find({pre.va(), pre.device()});
    if (shape != post.end() &&
        (shape->second->data().size() != pre.data().size() ||
         (!shape->second->diff() && shape->second->data().chunk_size() != pre.data().chunk_size()))) {
      uncovered(i, pre, false, "its post image has another shape than the region");
      continue;
    }
    Region r;
    r.index = static_cast<size_t>(i);
    r.where = IsGlobalKind(pre.kind()) ? Where::kGlobal : p.host ? Where::kHost : Where::kDevice;
    r.va = pre.va();
    r.replay_va = p.replay_va;
    r.size = pre.data().size();
    r.kind = RegionKindName(pre.kind());
    r.name = pre.name();
    auto it = post.find({pre.va(), pre.device()});
    if (it != post.end()) {
      for (uint64_t c = 0; c < ChunkCount(pre.data()) && !r.written; ++c) {
        r.written = PostDigest(pre, it->second, c) != pre.data().chunk_digests(static_cast<int>(c));
      }
    }
    regions_.push_back(std::move(r));
  }
  for (int i = 0; i < m.post().regions_size(); ++i) {
    const v1::Region& r = m.post().regions(i);
    if (in_pre.contains({r.va(), r.device()})) continue;
    uncovered(i, r, true,
              "in the post image but not in the pre image: never restored, so what the kernel "
              "wrote there cannot be compared");
  }
  return absl::OkStatus();
}

absl::Status ResidentState::CheckMemory() const {
  uint64_t need = 0;
  for (const Region& r : regions_) {
    if (r.where == Where::kDevice) need += r.size * (r.written ? 2 : 1);
  }
  size_t free_bytes = 0, total_bytes = 0;
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo"));
  // Candidates need room for their modules and any scratch they allocate.
  constexpr uint64_t kHeadroom = 256ull << 20;
  if (need + kHeadroom > free_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "serving needs ", GiB(need), " of device memory beside the restored state for the "
        "pristine and golden copies (+", GiB(kHeadroom), " headroom), but only ", GiB(free_bytes),
        " of ", GiB(total_bytes), " is free"));
  }
  return absl::OkStatus();
}

absl::Status ResidentState::ReadPatched(const v1::Region& r, const std::string& digest,
                                        uint64_t offset, uint32_t length,
                                        std::string* out) const {
  KC_RETURN_IF_ERROR(source_->ReadChunk(digest, length, out));
  // The restored state is patched the same way (replay_session.cc).
  const Relocator& rel = session_->relocator();
  if (!rel.empty()) rel.PatchWords(r.va() + offset, out->data(), out->size());
  return absl::OkStatus();
}

absl::Status ResidentState::BuildPristine() {
  const v1::CaptureManifest& m = source_->manifest();
  for (Region& r : regions_) {
    const v1::Region& pre = m.pre().regions(static_cast<int>(r.index));
    switch (r.where) {
      case Where::kDevice:
        KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemAlloc(&r.pristine, r.size),
                                     absl::StrCat("cuMemAlloc(pristine copy, ", r.size, " bytes)")));
        KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemcpyDtoD(r.pristine, r.replay_va, r.size),
                                     absl::StrFormat("cuMemcpyDtoD(pristine copy of 0x%x)", r.va)));
        r.golden = r.pristine;
        pristine_bytes_ += r.size;
        break;
      case Where::kHost:
        // Restored and patched already; it has not run yet.
        r.host_pristine.assign(reinterpret_cast<const char*>(r.replay_va), r.size);
        break;
      case Where::kGlobal: {
        std::string chunk;
        r.host_pristine.reserve(r.size);
        for (uint64_t c = 0; c < ChunkCount(pre.data()); ++c) {
          KC_RETURN_IF_ERROR(ReadPatched(pre, pre.data().chunk_digests(static_cast<int>(c)),
                                         ChunkOffset(pre.data(), c), ChunkLength(pre.data(), c),
                                         &chunk));
          r.host_pristine += chunk;
        }
        break;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ResidentState::BuildGolden() {
  const v1::CaptureManifest& m = source_->manifest();
  absl::flat_hash_map<std::pair<uint64_t, uint32_t>, const v1::Region*> post;
  for (const v1::Region& r : m.post().regions()) post[{r.va(), r.device()}] = &r;
  std::string chunk;
  for (Region& r : regions_) {
    if (!r.written) continue;
    const v1::Region& pre = m.pre().regions(static_cast<int>(r.index));
    const v1::Region* pr = post.at({pre.va(), pre.device()});
    if (r.where == Where::kDevice) {
      KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemAlloc(&r.golden, r.size),
                                   absl::StrCat("cuMemAlloc(golden copy, ", r.size, " bytes)")));
      KC_RETURN_IF_ERROR(
          cu_.Check(cu_.cuMemcpyDtoD(r.golden, r.pristine, r.size), "cuMemcpyDtoD(golden)"));
      golden_bytes_ += r.size;
    } else {
      r.host_golden = r.host_pristine;
    }
    // Only the chunks the dispatch changed differ from pristine.
    for (uint64_t c = 0; c < ChunkCount(pre.data()); ++c) {
      const std::string& digest = PostDigest(pre, pr, c);
      if (digest == pre.data().chunk_digests(static_cast<int>(c))) continue;
      const uint64_t off = ChunkOffset(pre.data(), c);
      KC_RETURN_IF_ERROR(ReadPatched(pre, digest, off, ChunkLength(pre.data(), c), &chunk));
      if (r.where == Where::kDevice) {
        KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemcpyHtoD(r.golden + off, chunk.data(), chunk.size()),
                                     "cuMemcpyHtoD(golden chunk)"));
      } else {
        std::memcpy(r.host_golden.data() + off, chunk.data(), chunk.size());
      }
    }
  }
  return absl::OkStatus();
}

void ResidentState::MarkWritten() {
  for (Region& r : regions_) r.dirty |= r.written;
}

absl::Status ResidentState::EnqueueRestore(const Region& r, CUstream stream) const {
  return cu_.Check(cu_.cuMemcpyDtoDAsync(r.replay_va, r.pristine, r.size, stream),
                   absl::StrFormat("restoring 0x%x (%u bytes) from its pristine copy", r.va,
                                   r.size));
}

absl::StatusOr<uint64_t> ResidentState::RestoreDirty(CUstream stream) {
  uint64_t bytes = 0;
  bool host_dirty = false;
  for (Region& r : regions_) {
    if (!r.dirty) continue;
    if (r.where == Where::kDevice) {
      KC_RETURN_IF_ERROR(EnqueueRestore(r, stream));
      r.dirty = false;
      bytes += r.size;
    } else if (r.where == Where::kHost) {
      host_dirty = true;
    }
  }
  if (host_dirty) {
    // The device may still be reading or writing them.
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuStreamSynchronize(stream), "cuStreamSynchronize"));
    for (Region& r : regions_) {
      if (!r.dirty || r.where != Where::kHost) continue;
      std::memcpy(reinterpret_cast<void*>(r.replay_va), r.host_pristine.data(), r.size);
      r.dirty = false;
      bytes += r.size;
    }
  }
  return bytes;
}

absl::StatusOr<uint64_t> ResidentState::PointerWordsInto(size_t index) {
  if (!global_pointers_) {
    std::vector<int> globals;
    for (const Region& r : regions_) {
      if (r.where == Where::kGlobal) globals.push_back(static_cast<int>(r.index));
    }
    KC_ASSIGN_OR_RETURN(std::vector<uint64_t> counts, CountCapturedPointersInto(*source_, globals));
    global_pointers_.emplace();
    for (size_t k = 0; k < globals.size(); ++k) {
      (*global_pointers_)[static_cast<size_t>(globals[k])] = counts[k];
    }
  }
  auto it = global_pointers_->find(index);
  if (it == global_pointers_->end()) {
    return absl::InternalError(absl::StrCat("region ", index, " is not a served module variable"));
  }
  return it->second;
}

nlohmann::json ResidentState::Info() const {
  const v1::CaptureManifest& m = source_->manifest();
  const ReplayInfo& info = session_->info();
  size_t device = 0, host = 0, globals = 0, written = 0;
  uint64_t state_bytes = 0;
  for (const Region& r : regions_) {
    device += r.where == Where::kDevice;
    host += r.where == Where::kHost;
    globals += r.where == Where::kGlobal;
    written += r.written;
    state_bytes += r.size;
  }
  nlohmann::json grid = nlohmann::json::array(), block = nlohmann::json::array();
  for (uint32_t g : m.launch().grid()) grid.push_back(g);
  for (uint32_t b : m.launch().block()) block.push_back(b);
  return {{"capture_id", m.capture_id()},
          {"kernel", m.kernel().mangled_name()},
          {"kernel_demangled", m.kernel().demangled_name()},
          {"device", info.device},
          {"relocated", info.relocated},
          {"relocation", RelocationSeverityName(info.relocation())},
          {"moved_ranges", ReplayInfoJson(info)["moved_ranges"]},
          {"uncovered", [&] {
             nlohmann::json u = nlohmann::json::array();
             for (const NotCompared& n : uncovered_) u.push_back(NotComparedJson(n));
             return u;
           }()},
          {"regions", regions_.size()},
          {"device_regions", device},
          {"host_regions", host},
          {"module_variables", globals},
          {"written_regions", written},
          {"state_bytes", state_bytes},
          {"pristine_bytes", pristine_bytes_},
          {"golden_bytes", golden_bytes_},
          {"grid", grid},
          {"block", block},
          {"shared_mem_bytes", m.launch().shared_mem_bytes()},
          {"startup_seconds", startup_seconds_},
          {"restore_seconds", info.restore_seconds},
          {"warnings", info.warnings}};
}

}  // namespace kerncap::replay::serve
