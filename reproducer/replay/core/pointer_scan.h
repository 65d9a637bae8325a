// pointer_scan.h: which captured memory holds pointers into given address
// ranges. The verdict uses it to decide whether a kernel can reach captured
// state other than through its own code: a module variable that the loaded
// code object does not define cannot be named by the loaded kernel (a kernel
// reaches module variables only through relocations against its own
// module's symbols), so the only way left to it is a pointer stored in
// captured memory or in the arguments.
//
// The scan reads every 8-byte-aligned word (by its address in the
// application) and counts the words whose value lies inside a watched
// range. Like the relocator it is conservative in one direction only: an
// integer that happens to look like such a pointer counts as one, so a range
// reported unreachable truly has no pointer into it in the scanned bytes.
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_POINTER_SCAN_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_POINTER_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::replay {

class PointerScan {
 public:
  // Watches [va, va + size); returns its index for count(). Empty ranges
  // are watched but never hit.
  size_t Watch(uint64_t va, uint64_t size);

  // Counts the pointer words in data[0, size), whose first byte had address
  // `va` in the application (0 for the argument blob: its own alignment is
  // what matters).
  void Scan(uint64_t va, const void* data, size_t size);

  uint64_t count(size_t range) const { return range < counts_.size() ? counts_[range] : 0; }
  size_t ranges() const { return counts_.size(); }

 private:
  struct Range {
    uint64_t lo = 0, hi = 0;  // [lo, hi)
    size_t index = 0;
  };
  std::vector<Range> sorted_;  // by lo; kept sorted by Watch
  std::vector<uint64_t> counts_;
  uint64_t min_ = UINT64_MAX, max_ = 0;  // prefilter: [min_, max_) holds every range
};

class CaptureSource;

// For each of the given pre-image regions, how many 8-byte words of the
// capture's other pre-image regions and of its argument blob point into it.
// Reads every chunk of those regions once.
absl::StatusOr<std::vector<uint64_t>> CountCapturedPointersInto(const CaptureSource& source,
                                                                const std::vector<int>& regions);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_POINTER_SCAN_H_
