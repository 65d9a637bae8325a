#include "reproducer/replay/core/relocator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace kerncap::replay {

void Relocator::Add(uint64_t old_va, uint64_t size, uint64_t new_va) {
  if (old_va == new_va || size == 0) return;
  ranges_.push_back(MovedRange{old_va, size, new_va});
  finalized_ = false;
}

absl::Status Relocator::Finalize() {
  std::sort(ranges_.begin(), ranges_.end(),
            [](const MovedRange& a, const MovedRange& b) { return a.old_va < b.old_va; });
  for (size_t i = 1; i < ranges_.size(); ++i) {
    const MovedRange& p = ranges_[i - 1];
    if (p.old_va + p.size > ranges_[i].old_va) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "moved ranges 0x%x+%u and 0x%x+%u overlap", p.old_va, p.size, ranges_[i].old_va,
          ranges_[i].size));
    }
  }
  finalized_ = true;
  return absl::OkStatus();
}

std::optional<size_t> Relocator::RangeOf(uint64_t addr) const {
  if (ranges_.empty() || !finalized_) return std::nullopt;
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), addr,
                             [](uint64_t a, const MovedRange& r) { return a < r.old_va; });
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  if (addr - it->old_va >= it->size) return std::nullopt;
  return static_cast<size_t>(it - ranges_.begin());
}

std::optional<uint64_t> Relocator::Translate(uint64_t addr) const {
  std::optional<size_t> i = RangeOf(addr);
  if (!i) return std::nullopt;
  const MovedRange& r = ranges_[*i];
  return r.new_va + (addr - r.old_va);
}

size_t Relocator::PatchWords(uint64_t va, void* data, size_t size, PatchTally* tally) const {
  if (ranges_.empty()) return 0;
  const uint64_t lo = ranges_.front().old_va;
  const uint64_t hi = ranges_.back().old_va + ranges_.back().size;
  unsigned char* p = static_cast<unsigned char*>(data);
  size_t first = static_cast<size_t>((8 - (va & 7)) & 7);
  size_t patched = 0;
  for (size_t off = first; off + 8 <= size; off += 8) {
    uint64_t w;
    std::memcpy(&w, p + off, 8);
    if (w < lo || w >= hi) continue;  // cheap reject for the common case
    std::optional<size_t> range = RangeOf(w);
    if (!range) continue;
    const uint64_t t = ranges_[*range].new_va + (w - ranges_[*range].old_va);
    std::memcpy(p + off, &t, 8);
    ++patched;
    if (tally != nullptr) tally->Add(*range);
  }
  return patched;
}

}  // namespace kerncap::replay
