// ring_budget.h: the bound on the memory of all agent rings together
// (AgentLinkServerOptions::max_total_ring_bytes), as bytes charged and
// uncharged. A ring asked for when the budget is short gets the most slots
// that fit (at least 2); which idle rings to ask back when not even that
// fits is the caller's business (it knows the connections): Charge calls it
// back without the lock held.
//
// Thread-safety: all methods are thread-safe.
#ifndef KERNCAP_DAEMON_AGENT_LINK_RING_BUDGET_H_
#define KERNCAP_DAEMON_AGENT_LINK_RING_BUDGET_H_

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kerncap::link {

class RingBudget {
 public:
  // Asks idle rings back to free `shortfall` bytes; returns the bytes asked
  // back (0: nobody to ask). Their owners uncharge them when they go.
  using Reclaim = std::function<uint64_t(uint64_t shortfall)>;

  // The bytes of the largest ring of `slot_size` slots, between 2 and
  // `slot_count` of them, that fits in `free_bytes`; 0 when not even 2 fit.
  static uint64_t FitRingBytes(uint64_t free_bytes, uint64_t slot_size, uint32_t slot_count);

  explicit RingBudget(uint64_t max_total_bytes = 0);  // 0: no bound
  RingBudget(const RingBudget&) = delete;
  RingBudget& operator=(const RingBudget&) = delete;

  // Sets the bound (before any ring is charged).
  void set_max_total_bytes(uint64_t max_total_bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Rings charged as pinned (their owners cannot be asked to give them back)
  // together hold at most `share` (0..1) of a bounded budget, so rings that
  // captures can reclaim always have the rest.
  void set_max_pinned_share(double share) ABSL_LOCKS_EXCLUDED(mu_);

  // Charges the bytes of a ring of `slot_size` * `slot_count` (all of them
  // without a bound) or, when the budget is short, of the largest ring of at
  // least 2 slots that fits (FitRingBytes); 0 when none does (nothing
  // charged). With `reclaim` set and less than a full ring free, it is
  // called first with the shortfall and, when it asked for anything, the
  // full ring is waited for up to `reclaim_timeout`.
  // A pinned ring fits in what is left of the pinned share as well and
  // never reclaims.
  uint64_t Charge(uint64_t slot_size, uint32_t slot_count, const Reclaim& reclaim,
                  absl::Duration reclaim_timeout, bool pinned = false) ABSL_LOCKS_EXCLUDED(mu_);
  // Returns bytes a Charge gave (never below zero in all).
  void Uncharge(uint64_t bytes, bool pinned = false) ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t InUse() ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t PinnedInUse() ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t max_total_bytes() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  uint64_t FreeLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t TakeLocked(uint64_t slot_size, uint32_t slot_count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  uint64_t max_total_bytes_ ABSL_GUARDED_BY(mu_);
  uint64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  double max_pinned_share_ ABSL_GUARDED_BY(mu_) = 1.0;
  uint64_t pinned_in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kerncap::link

#endif  // KERNCAP_DAEMON_AGENT_LINK_RING_BUDGET_H_
