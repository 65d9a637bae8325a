#include "agent/cuda/cuda_substitution.h"

#include <chrono>

#include "agent/core/log.h"
#include "agent/cuda/cupti_api.h"
#include "agent/cuda/driver_api.h"
#include "agent/cuda/launch_decoder.h"
#include "agent/cuda/param_blob.h"
#include "common/cuda/cubin_elf.h"

namespace kerncap::agent::cuda {
namespace {

// A variant loaded into one context.
struct CudaVariant : SubstitutionVariant {
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  // The module stays loaded for the life of the process: a launch of it may
  // still be queued when the substitution ends, and an unload would have to
  // wait for it inside whatever thread drops the last reference.
};

// The variant's dispatch the ENTER decided about, until its EXIT.
struct Pending {
  std::string sub_id;
  bool variant = false;
  bool timed = false;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  CUevent start = nullptr;
  CUevent end = nullptr;
};

}  // namespace

struct CudaSubstituter::Timed : Pending {};

CudaSubstituter::CudaSubstituter(KernelInfoCache* kernels, Hooks hooks, uint32_t pid,
                                 std::string process_name)
    : kernels_(kernels), hooks_(std::move(hooks)), table_(pid, std::move(process_name)) {}

CudaSubstituter::~CudaSubstituter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

link::LinkStatus CudaSubstituter::OnSubstitute(const link::SubstituteMsg& msg,
                                               std::string code_object) {
  using link::CodeObjectFormat;
  if (msg.format != CodeObjectFormat::kCubin && msg.format != CodeObjectFormat::kFatbin &&
      msg.format != CodeObjectFormat::kPtx) {
    return link::LinkStatus::Error("unsupported code object format '" +
                                   std::string(link::WireName(msg.format)) +
                                   "' (cubin, fatbin or ptx)");
  }
  // cuModuleLoadData reads PTX as a NUL-terminated string.
  if (msg.format == CodeObjectFormat::kPtx && (code_object.empty() || code_object.back() != '\0')) {
    code_object.push_back('\0');
  }
  link::LinkStatus st = table_.Add(msg, std::move(code_object), SubstitutionTable::Clock::now());
  if (!st.ok()) return st;
  KC_ALOG(kInfo, "substitution %s: %s for kernels matching '%s'%s", msg.sub_id.c_str(),
          msg.name.c_str(), msg.kernel.c_str(), msg.ab ? " (A/B)" : "");
  std::lock_guard lock(mu_);
  StartThreadLocked();
  return st;
}

void CudaSubstituter::OnUnsubstitute(const link::UnsubstituteMsg& msg) {
  if (table_.Remove(msg.sub_id, msg.reason)) {
    KC_ALOG(kInfo, "substitution %s ended: %s", msg.sub_id.c_str(),
            std::string(link::WireName(msg.reason)).c_str());
  }
  cv_.notify_all();
}

void CudaSubstituter::OnLinkLost() {
  if (table_.live()) KC_ALOG(kInfo, "daemon link lost: every substitution ends");
  table_.DropAll();
  cv_.notify_all();
}

void CudaSubstituter::StartThreadLocked() {
  if (running_) return;
  if (thread_.joinable()) thread_.join();  // an earlier run that finished
  if (!holding_ && hooks_.hold_launch_callbacks) {
    hooks_.hold_launch_callbacks(true);
    holding_ = true;
  }
  running_ = true;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

uint64_t CudaSubstituter::OnLaunchEnter(CUpti_CallbackId cbid, const CUpti_CallbackData* cb) {
  std::optional<LaunchCall> call = DecodeLaunch(cbid, cb->functionParams);
  if (!call || call->function == nullptr || cb->context == nullptr) return 0;
  const CUstream stream = LaunchStream(*call);
  // Recorded into a graph: the application's graph would keep the variant.
  if (StreamBeingCaptured(stream)) return 0;
  std::shared_ptr<const KernelInfo> info = kernels_->Get(call->function, cb->symbolName);
  uint32_t device_id = 0;
  if (Cupti().cuptiGetDeviceId(cb->context, &device_id) != CUPTI_SUCCESS) device_id = 0;
  const CUcontext ctx = cb->context;

  auto prepare = [&](const link::SubstituteMsg& msg, const std::string& image,
                     std::string_view mangled) -> link::LinkResult<SubstitutionTable::Prepared> {
    SubstitutionTable::Prepared p;
    if (!info->params_known) {
      return link::LinkStatus::Error(
          "the driver does not report the original kernel's parameter layout (needs CUDA 12.4 "
          "or later): the variant's layout cannot be checked, so it is not substituted");
    }
    if (msg.format == link::CodeObjectFormat::kCubin) {
      auto parsed = cubin::ParseCubin(image);
      if (!parsed.ok()) return link::LinkStatus::Error("the cubin does not parse: " + parsed.error());
      bool found = false;
      for (const std::string& k : parsed->kernels) found = found || k == mangled;
      if (!found) {
        return link::LinkStatus::Error("the cubin has no kernel named " + std::string(mangled));
      }
      p.checks.push_back("cubin parsed; it has the kernel " + std::string(mangled) +
                         (parsed->sm != 0 ? " (sm_" + std::to_string(parsed->sm) + ")" : ""));
    }
    auto v = std::make_shared<CudaVariant>();
    v->context = ctx;
    CUresult r = Driver().cuModuleLoadData(&v->module, image.data());
    if (r != CUDA_SUCCESS) {
      return link::LinkStatus::Error("loading the " + std::string(link::WireName(msg.format)) + " into the application's " +
                                     "context failed: " + CuErrorString(r));
    }
    p.checks.push_back("loaded into the application's context with cuModuleLoadData");
    r = Driver().cuModuleGetFunction(&v->function, v->module, std::string(mangled).c_str());
    if (r != CUDA_SUCCESS) {
      return link::LinkStatus::Error("the variant has no kernel named " + std::string(mangled) +
                                     ": " + CuErrorString(r));
    }
    std::shared_ptr<const KernelInfo> vinfo = kernels_->Get(v->function, nullptr);
    if (!vinfo->params_known) {
      return link::LinkStatus::Error("the driver does not report the variant's parameter layout");
    }
    const std::string diff = CompareParamLayouts(info->params, vinfo->params);
    if (!diff.empty()) return link::LinkStatus::Error("parameter layouts differ: " + diff);
    p.checks.push_back("parameter layout matches the original's (" +
                       std::to_string(info->params.size()) +
                       " parameters, offsets and sizes from cuFuncGetParamInfo)");
    p.variant = std::move(v);
    return p;
  };
  auto accepts = [ctx](const SubstitutionVariant& v) {
    return static_cast<const CudaVariant&>(v).context == ctx;
  };
  // Counted before the decision, so the thread cannot stop (and the launch
  // callbacks go off) between a decision and this launch's EXIT.
  entered_.fetch_add(1);
  std::optional<SubstitutionTable::Decision> d =
      table_.Decide(info->demangled_name, info->mangled_name, static_cast<int32_t>(device_id),
                    SubstitutionTable::Clock::now(), prepare, accepts);
  if (!d) {
    entered_.fetch_sub(1);
    return 0;
  }
  auto* t = new Timed();
  t->sub_id = d->sub_id;
  t->variant = d->use_variant;
  t->context = ctx;
  t->stream = stream;
  if (d->use_variant) {
    const auto& v = static_cast<const CudaVariant&>(*d->variant);
    SetLaunchFunction(cbid, const_cast<void*>(cb->functionParams), v.function);
  }
  if (d->timed) {
    if (Driver().cuEventCreate(&t->start, CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
        Driver().cuEventCreate(&t->end, CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
        Driver().cuEventRecord(t->start, stream) == CUDA_SUCCESS) {
      t->timed = true;
    } else {
      if (t->start != nullptr) Driver().cuEventDestroy(t->start);
      if (t->end != nullptr) Driver().cuEventDestroy(t->end);
      t->start = t->end = nullptr;
      table_.TimingFailed(t->sub_id);
    }
  }
  return reinterpret_cast<uint64_t>(t);
}

void CudaSubstituter::OnLaunchExit(uint64_t cookie, const CUpti_CallbackData* cb) {
  auto* t = reinterpret_cast<Timed*>(cookie);
  const CUresult r = cb->functionReturnValue != nullptr
                         ? *static_cast<const CUresult*>(cb->functionReturnValue)
                         : CUDA_ERROR_UNKNOWN;
  if (t->variant && r != CUDA_SUCCESS) {
    const std::string why = "the driver refused to launch the variant (" + CuErrorString(r) +
                            "; the application's launch call returned that error)";
    KC_ALOG(kError, "substitution %s: %s", t->sub_id.c_str(), why.c_str());
    table_.Fail(t->sub_id, why);
  }
  if (t->timed && r == CUDA_SUCCESS && Driver().cuEventRecord(t->end, t->stream) == CUDA_SUCCESS) {
    std::lock_guard lock(mu_);
    in_flight_.push_back(t);
    entered_.fetch_sub(1);
    StartThreadLocked();  // no-op while it runs; else it reads these events and stops again
    cv_.notify_all();
    return;
  }
  if (t->timed) {
    table_.TimingFailed(t->sub_id);
    Driver().cuEventDestroy(t->start);
    Driver().cuEventDestroy(t->end);
  }
  delete t;
  entered_.fetch_sub(1);
}

void CudaSubstituter::PollEvents(bool wait) {
  std::vector<Timed*> polling;
  {
    std::lock_guard lock(mu_);
    polling.swap(in_flight_);
  }
  if (polling.empty()) return;
  std::vector<Timed*> still;
  if (hooks_.enter_agent_scope) hooks_.enter_agent_scope();
  for (Timed* t : polling) {
    if (Driver().cuCtxPushCurrent(t->context) != CUDA_SUCCESS) {
      table_.TimingFailed(t->sub_id);
      delete t;  // the context is gone, and its events with it
      continue;
    }
    CUresult q = wait ? Driver().cuEventSynchronize(t->end) : Driver().cuEventQuery(t->end);
    if (q == CUDA_ERROR_NOT_READY) {
      still.push_back(t);
    } else {
      float ms = 0;
      if (q == CUDA_SUCCESS && Driver().EventElapsedTime != nullptr &&
          Driver().EventElapsedTime(&ms, t->start, t->end) == CUDA_SUCCESS) {
        table_.AddTiming(t->sub_id, t->variant, static_cast<double>(ms) * 1000.0);
      } else {
        table_.TimingFailed(t->sub_id);
      }
      Driver().cuEventDestroy(t->start);
      Driver().cuEventDestroy(t->end);
      delete t;
    }
    CUcontext popped = nullptr;
    Driver().cuCtxPopCurrent(&popped);
  }
  if (hooks_.exit_agent_scope) hooks_.exit_agent_scope();
  std::lock_guard lock(mu_);
  in_flight_.insert(in_flight_.begin(), still.begin(), still.end());
}

void CudaSubstituter::Run() {
  auto send = [this](bool force) {
    for (const link::SubstitutionReportMsg& r :
         table_.TakeReports(SubstitutionTable::Clock::now(), force)) {
      if (hooks_.send_report) hooks_.send_report(r);
    }
  };
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      if (stop_) break;
    }
    PollEvents(/*wait=*/false);
    send(/*force=*/false);
    std::lock_guard lock(mu_);
    if (!table_.live() && in_flight_.empty() && entered_.load() == 0) break;
  }
  // Ended: the timings of the last dispatches, then the final report.
  PollEvents(/*wait=*/true);
  send(/*force=*/true);
  bool release = false;
  {
    std::lock_guard lock(mu_);
    running_ = false;
    release = holding_;
    holding_ = false;
  }
  if (release && hooks_.hold_launch_callbacks) hooks_.hold_launch_callbacks(false);
}

void CudaSubstituter::ResetAfterFork() {
  // The thread did not survive the fork; its handle must not be joined.
  new (&thread_) std::thread();
  new (&mu_) std::mutex();
  new (&cv_) std::condition_variable();
  running_ = false;
  holding_ = false;
  in_flight_.clear();
  entered_.store(0);
  table_.ResetAfterFork();
}

}  // namespace kerncap::agent::cuda
