#include "reproducer/hsa/hsa_cli.h"

#include <chrono>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/hsa/code_object.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace kerncap::replay::hsa {

absl::StatusOr<std::unique_ptr<HsaCliSession>> HsaCliSession::Open(const CaptureSource& source,
                                                                   const HsaCliOptions& options) {
  std::unique_ptr<HsaCliSession> s(new HsaCliSession());
  s->source_ = &source;
  s->options_ = options;
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
      options.runtime_path.empty() ? DefaultHsaRuntimePath() : options.runtime_path;
  KC_ASSIGN_OR_RETURN(s->runtime_, HsaRuntime::Load(path));
  s->gpu_name_ = s->runtime_->GpuName();
  return s;
}

absl::StatusOr<HsaReplayReport> HsaCliSession::Replay(const HsaReplayOptions& options) {
  HsaReplayOptions o = options;
  o.timeout_ms = options_.timeout_ms;
  KC_ASSIGN_OR_RETURN(last_, ReplayDispatch(runtime_->table(), input_, o));
  return last_;
}

ReplayInfo HsaCliSession::Info(const HsaReplayReport& r) const {
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

nlohmann::json HsaCliSession::HsaJson() const {
  return {{"runtime", runtime_ ? runtime_->path() : ""},
          {"hidden_args_from", last_.hidden_args_from},
          {"patched_hidden_args", last_.patched_hidden_args}};
}

absl::StatusOr<ReplayInfo> HsaCliSession::Run() {
  HsaReplayOptions o;
  o.warmup = 0;
  o.iterations = 0;
  KC_ASSIGN_OR_RETURN(HsaReplayReport r, Replay(o));
  return Info(r);
}

absl::StatusOr<ValidationReport> HsaCliSession::Validate(const CompareOptions& options) {
  const v1::CaptureManifest& m = source_->manifest();
  if (!m.post_complete()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "capture ", m.capture_id(), " has no complete post-dispatch image: nothing to validate"));
  }
  HsaReplayOptions o;
  o.warmup = 0;
  o.iterations = 0;
  o.keep_outputs = true;
  KC_ASSIGN_OR_RETURN(HsaReplayReport r, Replay(o));
  // ReplayDispatch reports regions by (va, name); map them back to the input
  // (= pre image) order for indices and --region-dtype selectors.
  std::map<std::pair<uint64_t, std::string>, const hsa::RegionResult*> by_key;
  for (const hsa::RegionResult& rr : r.regions) by_key[{rr.va, rr.name}] = &rr;
  ValidationReport report;
  for (size_t i = 0; i < input_.regions.size(); ++i) {
    const ReplayRegion& in = input_.regions[i];
    auto it = by_key.find({in.va, in.name});
    if (in.post.empty() || it == by_key.end()) continue;
    const hsa::RegionResult& got = *it->second;
    auto [dtype, tol] = options.For(i, in.va, in.name);
    RegionComparator cmp(dtype, tol);
    if (got.actual.size() == in.post.size()) {
      cmp.Compare(0, in.post.data(), got.actual.data(), in.post.size());
    } else {
      return absl::InternalError(absl::StrCat("region ", i, ": replay returned ", got.actual.size(),
                                              " bytes, expected ", in.post.size()));
    }
    replay::RegionResult rr;
    rr.index = i;
    rr.va = in.va;
    rr.replay_va = got.replay_va;
    rr.kind = RegionKindName(source_->manifest().pre().regions(static_cast<int>(i)).kind());
    rr.name = in.name;
    rr.size = in.post.size();
    rr.dtype = dtype;
    rr.tolerance = tol;
    rr.stats = cmp.stats();
    rr.passed = cmp.passed();
    report.regions.push_back(std::move(rr));
  }
  report.info = Info(r);
  return report;
}

absl::StatusOr<BenchReport> HsaCliSession::Bench(const HsaBenchOptions& options) {
  bool writes = false;
  for (const ReplayRegion& r : input_.regions) writes |= !r.post.empty() && r.post != r.pre;
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
