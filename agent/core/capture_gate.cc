#include "agent/core/capture_gate.h"

#include <new>

namespace kerncap::agent {

void CaptureGate::EnterShared() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !exclusive_ && writers_waiting_ == 0; });
  ++shared_;
}

void CaptureGate::ExitShared() {
  std::lock_guard lock(mu_);
  if (shared_ > 0) --shared_;
  if (shared_ == 0) cv_.notify_all();
}

bool CaptureGate::TryEnterExclusive(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  ++writers_waiting_;
  bool got = cv_.wait_for(lock, timeout, [&] { return !exclusive_ && shared_ == 0; });
  --writers_waiting_;
  if (got) {
    exclusive_ = true;
  } else {
    cv_.notify_all();  // shared callers blocked by our wait may go now
  }
  return got;
}

void CaptureGate::ExitExclusive() {
  std::lock_guard lock(mu_);
  exclusive_ = false;
  cv_.notify_all();
}

int CaptureGate::shared_count() const {
  std::lock_guard lock(mu_);
  return shared_;
}

bool CaptureGate::exclusive() const {
  std::lock_guard lock(mu_);
  return exclusive_;
}

void CaptureGate::ResetAfterFork() {
  // The mutex may have been held by a parent thread that does not exist in
  // the child: rebuild the primitives in place instead of locking them.
  mu_.~mutex();
  new (&mu_) std::mutex();
  cv_.~condition_variable();
  new (&cv_) std::condition_variable();
  shared_ = 0;
  writers_waiting_ = 0;
  exclusive_ = false;
}

}  // namespace kerncap::agent
