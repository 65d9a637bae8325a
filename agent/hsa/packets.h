// packets.h: AQL packet helpers (HSA 1.1 system architecture, section 2.9).
// Every AQL packet is 64 bytes; the low 8 bits of its 16-bit header are the
// packet type (HSA_PACKET_TYPE_*; AMD vendor packets use type 0). A packet's
// header is written last (atomically, release) to hand it to the processor.
#ifndef KERNCAP_AGENT_HSA_PACKETS_H_
#define KERNCAP_AGENT_HSA_PACKETS_H_

#include <hsa/hsa.h>

#include <array>
#include <cstdint>

#include "agent/core/capture_types.h"

namespace kerncap::agent::hsa {

inline constexpr size_t kAqlPacketSize = 64;
static_assert(sizeof(hsa_kernel_dispatch_packet_t) == kAqlPacketSize);
static_assert(sizeof(hsa_barrier_and_packet_t) == kAqlPacketSize);

inline uint8_t PacketType(const void* packet) {
  return static_cast<uint8_t>(*static_cast<const uint16_t*>(packet) & 0xFF);
}
inline bool IsKernelDispatch(const void* packet) {
  return PacketType(packet) == HSA_PACKET_TYPE_KERNEL_DISPATCH;
}

// Launch geometry of a dispatch packet in the manifest's terms
// (kerncap.v1.LaunchConfig): for HSA the grid is in work-items, as in the
// AQL packet (it may be a partial multiple of the work-group), block is the
// work-group size.
LaunchDesc LaunchOf(const hsa_kernel_dispatch_packet_t& p);

// A barrier-AND packet with no dependencies, the barrier bit set (it waits
// for all earlier packets of its queue to complete) and system-scope fences,
// so memory written by earlier packets is visible to the host after
// `completion` reaches 0.
hsa_barrier_and_packet_t MakeBarrier(hsa_signal_t completion);

}  // namespace kerncap::agent::hsa

#endif  // KERNCAP_AGENT_HSA_PACKETS_H_
