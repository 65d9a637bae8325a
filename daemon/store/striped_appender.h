// striped_appender.h: the store's open packs, several at a time, so that
// ingest workers append in parallel.
//
// Why: a buffered write holds its file's inode lock in the kernel, so
// appends to one pack serialize however they are locked here. On the H200
// host (16 cores) one open pack held the store's ingest of random bytes to
// ~2.3 GB/s with 4 cores busy, on tmpfs as on disk (store_ingest_bench
// --random), which bounded a host-path capture's pause; four stripes gave
// 3.3 GB/s, and 5.7 GB/s (13.6 cores) once dedup lookups stopped waiting
// for a stripe's append mutex (PackAppender::pending_mu_).
//
// Each stripe is a PackAppender with its own open pack, mutex and sealer.
// Sequence numbers are striped: stripe i of K issues K + i, 2K + i, ..., so
// a number names its stripe. A thread always appends to the same stripe
// (workers are long-lived, so each stripe's packs fill evenly). Dedup is
// unchanged: FindPending looks in every stripe, and DigestClaims still lets
// one worker at a time write a digest.
//
// Lock order: stripes in index order (WithoutSeals nests them), each before
// the publish callback's locks, as for one PackAppender.
#ifndef KERNCAP_DAEMON_STORE_STRIPED_APPENDER_H_
#define KERNCAP_DAEMON_STORE_STRIPED_APPENDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/digest.h"
#include "daemon/store/pack_appender.h"

namespace kerncap::store {

class StripedAppender {
 public:
  StripedAppender(int stripes, const std::string& packs_dir, uint64_t pack_target_bytes,
                  const TestHook& test_hook, const PackAppender::PublishFn& publish);

  // The stripe count the store uses for `workers` ingest workers when none
  // is set: one open pack per four workers, between 1 and 4.
  static int DefaultStripes(int workers);

  void Start();
  void Stop();
  int stripes() const { return static_cast<int>(stripes_.size()); }

  // PackAppender's operations; Append goes to the calling thread's stripe,
  // EnsureDurable to the stripe its number names.
  absl::StatusOr<uint64_t> Append(const Digest& d, uint8_t codec, absl::string_view stored,
                                  uint32_t raw_len, uint64_t xxh3);
  absl::Status EnsureDurable(uint64_t seq);
  bool FindPending(const Digest& d, uint64_t* seq);
  // Runs `f` with no seal of any stripe publishing meanwhile.
  void WithoutSeals(absl::FunctionRef<void()> f);

 private:
  void WithoutSealsFrom(size_t stripe, absl::FunctionRef<void()> f);

  std::vector<std::unique_ptr<PackAppender>> stripes_;
};

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_STRIPED_APPENDER_H_
