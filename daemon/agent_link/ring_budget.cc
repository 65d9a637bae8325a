#include "daemon/agent_link/ring_budget.h"

#include <algorithm>

namespace kerncap::link {

uint64_t RingBudget::FitRingBytes(uint64_t free_bytes, uint64_t slot_size, uint32_t slot_count) {
  if (slot_size == 0) return 0;
  const uint64_t bytes = std::min<uint64_t>(slot_count, free_bytes / slot_size) * slot_size;
  return bytes < 2 * slot_size ? 0 : bytes;
}

RingBudget::RingBudget(uint64_t max_total_bytes) : max_total_bytes_(max_total_bytes) {}

void RingBudget::set_max_total_bytes(uint64_t max_total_bytes) {
  absl::MutexLock lock(&mu_);
  max_total_bytes_ = max_total_bytes;
}

void RingBudget::set_max_pinned_share(double share) {
  absl::MutexLock lock(&mu_);
  max_pinned_share_ = std::clamp(share, 0.0, 1.0);
}

uint64_t RingBudget::FreeLocked() const {
  return max_total_bytes_ > in_use_ ? max_total_bytes_ - in_use_ : 0;
}

uint64_t RingBudget::TakeLocked(uint64_t slot_size, uint32_t slot_count) {
  const uint64_t bytes = FitRingBytes(FreeLocked(), slot_size, slot_count);
  in_use_ += bytes;
  return bytes;
}

uint64_t RingBudget::Charge(uint64_t slot_size, uint32_t slot_count, const Reclaim& reclaim,
                            absl::Duration reclaim_timeout, bool pinned) {
  const uint64_t want = slot_size * slot_count;
  absl::MutexLock lock(&mu_);
  if (max_total_bytes_ == 0) {
    in_use_ += want;
    if (pinned) pinned_in_use_ += want;
    return want;
  }
  if (pinned) {
    const uint64_t cap =
        static_cast<uint64_t>(static_cast<double>(max_total_bytes_) * max_pinned_share_);
    const uint64_t pinned_free = cap > pinned_in_use_ ? cap - pinned_in_use_ : 0;
    const uint64_t bytes =
        FitRingBytes(std::min(FreeLocked(), pinned_free), slot_size, slot_count);
    in_use_ += bytes;
    pinned_in_use_ += bytes;
    return bytes;
  }
  if (FreeLocked() >= want || !reclaim) return TakeLocked(slot_size, slot_count);
  // A capture needs staging the budget does not have: the caller asks idle
  // rings back first, without the lock (their owners uncharge through it).
  const uint64_t shortfall = want - FreeLocked();
  mu_.Unlock();
  const uint64_t asked = reclaim(shortfall);
  mu_.Lock();
  if (asked > 0) {
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return FreeLocked() >= want; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), reclaim_timeout);
  }
  return TakeLocked(slot_size, slot_count);
}

void RingBudget::Uncharge(uint64_t bytes, bool pinned) {
  absl::MutexLock lock(&mu_);
  in_use_ -= std::min(in_use_, bytes);
  if (pinned) pinned_in_use_ -= std::min(pinned_in_use_, bytes);
}

uint64_t RingBudget::InUse() {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

uint64_t RingBudget::PinnedInUse() {
  absl::MutexLock lock(&mu_);
  return pinned_in_use_;
}

uint64_t RingBudget::max_total_bytes() {
  absl::MutexLock lock(&mu_);
  return max_total_bytes_;
}

}  // namespace kerncap::link
