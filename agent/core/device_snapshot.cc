#include "agent/core/device_snapshot.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "agent/core/agent_env.h"

namespace kerncap::agent {

SnapshotPolicy SnapshotPolicy::FromEnv() {
  SnapshotPolicy p;
  p.enabled = EnvInt("KERNCAP_AGENT_SNAPSHOT", 1) != 0;
  p.fingerprints = EnvInt("KERNCAP_AGENT_FINGERPRINTS", 1) != 0;
  const int mib = EnvInt("KERNCAP_AGENT_SNAPSHOT_MARGIN_MIB", -1);
  if (mib >= 0) {
    p.margin_min_bytes = static_cast<uint64_t>(mib) << 20;
    p.margin_fraction = 0;
  }
  return p;
}

uint64_t SnapshotPolicy::Margin(uint64_t total_device_bytes) const {
  return std::max<uint64_t>(margin_min_bytes,
                            static_cast<uint64_t>(margin_fraction * total_device_bytes));
}

bool SnapshotPolicy::Fits(uint64_t needed, uint64_t free_bytes, uint64_t total_bytes,
                          std::string* why) const {
  char buf[256];
  const double gib = 1073741824.0;
  if (!enabled) {
    *why = "device snapshots disabled (KERNCAP_AGENT_SNAPSHOT=0)";
    return false;
  }
  const uint64_t margin = Margin(total_bytes);
  const bool fits = needed <= free_bytes && free_bytes - needed >= margin;
  snprintf(buf, sizeof(buf), "%s: %.2f GiB snapshot, %.2f GiB free on the device, margin %.2f GiB",
           fits ? "fits" : "free device memory too small", needed / gib, free_bytes / gib,
           margin / gib);
  *why = buf;
  return fits;
}

}  // namespace kerncap::agent
