// gc_pins.h: what a GC must keep besides the chunks committed manifests
// name. Every in-flight owner (an ingest, an import, a chunk-existence
// check: any token registered here) pins the digests it references or
// wrote; while a GC marks, everything referenced since the mark began, and
// the pins of owners that finish meanwhile, are kept too (a capture that
// commits during the mark may not have been listed by it).
//
// Why this is enough (gc.cc): workers pin a digest (Note) before they look
// it up in the index, and the sweep decides and removes dead chunks inside
// Sweep, under this object's lock. So a chunk an ingest dedups against is
// either pinned before the sweep (kept) or looked up after it (missed, and
// written again).
#ifndef KERNCAP_DAEMON_STORE_GC_PINS_H_
#define KERNCAP_DAEMON_STORE_GC_PINS_H_

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "common/digest.h"

namespace kerncap::store {

class GcPins {
 public:
  void Register(const void* owner);
  // Drops `owner`'s pins (kept for a GC that is marking).
  void Unregister(const void* owner);
  // `owner` (registered, or null: nobody) references `d`.
  void Note(const void* owner, const Digest& d);
  int owners() const;

  // A GC's mark begins: from now on every Note is remembered for it.
  void BeginMark();
  // The mark ends without a sweep (a failed GC).
  void EndMark();
  // Adds every pinned digest to `live`, runs `sweep` (which decides what is
  // dead against `live` and removes it from the index) with no Note in
  // between, then ends the mark.
  void Sweep(absl::flat_hash_set<Digest>& live, absl::FunctionRef<void()> sweep);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<const void*, absl::flat_hash_set<Digest>> refs_ ABSL_GUARDED_BY(mu_);
  bool marking_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<Digest> seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_GC_PINS_H_
