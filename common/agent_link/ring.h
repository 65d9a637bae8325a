// ring.h: the shared-memory slot ring that carries captured bytes from the
// agent to the daemon without copies: device-to-host copies land in pages the
// daemon reads (gRPC streaming measured 20-50x slower than PCIe for this;
// docs/ARCHITECTURE.md, "Data flow of a capture").
//
// Layout: one memfd of slot_count * slot_size bytes; slot i occupies
// [i * slot_size, (i + 1) * slot_size). There is no in-band header: slot
// ownership is tracked by the control messages (SlotFilled hands a slot to the
// daemon, SlotFree hands it back), so a misbehaving agent can only corrupt the
// bytes of its own capture, never the daemon's bookkeeping.
//
// The daemon creates the memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING), sizes it,
// pre-faults it with fallocate (so the pages are charged to the daemon's
// memcg, not the application's), and seals it with F_SEAL_SHRINK |
// F_SEAL_GROW | F_SEAL_SEAL so that neither side can truncate it under the
// other's mapping (which would SIGBUS the reader). Writes stay allowed: the
// agent fills slots; the daemon maps the ring read-only.
#ifndef KERNCAP_COMMON_AGENT_LINK_RING_H_
#define KERNCAP_COMMON_AGENT_LINK_RING_H_

#include <cstddef>
#include <cstdint>

#include "common/agent_link/result.h"

namespace kerncap::link {

inline constexpr uint64_t kDefaultSlotSize = 8ull << 20;
inline constexpr uint32_t kDefaultSlotCount = 8;
// Sanity bounds, checked by both sides (an agent refuses a Welcome outside
// them): slots are at least a page, a ring is at most 1 TiB (host staging
// large enough to hold a whole snapshot keeps the application's pause at
// device-to-host copy time; the daemon's --staging-gib picks the size).
inline constexpr uint64_t kMinSlotSize = 4096;
inline constexpr uint64_t kMaxSlotSize = 1ull << 30;
inline constexpr uint32_t kMaxSlotCount = 1u << 16;
inline constexpr uint64_t kMaxRingBytes = 1ull << 40;
inline constexpr int kRingSeals = 0x0001 /*F_SEAL_SEAL*/ | 0x0002 /*F_SEAL_SHRINK*/ |
                                  0x0004 /*F_SEAL_GROW*/;

struct RingLayout {
  uint64_t slot_size = kDefaultSlotSize;
  uint32_t slot_count = kDefaultSlotCount;
  uint64_t bytes() const { return slot_size * slot_count; }
  uint64_t SlotOffset(uint32_t slot) const { return slot_size * slot; }
};

// Empty when the layout is within bounds and slot_size is a multiple of
// `chunk_size` (so every full slot is a whole number of store chunks).
std::string ValidateRingLayout(const RingLayout& layout, uint64_t chunk_size);

// Daemon side: creates, sizes, pre-faults and seals the ring memfd.
LinkResult<UniqueFd> CreateRingMemfd(const RingLayout& layout, const char* name);

// Agent side: checks that `fd` is a sealed memfd of exactly layout.bytes().
LinkStatus CheckRingFd(int fd, const RingLayout& layout);

// A MAP_SHARED mapping of the ring; unmapped on destruction.
class RingMapping {
 public:
  static LinkResult<RingMapping> Map(int fd, const RingLayout& layout, bool writable);
  RingMapping() = default;
  RingMapping(RingMapping&& other) noexcept;
  RingMapping& operator=(RingMapping&& other) noexcept;
  RingMapping(const RingMapping&) = delete;
  RingMapping& operator=(const RingMapping&) = delete;
  ~RingMapping();

  uint8_t* slot(uint32_t index) const { return base_ + layout_.SlotOffset(index); }
  const RingLayout& layout() const { return layout_; }
  uint8_t* base() const { return base_; }

 private:
  void Reset();
  uint8_t* base_ = nullptr;
  RingLayout layout_;
};

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_AGENT_LINK_RING_H_
