#include "daemon/store/gc_pins.h"

namespace kerncap::store {

void GcPins::Register(const void* owner) {
  absl::MutexLock l(&mu_);
  refs_[owner];
}

void GcPins::Unregister(const void* owner) {
  absl::MutexLock l(&mu_);
  auto it = refs_.find(owner);
  if (it == refs_.end()) return;
  // A GC that is marking may not have seen this capture's manifest; keep
  // what it referenced alive for that GC.
  if (marking_) seen_.insert(it->second.begin(), it->second.end());
  refs_.erase(it);
}

void GcPins::Note(const void* owner, const Digest& d) {
  absl::MutexLock l(&mu_);
  if (owner != nullptr) refs_[owner].insert(d);
  if (marking_) seen_.insert(d);
}

int GcPins::owners() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(refs_.size());
}

void GcPins::BeginMark() {
  absl::MutexLock l(&mu_);
  marking_ = true;
  seen_.clear();
}

void GcPins::EndMark() {
  absl::MutexLock l(&mu_);
  marking_ = false;
  seen_.clear();
}

void GcPins::Sweep(absl::flat_hash_set<Digest>& live, absl::FunctionRef<void()> sweep) {
  absl::MutexLock l(&mu_);
  for (const auto& [owner, refs] : refs_) live.insert(refs.begin(), refs.end());
  live.insert(seen_.begin(), seen_.end());
  sweep();
  marking_ = false;
  seen_.clear();
}

}  // namespace kerncap::store
