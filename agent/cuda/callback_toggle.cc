#include "agent/cuda/callback_toggle.h"

#include <new>
#include <utility>

namespace kerncap::agent::cuda {

CallbackToggle::CallbackToggle(SwitchFn switch_fn, const std::atomic<int>* source)
    : switch_fn_(std::move(switch_fn)), source_(source) {}

void CallbackToggle::SetSource(const std::atomic<int>* source) {
  source_.store(source);
  Update();
}

void CallbackToggle::Update() {
  std::lock_guard lock(mu_);
  ApplyLocked();
}

void CallbackToggle::ApplyLocked() {
  const std::atomic<int>* src = source_.load();
  const bool want = src != nullptr && src->load() > 0;
  if (want) {
    pending_off_.store(false);
    if (!on_) {
      if (!switch_fn_(true)) return;  // stays closed; the next Update retries
      on_ = true;
      switches_.fetch_add(1);
    }
    open_.store(true);  // only once the callbacks are on: every ENTER then has its EXIT
    return;
  }
  // Close first, then look at the calls in flight (both sequentially
  // consistent, against BeginCall's increment-then-check): either this sees
  // the in-flight call, or that call sees the path closed.
  open_.store(false);
  pending_off_.store(true);
  if (!on_) {
    pending_off_.store(false);
    return;
  }
  if (inflight_.load() != 0) return;  // the last EndCall finishes
  if (!switch_fn_(false)) return;     // stays pending; retried from FinishPending
  on_ = false;
  pending_off_.store(false);
  switches_.fetch_add(1);
}

bool CallbackToggle::BeginCall() {
  inflight_.fetch_add(1);
  if (open_.load()) return true;
  EndCall();
  return false;
}

void CallbackToggle::EndCall() {
  if (inflight_.fetch_sub(1) == 1 && pending_off_.load()) TryFinishOff();
}

void CallbackToggle::TryFinishOff() {
  // Inside a driver callback: never wait for Update() (it may be switching).
  // If it holds the lock it re-checks on its own, or a later callback does.
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  if (!pending_off_.load()) return;
  ApplyLocked();
}

bool CallbackToggle::on() const {
  std::lock_guard lock(mu_);
  return on_;
}

void CallbackToggle::ResetAfterFork() {
  new (&mu_) std::mutex();
  inflight_.store(0);
  std::lock_guard lock(mu_);
  ApplyLocked();
}

}  // namespace kerncap::agent::cuda
