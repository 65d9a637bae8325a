// callback_toggle.h: switches the agent's armed-only CUPTI callbacks on and
// off as arms come and go, so that an unarmed process pays nothing for its
// kernel launches (CUPTI calling back on every launch is the unarmed cost).
//
// The always-on callbacks (allocations, modules, resources, stream capture)
// are never touched here; `switch_fn(true)` enables everything the armed path
// needs (every driver call passes the capture gate), `switch_fn(false)`
// disables all but the always-on set.
//
// Pairing rules (why this is more than a flag):
//   - Enabling happens at once. A driver call that entered before and exits
//     after sees an EXIT without an ENTER: the agent only trusts what its own
//     ENTER recorded (per thread), so such an EXIT is ignored.
//   - Disabling never happens while an armed ENTER is in flight (a shared gate
//     hold or a capture): its EXIT would never come, leaking the gate or the
//     capture. Disarming closes the armed path at once (BeginCall() fails) and
//     the callbacks go off when the last in-flight call has exited, on that
//     thread (FinishPending()), or at once when none is in flight.
//
// Thread-safe. BeginCall/EndCall/FinishPending are the hot-path calls (one or
// two atomics); Update() takes a mutex and may call switch_fn.
#ifndef KERNCAP_AGENT_CUDA_CALLBACK_TOGGLE_H_
#define KERNCAP_AGENT_CUDA_CALLBACK_TOGGLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>

namespace kerncap::agent::cuda {

class CallbackToggle {
 public:
  // Returns false when switching failed (the state is then kept as it was
  // and retried on the next Update()).
  using SwitchFn = std::function<bool(bool on)>;

  // Starts "on" (the callbacks are all enabled at subscription), following
  // `source`, which must outlive the toggle (or be replaced with SetSource).
  // The armed callbacks are wanted while the source is above zero (a count
  // of reasons: an arm, captures in flight).
  CallbackToggle(SwitchFn switch_fn, const std::atomic<int>* source);

  // The count that says whether the armed callbacks are wanted; re-evaluates.
  void SetSource(const std::atomic<int>* source);
  // Re-reads the source and switches if needed (call whenever it changed).
  void Update();

  // Hot path, armed ENTER: true when the armed path is open; then the call
  // counts as in flight until EndCall(). False: nothing to undo.
  bool BeginCall();
  // The matching EXIT (or an ENTER that ended up holding nothing).
  void EndCall();
  // Cheap check to call from any callback: completes a deferred switch-off.
  void FinishPending() {
    if (pending_off_.load(std::memory_order_relaxed)) TryFinishOff();
  }

  bool on() const;           // callbacks currently switched on
  bool open() const { return open_.load(std::memory_order_acquire); }
  int64_t in_flight() const { return inflight_.load(); }
  uint64_t switches() const { return switches_.load(); }

  // Fork child: no call is in flight on the single surviving thread.
  void ResetAfterFork();

 private:
  void ApplyLocked();
  void TryFinishOff();

  SwitchFn switch_fn_;
  mutable std::mutex mu_;
  bool on_ = true;  // guarded by mu_
  std::atomic<const std::atomic<int>*> source_;
  std::atomic<bool> open_{true};
  std::atomic<bool> pending_off_{false};
  std::atomic<int64_t> inflight_{0};
  std::atomic<uint64_t> switches_{0};
};

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_CALLBACK_TOGGLE_H_
