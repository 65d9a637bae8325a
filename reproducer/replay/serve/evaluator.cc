#include "reproducer/replay/serve/evaluator.h"

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "reproducer/replay/core/comparator.h"
#include "reproducer/replay/core/module_symbols.h"

namespace kerncap::replay::serve {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// What the bytes of a code object are, by their first bytes: the driver
// accepts all three through cuModuleLoadData, but PTX must be NUL-terminated
// and garbage is better refused here with a clear message.
enum class CodeFormat { kCubin, kFatbin, kPtx, kUnknown };

CodeFormat Sniff(const std::string& b) {
  if (b.size() >= 4 && std::memcmp(b.data(), "\x7f" "ELF", 4) == 0) return CodeFormat::kCubin;
  if (b.size() >= 4 && std::memcmp(b.data(), "\x50\xed\x55\xba", 4) == 0) {
    return CodeFormat::kFatbin;  // fatbin magic 0xBA55ED50, little-endian
  }
  if (b.find(".version") != std::string::npos && b.find(".target") != std::string::npos) {
    return CodeFormat::kPtx;
  }
  return CodeFormat::kUnknown;
}

const char* FormatName(CodeFormat f) {
  switch (f) {
    case CodeFormat::kCubin: return "cubin";
    case CodeFormat::kFatbin: return "fatbin";
    case CodeFormat::kPtx: return "PTX";
    case CodeFormat::kUnknown: break;
  }
  return "unknown";
}

}  // namespace

// One candidate's module, unloaded when it goes out of scope (unless the
// context is gone: then there is nothing left to unload).
class ResidentEvaluator::Candidate {
 public:
  Candidate(const CudaDriver& cu, const bool* lost) : cu_(cu), lost_(lost) {}
  ~Candidate() { Unload(); }

  // `captured_kernel`: `kernel` is the capture's own name (not one the
  // request gave), so a renamed anonymous-namespace kernel may stand in.
  absl::Status Load(std::string bytes, const std::string& kernel, const std::string& device,
                    bool captured_kernel) {
    const CodeFormat format = Sniff(bytes);
    symbols_ = ListModuleSymbols(bytes);
    if (format == CodeFormat::kUnknown) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the code object (", bytes.size(),
          " bytes) is neither a cubin (ELF), a fatbin nor PTX text"));
    }
    if (format == CodeFormat::kPtx) bytes.push_back('\0');
    char log[8192] = {};
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* vals[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log)))};
    CUresult r = cu_.cuModuleLoadDataEx(&module_, bytes.data(), 2, opts, vals);
    if (r != CUDA_SUCCESS) {
      module_ = nullptr;
      return absl::InvalidArgumentError(absl::StrCat(
          "the candidate ", FormatName(format), " (", bytes.size(), " bytes) does not load on ",
          device, ": ", cu_.ErrorText(r), log[0] != '\0' ? "; JIT log: " : "", log,
          format == CodeFormat::kPtx ? "" : " (is it built for this GPU's architecture?)"));
    }
    kernel_ = kernel;
    r = cu_.cuModuleGetFunction(&function_, module_, kernel.c_str());
    if (r != CUDA_SUCCESS && captured_kernel) {
      absl::StatusOr<std::string> other = MatchKernel(kernel, symbols_);
      if (other.ok() &&
          cu_.cuModuleGetFunction(&function_, module_, other->c_str()) == CUDA_SUCCESS) {
        kernel_ = *other;
        return absl::OkStatus();
      }
    }
    if (r != CUDA_SUCCESS) {
      return absl::NotFoundError(absl::StrCat("the candidate ", FormatName(format),
                                              " has no kernel '", kernel,
                                              "' (cuModuleGetFunction: ", cu_.ErrorText(r),
                                              "); give \"kernel\" with its mangled name"));
    }
    return absl::OkStatus();
  }

  void Unload() {
    if (module_ != nullptr && !*lost_) cu_.cuModuleUnload(module_);
    module_ = nullptr;
  }

  CUmodule module() const { return module_; }
  CUfunction function() const { return function_; }
  const std::string& kernel() const { return kernel_; }  // its name in the module
  const ModuleSymbols& symbols() const { return symbols_; }

 private:
  const CudaDriver& cu_;
  const bool* lost_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  std::string kernel_;
  ModuleSymbols symbols_;
};

ResidentEvaluator::ResidentEvaluator(ResidentState* state) : state_(state), cu_(state->cu()) {}

absl::StatusOr<std::unique_ptr<ResidentEvaluator>> ResidentEvaluator::Create(
    ResidentState* state) {
  std::unique_ptr<ResidentEvaluator> e(new ResidentEvaluator(state));
  const CudaDriver& cu = e->cu_;
  KC_RETURN_IF_ERROR(cu.Check(cu.cuCtxSetCurrent(state->session().context()), "cuCtxSetCurrent"));
  KC_RETURN_IF_ERROR(
      cu.Check(cu.cuStreamCreate(&e->stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  std::vector<uint64_t> sizes;
  for (size_t i = 0; i < state->regions().size(); ++i) {
    const ResidentState::Region& r = state->regions()[i];
    if (r.where != ResidentState::Where::kDevice) continue;
    e->compared_.push_back(i);
    sizes.push_back(r.size);
  }
  KC_ASSIGN_OR_RETURN(e->comparator_, DeviceComparator::Create(cu, sizes));
  return e;
}

ResidentEvaluator::~ResidentEvaluator() {
  baseline_.reset();  // unloads unless the context is lost
  comparator_.reset();
  if (lost_) return;  // nothing of the context is left to free
  for (CUevent ev : events_) cu_.cuEventDestroy(ev);
  if (stream_ != nullptr) cu_.cuStreamDestroy(stream_);
}

nlohmann::json ResidentEvaluator::Info() {
  nlohmann::json j = state_->Info();
  j["evaluations"] = evaluations_;
  j["failed_evaluations"] = failed_evaluations_;
  j["comparator"] = "device (PTX JIT-loaded at start)";
  j["comparator_load_ms"] = comparator_->load_ms();
  j["compared_device_regions"] = compared_.size();
  return j;
}

absl::Status ResidentEvaluator::Failed(absl::Status s) {
  const CUresult r = cu_.cuCtxSynchronize();
  if (r == CUDA_SUCCESS) return s;
  lost_ = true;
  return absl::AbortedError(absl::StrCat(
      "the candidate faulted (", s.message(), "); the CUDA context is lost (", cu_.ErrorText(r),
      ") and the restored state with it: the server stops"));
}

absl::Status ResidentEvaluator::EnsureEvents(size_t count) {
  while (events_.size() < count) {
    CUevent ev = nullptr;
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventCreate(&ev, CU_EVENT_DEFAULT), "cuEventCreate"));
    events_.push_back(ev);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResidentEvaluator::ReadCodeObject(
    const EvaluateRequest& request) const {
  if (request.code_object.has_value()) return *request.code_object;
  std::ifstream f(request.code_object_path, std::ios::binary);
  if (!f) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read the code object '",
                                                   request.code_object_path, "': ",
                                                   std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string bytes = ss.str();
  if (bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the code object '", request.code_object_path, "' is empty"));
  }
  return bytes;
}

absl::StatusOr<std::vector<ResidentEvaluator::GlobalSlot>> ResidentEvaluator::BindGlobals(
    const Candidate& candidate, std::vector<NotCompared>* unbound,
    std::vector<std::string>* warnings) {
  // The capture's module variables, matched in the candidate's module by
  // name or by stable identity (a candidate rebuilt elsewhere renames its
  // internal-linkage variables: module_symbols.h).
  std::vector<CapturedVariable> captured;
  std::vector<ResidentState::Region*> served;
  for (ResidentState::Region& r : state_->regions()) {
    if (r.where != ResidentState::Where::kGlobal) continue;
    r.dirty = false;  // a fresh module: its variables hold the image's initial values
    captured.push_back(CapturedVariable{r.index, r.name, r.size});
    served.push_back(&r);
  }
  const CUmodule module = candidate.module();
  const std::vector<VariableMatch> matches = MatchModuleVariables(
      captured, candidate.symbols(), [&](const std::string& sym) -> std::optional<uint64_t> {
        CUdeviceptr at = 0;
        size_t bytes = 0;
        if (cu_.cuModuleGetGlobal(&at, &bytes, module, sym.c_str()) != CUDA_SUCCESS) {
          return std::nullopt;
        }
        return bytes;
      });
  std::vector<GlobalSlot> slots;
  for (size_t k = 0; k < matches.size(); ++k) {
    const VariableMatch& v = matches[k];
    ResidentState::Region& r = *served[k];
    if (!v.matched()) {
      if (v.absent && !r.written) {
        // The candidate cannot name it; unless a captured word points into
        // it, it cannot reach it at all (pointer_scan.h).
        KC_ASSIGN_OR_RETURN(uint64_t pointers, state_->PointerWordsInto(r.index));
        if (pointers == 0) {
          NotCompared n{r.index, false, r.va, r.kind, r.name, r.size,
                        "not in the candidate, unchanged by the captured dispatch, no captured "
                        "pointer into it"};
          n.unreachable = true;
          unbound->push_back(std::move(n));
          continue;
        }
        unbound->push_back(NotCompared{
            r.index, false, r.va, r.kind, r.name, r.size,
            absl::StrCat("module variable not in the candidate, and ", pointers,
                         " captured word(s) point into it: the kernel may reach it through "
                         "them, so it cannot be left out")});
        warnings->push_back(absl::StrCat("module variable '", r.name, "': ", v.problem,
                                         "; not restored, not compared (the verdict says so)"));
        continue;
      }
      unbound->push_back(NotCompared{r.index, false, r.va, r.kind, r.name, r.size,
                                     absl::StrCat("module variable not in the candidate: ",
                                                  v.problem)});
      warnings->push_back(absl::StrCat("module variable '", r.name, "': ", v.problem,
                                       "; not restored, not compared (the verdict says so)"));
      continue;
    }
    CUdeviceptr at = 0;
    size_t bytes = 0;
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuModuleGetGlobal(&at, &bytes, module, v.symbol.c_str()),
                                 absl::StrCat("cuModuleGetGlobal(", v.symbol, ")")));
    slots.push_back(GlobalSlot{&r, at});
  }
  if (const std::string renamed = DescribeRenamedVariables(matches, "the candidate");
      !renamed.empty()) {
    warnings->push_back(renamed);
  }
  return slots;
}

absl::Status ResidentEvaluator::RestoreGlobals(const std::vector<GlobalSlot>& globals,
                                               bool dirty_only) {
  for (const GlobalSlot& g : globals) {
    if (dirty_only && !g.region->dirty) continue;
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemcpyHtoDAsync(g.address, g.region->host_pristine.data(),
                                                       g.region->size, stream_),
                                 absl::StrCat("restoring module variable '", g.region->name, "'")));
  }
  return absl::OkStatus();
}

absl::Status ResidentEvaluator::Validate(const EvaluateRequest& request,
                                         const std::vector<GlobalSlot>& globals,
                                         const std::vector<NotCompared>& unbound,
                                         ValidationSummary* result) {
  *result = ValidationSummary{};
  result->not_compared = state_->uncovered();
  for (const NotCompared& n : unbound) {
    (n.unreachable ? result->unreachable : result->not_compared).push_back(n);
  }
  std::vector<ResidentState::Region>& regions = state_->regions();
  // Without a verdict the comparison still runs, exactly, to find changes.
  auto rule = [&](const ResidentState::Region& r) -> std::pair<DType, Tolerance> {
    if (!request.validate) return {DType::kBytes, Tolerance{}};
    return request.compare.For(r.index, r.va, r.name);
  };
  auto verdict = [&](const ResidentState::Region& r, uint64_t replay_va, DType dtype,
                     const CompareStats& s) {
    RegionVerdict v;
    v.index = r.index;
    v.va = r.va;
    v.replay_va = replay_va;
    v.kind = r.kind;
    v.name = r.name;
    v.size = r.size;
    v.written = r.written;
    v.dtype = dtype;
    v.passed = s.elements_failing == 0;
    v.mismatches = s.elements_failing;
    v.differing = s.elements_differing;
    v.nan_mismatches = s.nan_mismatches;
    v.worst_abs = s.max_abs_error;
    v.worst_rel = s.max_rel_error;
    v.worst_ulp = s.max_ulp_error;
    v.first_mismatch_offset = s.first_fail_offset;
    if (!s.samples.empty()) v.first_mismatch = {s.samples[0].expected, s.samples[0].actual};
    return v;
  };
  auto record = [&](ResidentState::Region& r, RegionVerdict v) {
    ++result->regions_compared;
    if (v.differing > 0) r.dirty = true;  // restore it before the next launch
    if (!v.passed) ++result->regions_failing;
    if (v.written || v.differing > 0 || !v.passed) result->regions.push_back(std::move(v));
  };

  // Device regions: one kernel for all.
  std::vector<KcCompareRegion> params;
  std::vector<DType> dtypes;
  for (size_t i : compared_) {
    const ResidentState::Region& r = regions[i];
    auto [dtype, tol] = rule(r);
    dtypes.push_back(dtype);
    params.push_back(MakeCompareRegion(r.replay_va, r.golden, r.size, dtype, tol));
  }
  absl::StatusOr<std::vector<KcCompareStats>> raw = comparator_->Run(params, stream_);
  if (!raw.ok()) return Failed(raw.status());
  for (size_t k = 0; k < compared_.size(); ++k) {
    ResidentState::Region& r = regions[compared_[k]];
    CompareStats s = ToCompareStats((*raw)[k]);
    RegionVerdict v = verdict(r, r.replay_va, dtypes[k], s);
    // The only bytes that cross PCIe: the first failing element, both ways.
    const size_t es = DTypeSize(dtypes[k]);
    if (!v.passed && s.first_fail_offset >= 0 &&
        static_cast<uint64_t>(s.first_fail_offset) + es <= r.size) {
      const uint64_t off = static_cast<uint64_t>(s.first_fail_offset);
      uint64_t a = 0, e = 0;
      if (cu_.cuMemcpyDtoH(&a, r.replay_va + off, es) == CUDA_SUCCESS &&
          cu_.cuMemcpyDtoH(&e, r.golden + off, es) == CUDA_SUCCESS) {
        v.first_mismatch = {ElementToDouble(dtypes[k], &e), ElementToDouble(dtypes[k], &a)};
      }
    }
    record(r, std::move(v));
  }
  // Host regions (the stream is idle: Run() waited) and module variables.
  std::string actual;
  for (ResidentState::Region& r : regions) {
    if (r.where != ResidentState::Where::kHost) continue;
    auto [dtype, tol] = rule(r);
    RegionComparator cmp(dtype, tol);
    cmp.Compare(0, r.host_expected().data(), reinterpret_cast<const void*>(r.replay_va), r.size);
    record(r, verdict(r, r.replay_va, dtype, cmp.stats()));
  }
  for (const GlobalSlot& g : globals) {
    ResidentState::Region& r = *g.region;
    actual.resize(r.size);
    absl::Status st = cu_.Check(cu_.cuMemcpyDtoH(actual.data(), g.address, r.size),
                                absl::StrCat("reading module variable '", r.name, "'"));
    if (!st.ok()) return Failed(st);
    auto [dtype, tol] = rule(r);
    RegionComparator cmp(dtype, tol);
    cmp.Compare(0, r.host_expected().data(), actual.data(), r.size);
    record(r, verdict(r, g.address, dtype, cmp.stats()));
    r.dirty |= r.written;
  }
  return absl::OkStatus();
}

absl::Status ResidentEvaluator::LoadBaseline(std::vector<std::string>* warnings) {
  if (baseline_ != nullptr) return absl::OkStatus();
  std::string name;
  KC_ASSIGN_OR_RETURN(std::string bytes, state_->session().CapturedImage(&name));
  auto b = std::make_unique<Candidate>(cu_, &lost_);
  absl::Status st = b->Load(std::move(bytes), state_->source().manifest().kernel().mangled_name(),
                            state_->session().info().device, /*captured_kernel=*/true);
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat("the captured code object ", name,
                                                " (the baseline of compare_original): ",
                                                st.message()));
  }
  std::vector<std::string> w;
  baseline_unbound_.clear();
  KC_ASSIGN_OR_RETURN(baseline_globals_, BindGlobals(*b, &baseline_unbound_, &w));
  for (std::string& x : w) warnings->push_back(absl::StrCat("baseline: ", x));
  absl::Status attr = state_->session().ApplyAttributesTo(b->function(), warnings);
  if (!attr.ok()) {
    return absl::Status(attr.code(), absl::StrCat("the captured function attributes do not "
                                                  "apply to the captured code object: ",
                                                  attr.message()));
  }
  baseline_ = std::move(b);
  return absl::OkStatus();
}

absl::Status ResidentEvaluator::LaunchAndValidate(const EvaluateRequest& request, CUfunction f,
                                                  const std::vector<GlobalSlot>& globals,
                                                  const std::vector<NotCompared>& unbound,
                                                  ValidationSummary* result,
                                                  EvaluateResult* totals) {
  KC_ASSIGN_OR_RETURN(uint64_t restored, state_->RestoreDirty(stream_));
  totals->restored_bytes += restored;
  KC_RETURN_IF_ERROR(RestoreGlobals(globals, /*dirty_only=*/false));
  KC_RETURN_IF_ERROR(EnsureEvents(2));
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventRecord(events_[0], stream_), "cuEventRecord"));
  absl::Status st = state_->session().LaunchFunctionAsync(f, stream_);
  if (!st.ok()) return Failed(st);
  state_->MarkWritten();
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventRecord(events_[1], stream_), "cuEventRecord"));
  KC_RETURN_IF_ERROR(Validate(request, globals, unbound, result));  // waits for the launch
  float ms = 0;
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventElapsedTime(&ms, events_[0], events_[1]),
                               "cuEventElapsedTime"));
  totals->kernel_total_ms += ms;  // a launch of the evaluation like any other
  return absl::OkStatus();
}

absl::Status ResidentEvaluator::Time(const EvaluateRequest& request, CUfunction f,
                                     const std::vector<GlobalSlot>& globals, bool baseline,
                                     L2Flusher* flusher, EvaluateResult* result,
                                     std::vector<double>* samples,
                                     std::vector<double>* baseline_samples) {
  const int total = request.warmup + request.iterations;
  if (total == 0) return absl::OkStatus();
  // What each launch must find pristine: the validation launch's dirty set.
  std::vector<const ResidentState::Region*> device, host;
  bool any_global = false;
  for (const ResidentState::Region& r : state_->regions()) {
    if (!r.dirty) continue;
    if (r.where == ResidentState::Where::kDevice) device.push_back(&r);
    if (r.where == ResidentState::Where::kHost) host.push_back(&r);
    any_global |= r.where == ResidentState::Where::kGlobal;
  }
  result->restore_each =
      request.restore_each.value_or(!device.empty() || !host.empty() || any_global);
  const size_t per = baseline ? 2 : 1;  // launches per iteration
  const size_t launches = per * static_cast<size_t>(total);
  KC_RETURN_IF_ERROR(EnsureEvents(2 * launches));
  // Launch n is the candidate's unless is_baseline[n]. ABBA: the candidate
  // first in even iterations, second in odd ones, so drift and any
  // advantage of going first or second fall on both.
  std::vector<bool> is_baseline(launches, false);
  for (size_t n = 0; n < launches; ++n) {
    const size_t it = n / per, k = n % per;
    is_baseline[n] = baseline && ((k == 0) != (it % 2 == 0));
    if (result->restore_each) {
      if (!host.empty()) {
        // Host memory cannot be restored in stream order: wait for the GPU.
        absl::Status st = cu_.Check(cu_.cuStreamSynchronize(stream_), "kernel execution");
        if (!st.ok()) return Failed(st);
        for (const ResidentState::Region* r : host) {
          std::memcpy(reinterpret_cast<void*>(r->replay_va), r->host_pristine.data(), r->size);
          result->restored_bytes += r->size;
        }
      }
      for (const ResidentState::Region* r : device) {
        KC_RETURN_IF_ERROR(state_->EnqueueRestore(*r, stream_));
        result->restored_bytes += r->size;
      }
      KC_RETURN_IF_ERROR(
          RestoreGlobals(is_baseline[n] ? baseline_globals_ : globals, /*dirty_only=*/true));
    }
    // Cold L2: after the restores, outside the events.
    if (flusher != nullptr) KC_RETURN_IF_ERROR(flusher->Flush(stream_));
    CUevent start = events_[2 * n], stop = events_[2 * n + 1];
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventRecord(start, stream_), "cuEventRecord"));
    // The baseline runs at the captured launch: what an overridden launch must beat.
    state_->session().set_use_captured_launch(is_baseline[n]);
    absl::Status st = state_->session().LaunchFunctionAsync(
        is_baseline[n] ? baseline_->function() : f, stream_);
    state_->session().set_use_captured_launch(false);
    if (!st.ok()) return Failed(st);
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventRecord(stop, stream_), "cuEventRecord"));
  }
  absl::Status st = cu_.Check(cu_.cuStreamSynchronize(stream_), "kernel execution");
  if (!st.ok()) return Failed(st);
  for (size_t n = 0; n < launches; ++n) {
    float ms = 0;
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventElapsedTime(&ms, events_[2 * n], events_[2 * n + 1]),
                                 "cuEventElapsedTime"));
    result->kernel_total_ms += ms;
    if (n / per < static_cast<size_t>(request.warmup)) continue;
    (is_baseline[n] ? baseline_samples : samples)->push_back(ms);
  }
  return absl::OkStatus();
}

absl::StatusOr<EvaluateResult> ResidentEvaluator::Evaluate(const EvaluateRequest& request) {
  if (lost_) return absl::FailedPreconditionError("the CUDA context is lost; restart the server");
  const auto t0 = Clock::now();
  ++evaluations_;
  ++failed_evaluations_;  // until it succeeds
  KC_RETURN_IF_ERROR(
      cu_.Check(cu_.cuCtxSetCurrent(state_->session().context()), "cuCtxSetCurrent"));
  EvaluateResult result;
  result.kernel = request.kernel.empty() ? state_->source().manifest().kernel().mangled_name()
                                         : request.kernel;
  result.warmup = request.warmup;

  // The request's launch (checked against the captured one; an empty
  // override puts the captured launch back).
  KC_RETURN_IF_ERROR(state_->session().SetLaunchOverride(request.launch));
  result.launch = state_->session().info().launch_override;
  KC_ASSIGN_OR_RETURN(std::string bytes, ReadCodeObject(request));
  Candidate cand(cu_, &lost_);
  KC_RETURN_IF_ERROR(cand.Load(std::move(bytes), result.kernel, state_->session().info().device,
                               /*captured_kernel=*/request.kernel.empty()));
  if (cand.kernel() != result.kernel) {
    result.warnings.push_back(absl::StrCat("the captured kernel ", result.kernel, " is ",
                                           cand.kernel(), " in the candidate (matched by its "
                                           "stable name)"));
    result.kernel = cand.kernel();
  }
  std::vector<NotCompared> unbound;
  KC_ASSIGN_OR_RETURN(std::vector<GlobalSlot> globals,
                      BindGlobals(cand, &unbound, &result.warnings));
  KC_RETURN_IF_ERROR(RestoreGlobals(globals, /*dirty_only=*/false));
  // The baseline before any launch (binding resets the variables' dirty marks).
  const bool compare = request.compare_original && request.iterations > 0;
  if (compare) {
    KC_RETURN_IF_ERROR(LoadBaseline(&result.warnings));
    KC_RETURN_IF_ERROR(RestoreGlobals(baseline_globals_, /*dirty_only=*/false));
    // The baseline is loaded once; this request's launch attributes apply to it too.
    KC_RETURN_IF_ERROR(state_->session().ApplyAttributesTo(baseline_->function(), &result.warnings));
  }
  absl::Status attr = state_->session().ApplyAttributesTo(cand.function(), &result.warnings);
  if (!attr.ok() && absl::StartsWith(attr.message(), "launch override")) return attr;
  if (!attr.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the captured function attributes do not apply to the candidate: ", attr.message()));
  }
  result.load_ms = MsSince(t0);
  result.moved = state_->session().info().moved;

  // The validation launch, from pristine state.
  KC_ASSIGN_OR_RETURN(uint64_t restored, state_->RestoreDirty(stream_));
  result.restored_bytes += restored;
  KC_RETURN_IF_ERROR(EnsureEvents(2));
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventRecord(events_[0], stream_), "cuEventRecord"));
  absl::Status st = state_->session().LaunchFunctionAsync(cand.function(), stream_);
  if (!st.ok()) {
    return Failed(
        absl::InvalidArgumentError(absl::StrCat("launching the candidate: ", st.message())));
  }
  state_->MarkWritten();
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventRecord(events_[1], stream_), "cuEventRecord"));
  result.validated = request.validate;
  KC_RETURN_IF_ERROR(Validate(request, globals, unbound, &result.validation));  // waits
  float launch_ms = 0;
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuEventElapsedTime(&launch_ms, events_[0], events_[1]),
                               "cuEventElapsedTime"));
  result.validation_launch_ms = launch_ms;
  result.kernel_total_ms = launch_ms;
  if (request.validate && request.launch.changes_shape() &&
      std::string(result.validation.verdict()) == "fail") {
    KC_RETURN_IF_ERROR(ProbeLaunchShape(request, &result));
  }
  if (compare && request.validate) {
    result.original_validation.emplace();
    state_->session().set_use_captured_launch(true);
    absl::Status ov = LaunchAndValidate(request, baseline_->function(), baseline_globals_,
                                        baseline_unbound_, &*result.original_validation, &result);
    state_->session().set_use_captured_launch(false);
    KC_RETURN_IF_ERROR(ov);
  }

  // The timing, with the persisting L2 reset and, when asked, a cold L2.
  std::vector<double> samples, baseline_samples;
  if (request.iterations + request.warmup > 0) {
    result.persisting_l2 = ResetPersistingL2(cu_, stream_);
    std::optional<L2Flusher> flusher;
    if (request.cold_l2) {
      absl::StatusOr<L2Flusher> f = L2Flusher::Create(cu_, state_->session().device());
      if (!f.ok()) {
        RestorePersistingL2Limit(cu_, result.persisting_l2);
        return f.status();
      }
      flusher.emplace(std::move(*f));
      result.cold_l2 = true;
      result.l2_flush_bytes = flusher->bytes();
    }
    result.protocol = absl::StrCat(
        "restore the regions the last launch changed (device to device, on the launch stream); ",
        flusher ? absl::StrCat("overwrite ", flusher->bytes(), " bytes (2x L2); ") : std::string(),
        "start event; launch; stop event (the events time the kernel alone)");
    absl::Status timed = Time(request, cand.function(), globals, compare,
                              flusher ? &*flusher : nullptr, &result, &samples, &baseline_samples);
    flusher.reset();
    RestorePersistingL2Limit(cu_, result.persisting_l2);
    KC_RETURN_IF_ERROR(timed);
    // After the timing: each binary once more from pristine state.
    if (request.validate && request.iterations > 0) {
      result.revalidation.emplace();
      KC_RETURN_IF_ERROR(LaunchAndValidate(request, cand.function(), globals, unbound,
                                           &*result.revalidation, &result));
      if (compare) {
        result.original_revalidation.emplace();
        state_->session().set_use_captured_launch(true);
        absl::Status orv =
            LaunchAndValidate(request, baseline_->function(), baseline_globals_,
                              baseline_unbound_, &*result.original_revalidation, &result);
        state_->session().set_use_captured_launch(false);
        KC_RETURN_IF_ERROR(orv);
      }
    }
  }
  if (compare) {
    result.compared = true;
    result.original_ms = ComputeBenchStats(baseline_samples);
    result.speedup = ComputeSpeedup(baseline_samples, samples);
  }
  if (samples.empty()) samples.push_back(launch_ms);
  result.kernel_ms = ComputeBenchStats(std::move(samples));
  cand.Unload();
  result.wall_ms = MsSince(t0);
  result.overhead_ms = result.wall_ms - result.kernel_total_ms;
  --failed_evaluations_;
  return result;
}

absl::Status ResidentEvaluator::ProbeLaunchShape(const EvaluateRequest& request,
                                                 EvaluateResult* result) {
  // The captured code object at the request's launch, then at the captured one.
  KC_RETURN_IF_ERROR(LoadBaseline(&result->warnings));
  KC_RETURN_IF_ERROR(RestoreGlobals(baseline_globals_, /*dirty_only=*/false));
  KC_RETURN_IF_ERROR(state_->session().ApplyAttributesTo(baseline_->function(), &result->warnings));
  ValidationSummary at_override, at_captured;
  KC_RETURN_IF_ERROR(LaunchAndValidate(request, baseline_->function(), baseline_globals_,
                                       baseline_unbound_, &at_override, result));
  state_->session().set_use_captured_launch(true);
  absl::Status st = LaunchAndValidate(request, baseline_->function(), baseline_globals_,
                                      baseline_unbound_, &at_captured, result);
  state_->session().set_use_captured_launch(false);
  KC_RETURN_IF_ERROR(st);
  result->validation.shape_probe = {{"captured_code_at_override", at_override.verdict()},
                                    {"captured_code_at_captured_launch", at_captured.verdict()}};
  result->validation.launch_shape_dependent = at_captured.passed() && !at_override.passed();
  return absl::OkStatus();
}

}  // namespace kerncap::replay::serve
