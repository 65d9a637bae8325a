// digest_claims.h: the digests some thread is writing into the store right
// now. A writer claims a digest before it looks again whether the chunk is
// stored and appends it; a second writer of the same digest waits for the
// first, then finds it stored: each chunk is appended once.
#ifndef KERNCAP_DAEMON_STORE_DIGEST_CLAIMS_H_
#define KERNCAP_DAEMON_STORE_DIGEST_CLAIMS_H_

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/digest.h"

namespace kerncap::store {

class DigestClaims {
 public:
  // Holds the claim on `d` for its lifetime (waits while another has it).
  class Claim {
   public:
    Claim(DigestClaims& claims, const Digest& d) : claims_(claims), d_(d) {
      absl::MutexLock l(&claims_.mu_);
      while (claims_.held_.contains(d_)) claims_.released_.Wait(&claims_.mu_);
      claims_.held_.insert(d_);
    }
    ~Claim() {
      absl::MutexLock l(&claims_.mu_);
      claims_.held_.erase(d_);
      claims_.released_.SignalAll();
    }
    Claim(const Claim&) = delete;
    Claim& operator=(const Claim&) = delete;

   private:
    DigestClaims& claims_;
    const Digest d_;
  };

 private:
  absl::Mutex mu_;
  absl::CondVar released_;
  absl::flat_hash_set<Digest> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_DIGEST_CLAIMS_H_
