#include "agent/hsa/packets.h"

#include <cstring>

namespace kerncap::agent::hsa {

LaunchDesc LaunchOf(const hsa_kernel_dispatch_packet_t& p) {
  LaunchDesc d;
  const uint32_t dims = (p.setup >> HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS) & 0x3;
  const uint32_t grid[3] = {p.grid_size_x, p.grid_size_y, p.grid_size_z};
  const uint32_t wg[3] = {p.workgroup_size_x, p.workgroup_size_y, p.workgroup_size_z};
  for (int i = 0; i < 3; ++i) {
    uint32_t w = wg[i] == 0 ? 1 : wg[i];
    d.block[i] = w;
    d.grid[i] = grid[i] == 0 ? 1 : grid[i];
  }
  d.shared_mem_bytes = p.group_segment_size;
  d.attributes["aql.dimensions"] = dims;
  d.attributes["aql.grid_size_x"] = p.grid_size_x;
  d.attributes["aql.grid_size_y"] = p.grid_size_y;
  d.attributes["aql.grid_size_z"] = p.grid_size_z;
  d.attributes["aql.private_segment_size"] = p.private_segment_size;
  d.attributes["aql.group_segment_size"] = p.group_segment_size;
  d.attributes["aql.header"] = p.header;
  return d;
}

hsa_barrier_and_packet_t MakeBarrier(hsa_signal_t completion) {
  hsa_barrier_and_packet_t b;
  std::memset(&b, 0, sizeof(b));
  b.header = static_cast<uint16_t>(
      (HSA_PACKET_TYPE_BARRIER_AND << HSA_PACKET_HEADER_TYPE) |
      (1 << HSA_PACKET_HEADER_BARRIER) |
      (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
      (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
  b.completion_signal = completion;
  return b;
}

}  // namespace kerncap::agent::hsa
