#include "agent/core/allocation_table.h"

#include <mutex>
#include <new>

namespace kerncap::agent {

const char* AllocationKindName(AllocationKind kind) {
  switch (kind) {
    case AllocationKind::kDevice: return "device";
    case AllocationKind::kDeviceAsync: return "device_async";
    case AllocationKind::kVmmMapping: return "vmm_mapping";
    case AllocationKind::kManaged: return "managed";
    case AllocationKind::kHostPinned: return "host_pinned";
    case AllocationKind::kHostRegistered: return "host_registered";
  }
  return "unknown";
}

bool IsHostKind(AllocationKind kind) {
  return kind == AllocationKind::kHostPinned || kind == AllocationKind::kHostRegistered;
}

size_t AllocationTable::Insert(const Allocation& allocation) {
  if (allocation.size == 0) return 0;
  std::unique_lock lock(mu_);
  // Whole stale entries go: the driver reused part of their range, so all of
  // each was freed (trimming would keep ranges that no longer exist).
  size_t dropped = 0;
  auto it = by_start_.upper_bound(allocation.va);
  if (it != by_start_.begin()) --it;
  while (it != by_start_.end() && it->first < allocation.end()) {
    if (it->second.end() > allocation.va) {
      it = by_start_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  by_start_[allocation.va] = allocation;
  return dropped;
}

bool AllocationTable::Erase(uint64_t va) {
  std::unique_lock lock(mu_);
  return by_start_.erase(va) > 0;
}

size_t AllocationTable::EraseRange(uint64_t va, uint64_t size) {
  if (size == 0) return 0;
  std::unique_lock lock(mu_);
  return EraseRangeLocked(va, size);
}

size_t AllocationTable::EraseRangeLocked(uint64_t va, uint64_t size) {
  const uint64_t end = va + size;
  size_t touched = 0;
  // Start at the last entry beginning at or before va: it may straddle va.
  auto it = by_start_.upper_bound(va);
  if (it != by_start_.begin()) --it;
  while (it != by_start_.end() && it->first < end) {
    Allocation a = it->second;
    if (a.end() <= va) {
      ++it;
      continue;
    }
    ++touched;
    it = by_start_.erase(it);
    // Keep the parts outside [va, end).
    if (a.va < va) {
      Allocation head = a;
      head.size = va - a.va;
      by_start_[head.va] = head;
    }
    if (a.end() > end) {
      Allocation tail = a;
      tail.va = end;
      tail.size = a.end() - end;
      it = by_start_.emplace(tail.va, tail).first;
      ++it;
    }
  }
  return touched;
}

size_t AllocationTable::GrantAccess(uint64_t va, uint64_t size, uint64_t devices) {
  std::unique_lock lock(mu_);
  const uint64_t end = va + size;
  size_t touched = 0;
  auto it = by_start_.upper_bound(va);
  if (it != by_start_.begin()) --it;
  for (; it != by_start_.end() && it->first < end; ++it) {
    if (it->second.end() <= va) continue;
    it->second.access_mask |= devices;
    ++touched;
  }
  return touched;
}

size_t AllocationTable::EraseContext(uint64_t context) {
  std::unique_lock lock(mu_);
  size_t n = 0;
  for (auto it = by_start_.begin(); it != by_start_.end();) {
    if (it->second.context == context) {
      it = by_start_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

std::optional<Allocation> AllocationTable::Lookup(uint64_t addr) const {
  std::shared_lock lock(mu_);
  auto it = by_start_.upper_bound(addr);
  if (it == by_start_.begin()) return std::nullopt;
  --it;
  if (!it->second.Contains(addr)) return std::nullopt;
  return it->second;
}

std::vector<Allocation> AllocationTable::Overlapping(uint64_t va, uint64_t size) const {
  std::vector<Allocation> out;
  if (size == 0) return out;
  std::shared_lock lock(mu_);
  const uint64_t end = va + size;
  auto it = by_start_.upper_bound(va);
  if (it != by_start_.begin()) --it;
  for (; it != by_start_.end() && it->first < end; ++it) {
    if (it->second.end() > va) out.push_back(it->second);
  }
  return out;
}

std::vector<Allocation> AllocationTable::ListForDevice(int device, bool include_shared) const {
  std::vector<Allocation> out;
  std::shared_lock lock(mu_);
  for (const auto& [va, a] : by_start_) {
    if (a.device == device ||
        (include_shared && (a.device == kAnyDevice || a.kind == AllocationKind::kManaged))) {
      out.push_back(a);
    }
  }
  return out;
}

std::vector<Allocation> AllocationTable::All() const {
  std::shared_lock lock(mu_);
  std::vector<Allocation> out;
  out.reserve(by_start_.size());
  for (const auto& [va, a] : by_start_) out.push_back(a);
  return out;
}

size_t AllocationTable::size() const {
  std::shared_lock lock(mu_);
  return by_start_.size();
}

void AllocationTable::ResetAfterFork() {
  mu_.~shared_mutex();
  new (&mu_) std::shared_mutex();
  by_start_.clear();
}

void AllocationTable::Clear() {
  std::unique_lock lock(mu_);
  by_start_.clear();
}

}  // namespace kerncap::agent
