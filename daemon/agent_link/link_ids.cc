#include "daemon/agent_link/link_ids.h"

#include <cstdint>
#include <random>

#include "absl/base/const_init.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace kerncap::link {

std::string RandomLinkId(absl::string_view prefix) {
  static absl::Mutex mu(absl::kConstInit);
  static std::mt19937_64* rng = nullptr;
  absl::MutexLock lock(&mu);
  if (rng == nullptr) {
    std::random_device rd;
    rng = new std::mt19937_64((static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                              static_cast<uint64_t>(absl::GetCurrentTimeNanos()));
  }
  return absl::StrFormat("%s%016x", prefix, (*rng)());
}

}  // namespace kerncap::link
