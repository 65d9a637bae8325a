#include "reproducer/replay/core/pointer_scan.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "common/status_macros.h"
#include "reproducer/replay/core/capture_source.h"

namespace kerncap::replay {

size_t PointerScan::Watch(uint64_t va, uint64_t size) {
  const size_t index = counts_.size();
  counts_.push_back(0);
  if (size == 0 || va + size < va) return index;  // empty or wrapping: never hit
  Range r{va, va + size, index};
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), r,
                                  [](const Range& a, const Range& b) { return a.lo < b.lo; }),
                 r);
  min_ = std::min(min_, r.lo);
  max_ = std::max(max_, r.hi);
  return index;
}

void PointerScan::Scan(uint64_t va, const void* data, size_t size) {
  if (sorted_.empty()) return;
  const auto* bytes = static_cast<const unsigned char*>(data);
  // The first byte whose application address is 8-byte aligned.
  size_t i = static_cast<size_t>((8 - (va & 7)) & 7);
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes + i, 8);
    if (w < min_ || w >= max_) continue;
    // The last range starting at or below w; ranges may nest or overlap, so
    // walk back while one could still hold w.
    auto it = std::upper_bound(sorted_.begin(), sorted_.end(), w,
                               [](uint64_t v, const Range& r) { return v < r.lo; });
    while (it != sorted_.begin()) {
      --it;
      if (w < it->hi) ++counts_[it->index];
    }
  }
}

absl::StatusOr<std::vector<uint64_t>> CountCapturedPointersInto(const CaptureSource& source,
                                                                const std::vector<int>& regions) {
  const v1::CaptureManifest& m = source.manifest();
  PointerScan scan;
  absl::flat_hash_set<int> watched;
  for (int i : regions) {
    const v1::Region& r = m.pre().regions(i);
    scan.Watch(r.va(), r.data().size());
    watched.insert(i);
  }
  std::string bytes;
  for (int i = 0; i < m.pre().regions_size(); ++i) {
    if (watched.contains(i)) continue;
    const v1::Region& r = m.pre().regions(i);
    const v1::ChunkList& list = r.data();
    // The argument blob has no address of its own: its alignment is what counts.
    const uint64_t base = r.kind() == v1::REGION_KERNARG ? 0 : r.va();
    for (uint64_t c = 0; c < ChunkCount(list); ++c) {
      KC_RETURN_IF_ERROR(
          source.ReadChunk(list.chunk_digests(static_cast<int>(c)), ChunkLength(list, c), &bytes));
      scan.Scan(base + ChunkOffset(list, c), bytes.data(), bytes.size());
    }
  }
  // The kernel's arguments as launched (a pointer argument is the commonest way in).
  scan.Scan(0, m.argument_blob().data(), m.argument_blob().size());
  std::vector<uint64_t> out;
  for (size_t k = 0; k < regions.size(); ++k) out.push_back(scan.count(k));
  return out;
}

}  // namespace kerncap::replay
