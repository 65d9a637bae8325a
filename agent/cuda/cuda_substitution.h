// cuda_substitution.h: live substitution for the CUDA agent (feature
// "substitution", common/agent_link/messages.h; the policy is the
// backend-neutral SubstitutionTable, agent/link/substitution_table.h).
//
// At the first dispatch a substitution selects (in that launch's ENTER
// callback, where the application's context is current):
//   - the variant's code object is loaded with cuModuleLoadData into that
//     context (cubin, fatbin, or PTX which the driver JIT-compiles), and its
//     function of the dispatch's mangled name looked up;
//   - its parameter layout (cuFuncGetParamInfo) is compared with the
//     original's: same count, offsets and sizes (CompareParamLayouts). An
//     original whose layout the driver does not report (drivers before
//     12.4) is refused: the check cannot be made.
//   Any failure refuses the substitution; nothing is substituted.
// Then, for each dispatch the table decides to substitute, the launch's
// function in the CUPTI ENTER parameters is overwritten with the variant's
// (SetLaunchFunction), so the driver launches the variant with the
// application's arguments, grid and stream. Dispatches in another context,
// and launches into a stream that is being captured into a graph (the
// variant would be baked into the application's graph), are left alone.
//
// ab: every second matching dispatch runs the variant; every matching
// dispatch is timed with two events recorded on its stream around the launch
// (ENTER / EXIT). The events are read later on the substituter's thread
// (cuEventQuery, never blocking the application), which also sends the
// reports and notices the TTL.
//
// What this cannot do: undo a fault. A variant that faults makes the
// context's error sticky; every later CUDA call of the application fails.
// Hence the preflight in the reproducer (kerncapctl substitute --preflight).
// A variant launch the driver refuses (too many resources) fails the
// application's launch call (the agent cannot change a call's return value);
// the substitution ends there.
#ifndef KERNCAP_AGENT_CUDA_CUDA_SUBSTITUTION_H_
#define KERNCAP_AGENT_CUDA_CUDA_SUBSTITUTION_H_

#include <cuda.h>
#include <cupti.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/cuda/kernel_info.h"
#include "agent/link/substitution_table.h"

namespace kerncap::agent::cuda {

class CudaSubstituter {
 public:
  struct Hooks {
    // Sends a report to the daemon (any thread).
    std::function<void(const link::SubstitutionReportMsg&)> send_report;
    // Launch callbacks must stay on (true) / may go off again (false).
    std::function<void(bool)> hold_launch_callbacks;
    // Brackets the agent's own driver calls (not tracked as the application's).
    std::function<void()> enter_agent_scope, exit_agent_scope;
  };
  CudaSubstituter(KernelInfoCache* kernels, Hooks hooks, uint32_t pid, std::string process_name);
  ~CudaSubstituter();

  // The link's hooks (link thread).
  link::LinkStatus OnSubstitute(const link::SubstituteMsg& msg, std::string code_object);
  void OnUnsubstitute(const link::UnsubstituteMsg& msg);
  void OnLinkLost();

  // Any substitution pending or active (one atomic load).
  bool live() const { return table_.live(); }

  // A kernel launch's ENTER (the agent's scope is already entered by the
  // caller): may swap the launched function. Returns a nonzero cookie when
  // the EXIT must be seen (OnLaunchExit).
  uint64_t OnLaunchEnter(CUpti_CallbackId cbid, const CUpti_CallbackData* cb);
  void OnLaunchExit(uint64_t cookie, const CUpti_CallbackData* cb);

  // Fork child: nothing carries over (no thread, no link).
  void ResetAfterFork();

 private:
  struct Timed;  // one timed dispatch: its events, in flight
  void StartThreadLocked();
  void Run();
  void PollEvents(bool wait);

  KernelInfoCache* kernels_;
  Hooks hooks_;
  SubstitutionTable table_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool running_ = false;  // guarded by mu_
  bool stop_ = false;     // guarded by mu_
  bool holding_ = false;  // guarded by mu_: hold_launch_callbacks(true) in effect
  std::vector<Timed*> in_flight_;  // guarded by mu_: recorded, not yet read
  // Dispatches between their ENTER and EXIT: the thread (and with it the
  // hold on the launch callbacks) stays until they are through.
  std::atomic<int> entered_{0};
};

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_CUDA_SUBSTITUTION_H_
