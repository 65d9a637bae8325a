#include "reproducer/replay/hsa/hsa_engine.h"

#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/hsa/code_object.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace kerncap::replay::hsa {

absl::StatusOr<std::unique_ptr<HsaEngine>> HsaEngine::Open(const CaptureSource& source,
                                                           const EngineOptions& options) {
  if (!options.launch.empty()) {
    return absl::UnimplementedError(
        "launch overrides are not supported for HSA captures (the hidden arguments that "
        "describe the launch would need rewriting)");
  }
  std::unique_ptr<HsaEngine> s(new HsaEngine());
  s->source_ = &source;
  ChunkReader read = [&source](const std::string& digest, uint32_t raw_size, std::string* out) {
    return source.ReadChunk(digest, raw_size, out);
  };
  KC_ASSIGN_OR_RETURN(s->input_, HsaInputFromManifest(source.manifest(), read));
  if (!options.code_object_path.empty()) {
    KC_ASSIGN_OR_RETURN(std::string code, ReadFile(options.code_object_path));
    auto md = ::kerncap::hsa::ParseCodeObjectMetadata(code);
    if (!md.ok() || md->FindKernel(s->input_.kernel) == nullptr) {
      return absl::NotFoundError(absl::StrCat("the code object ", options.code_object_path,
                                              " has no kernel named ", s->input_.kernel,
                                              " (the captured kernel)"));
    }
    s->input_.code_object = std::move(code);
  }
  const std::string path =
      options.hsa_runtime_path.empty() ? DefaultHsaRuntimePath() : options.hsa_runtime_path;
  KC_ASSIGN_OR_RETURN(s->runtime_, HsaRuntime::Load(path));
  s->gpu_name_ = s->runtime_->GpuName();
  return s;
}

absl::StatusOr<HsaReplayReport> HsaEngine::Replay(const HsaReplayOptions& options) {
  HsaReplayOptions o = options;
  o.timeout_ms = timeout_ms;
  KC_ASSIGN_OR_RETURN(last_, ReplayDispatch(runtime_->table(), input_, o));
  return last_;
}

ReplayInfo HsaEngine::Info(const HsaReplayReport& r) const {
  const v1::CaptureManifest& m = source_->manifest();
  ReplayInfo info;
  info.capture_id = m.capture_id();
  info.kernel = m.kernel().demangled_name().empty() ? m.kernel().mangled_name()
                                                    : m.kernel().demangled_name();
  info.device = gpu_name_.empty() ? "HSA GPU agent" : gpu_name_;
  info.regions = input_.regions.size();
  info.restored_bytes = r.restored_bytes;
  info.launch_ms = static_cast<double>(r.first_ns) / 1e6;
  info.warnings = r.warnings;
  for (const std::string& w : extra_warnings_) info.warnings.push_back(w);
  return info;
}

nlohmann::json HsaEngine::PlatformJson() const {
  return {{"runtime", runtime_ ? runtime_->path() : ""},
          {"hidden_args_from", last_.hidden_args_from},
          {"patched_hidden_args", last_.patched_hidden_args}};
}

absl::StatusOr<ReplayInfo> HsaEngine::Run() {
  HsaReplayOptions o;
  o.warmup = 0;
  o.iterations = 0;
  KC_ASSIGN_OR_RETURN(HsaReplayReport r, Replay(o));
  return Info(r);
}

absl::StatusOr<ValidationReport> HsaEngine::Validate(const CompareOptions& options) {
  const v1::CaptureManifest& m = source_->manifest();
  if (!m.post_complete()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "capture ", m.capture_id(), " has no complete post-dispatch image: nothing to validate"));
  }
  if (options.place == ComparePlace::kDevice) {
    return absl::UnimplementedError(
        "--compare-on=device: the HSA engine compares on the host (use auto or host)");
  }
  // One comparator per validated region (input = pre image order, for
  // indices and --region-dtype selectors), fed chunk by chunk.
  std::map<size_t, RegionComparator> cmps;
  for (size_t i = 0; i < input_.regions.size(); ++i) {
    const ReplayRegion& in = input_.regions[i];
    if (!in.validated) continue;
    auto [dtype, tol] = options.For(i, in.va, in.name);
    cmps.emplace(i, RegionComparator(dtype, tol));
  }
  HsaReplayOptions o;
  o.warmup = 0;
  o.iterations = 0;
  o.on_compare = [&cmps](size_t region, uint64_t offset, const char* expected, const char* actual,
                         size_t size) {
    auto it = cmps.find(region);
    if (it != cmps.end()) it->second.Compare(offset, expected, actual, size);
  };
  KC_ASSIGN_OR_RETURN(HsaReplayReport r, Replay(o));
  // ReplayDispatch reports the regions it compared by (va, name).
  std::set<std::pair<uint64_t, std::string>> compared;
  std::map<std::pair<uint64_t, std::string>, uint64_t> replay_va;
  for (const hsa::RegionResult& rr : r.regions) {
    compared.insert({rr.va, rr.name});
    replay_va[{rr.va, rr.name}] = rr.replay_va;
  }
  ValidationReport report;
  for (auto& [i, cmp] : cmps) {
    const ReplayRegion& in = input_.regions[i];
    if (!compared.count({in.va, in.name})) continue;
    auto [dtype, tol] = options.For(i, in.va, in.name);
    replay::RegionResult rr;
    rr.index = i;
    rr.va = in.va;
    rr.replay_va = replay_va[{in.va, in.name}];
    rr.kind = RegionKindName(m.pre().regions(static_cast<int>(i)).kind());
    rr.name = in.name;
    rr.size = in.size;
    rr.dtype = dtype;
    rr.tolerance = tol;
    rr.stats = cmp.stats();
    rr.passed = cmp.passed();
    report.regions.push_back(std::move(rr));
  }
  report.info = Info(r);
  report.comparison.requested = ComparePlaceName(options.place);
  report.comparison.host_reason = "the HSA engine compares on the host";
  for (const replay::RegionResult& rr : report.regions) {
    ++report.comparison.host_regions;
    report.comparison.host_bytes += rr.size;
  }
  return report;
}

absl::StatusOr<BenchReport> HsaEngine::Bench(const BenchOptions& options) {
  if (options.compare_original) {
    return absl::UnimplementedError(
        "--compare-original is not supported for HSA captures yet (bench the variant and the "
        "captured code object in two runs)");
  }
  if (!options.variant_path.empty() || options.captured) {
    return absl::UnimplementedError("bench variants are not supported for HSA captures");
  }
  // The kernel writes memory when a validated chunk's post digest differs.
  bool writes = false;
  for (const ReplayRegion& r : input_.regions) {
    for (const RegionChunk& c : r.chunks) writes |= r.validated && c.post_digest != c.pre_digest;
  }
  const bool restore = options.restore_each < 0 ? writes : options.restore_each != 0;
  extra_warnings_.clear();
  if (options.cold_l2) extra_warnings_.push_back("--cold-l2 is not implemented for HSA replay");
  HsaReplayOptions o;
  o.warmup = options.warmup;
  o.iterations = options.iterations;
  o.restore_each_iteration = restore;
  KC_ASSIGN_OR_RETURN(HsaReplayReport r, Replay(o));
  BenchReport report;
  report.info = Info(r);
  report.warmup = options.warmup;
  report.cold_l2 = false;
  report.restore_each = restore;
  report.restore_bytes_per_iteration = restore ? r.restored_bytes : 0;
  for (uint64_t ns : r.times_ns) report.samples_ms.push_back(static_cast<double>(ns) / 1e6);
  report.stats = ComputeBenchStats(report.samples_ms);
  return report;
}

}  // namespace kerncap::replay::hsa
