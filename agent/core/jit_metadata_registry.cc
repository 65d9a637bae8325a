#include "agent/core/jit_metadata_registry.h"

#include <new>
#include <utility>

namespace kerncap::agent {

JitMetadataRegistry::SetResult JitMetadataRegistry::Set(const std::string& kernel_name,
                                                        std::string json) {
  if (kernel_name.empty()) return SetResult::kEmptyName;
  if (json.size() > kMaxJsonBytes) return SetResult::kTooLarge;
  std::lock_guard lock(mu_);
  const uint64_t gen = ++next_generation_;
  entries_[kernel_name] = Entry{std::move(json), gen};
  order_.emplace_back(kernel_name, gen);
  // Drop the oldest live entries; stale order records (replaced entries) go
  // on the way. The deque never holds more than twice the live entries.
  while (entries_.size() > kMaxEntries || order_.size() > 2 * kMaxEntries) {
    auto [name, g] = order_.front();
    order_.pop_front();
    auto it = entries_.find(name);
    if (it != entries_.end() && it->second.generation == g) entries_.erase(it);
  }
  return SetResult::kOk;
}

int JitMetadataRegistry::SetFromC(const char* kernel_name, const char* json) noexcept {
  if (kernel_name == nullptr || json == nullptr) return 1;
  try {
    switch (Set(kernel_name, json)) {
      case SetResult::kOk: return 0;
      case SetResult::kEmptyName: return 1;
      case SetResult::kTooLarge: return 2;
    }
  } catch (const std::bad_alloc&) {
    return 3;
  }
  return 1;
}

std::string JitMetadataRegistry::Lookup(const std::string& kernel_name) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(kernel_name);
  return it == entries_.end() ? std::string() : it->second.json;
}

size_t JitMetadataRegistry::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void JitMetadataRegistry::ResetAfterFork() {
  // The child keeps the parent's metadata (its kernels are the same), only
  // the lock is rebuilt.
  new (&mu_) std::mutex();
}

}  // namespace kerncap::agent
