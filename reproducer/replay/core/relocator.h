// relocator.h: the fallback when captured memory cannot be mapped at its
// original virtual address. Each captured range that moved gets an entry
// old -> new; the argument blob and every 8-byte-aligned word of restored
// buffers that points into a moved range is rewritten. This is a heuristic
// (an integer that happens to look like a pointer is patched too, and opaque
// descriptors such as TMA CUtensorMaps are not understood), which is why a
// relocated replay is always reported loudly.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_RELOCATOR_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_RELOCATOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"

namespace kerncap::replay {

struct MovedRange {
  uint64_t old_va = 0;
  uint64_t size = 0;
  uint64_t new_va = 0;
};

// How many pointer words into each moved range were patched (indices as in
// Relocator::ranges()). Thread-safe: the restore workers share one.
class PatchTally {
 public:
  explicit PatchTally(size_t ranges = 0) : counts_(ranges) {}
  void Add(size_t range) {
    if (range < counts_.size()) counts_[range].fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t count(size_t range) const {
    return range < counts_.size() ? counts_[range].load(std::memory_order_relaxed) : 0;
  }
  size_t size() const { return counts_.size(); }

 private:
  std::vector<std::atomic<uint64_t>> counts_;
};

class Relocator {
 public:
  // Records that [old_va, old_va+size) now lives at new_va. Ranges that did
  // not move are ignored. Call Finalize() before translating.
  void Add(uint64_t old_va, uint64_t size, uint64_t new_va);
  // Sorts the ranges; InvalidArgument when two moved ranges overlap.
  absl::Status Finalize();

  bool empty() const { return ranges_.empty(); }
  const std::vector<MovedRange>& ranges() const { return ranges_; }

  // The new address of `addr` when it lies in a moved range.
  std::optional<uint64_t> Translate(uint64_t addr) const;

  // Rewrites every 8-byte word of data[0, size) whose address `va + offset`
  // is 8-byte aligned and points into a moved range. `va` is the address the
  // bytes had in the application (for the argument blob pass 0: the blob's
  // own 8-byte alignment is what matters). Returns the number of words
  // patched; with `tally`, also counts each one against the range it points
  // into.
  size_t PatchWords(uint64_t va, void* data, size_t size, PatchTally* tally = nullptr) const;

 private:
  // The index in ranges() of the moved range holding `addr`.
  std::optional<size_t> RangeOf(uint64_t addr) const;

  std::vector<MovedRange> ranges_;
  bool finalized_ = true;
};

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_RELOCATOR_H_
