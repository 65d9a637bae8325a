// allocation_table.h: the agent's always-on record of every live allocation
// the application made (device, VMM mappings, managed, pinned host), so that
// a capture can snapshot the whole address-space closure of a dispatch
// without chasing pointers. Backend-neutral: the CUDA backend feeds it from
// driver callbacks, the HSA backend (later) from its API table wrappers.
//
// Model: a set of disjoint intervals [va, va+size) in the process's unified
// virtual address space (CUDA UVA / HSA SVM: one address names one byte on one
// device, so intervals never legitimately overlap). An insert that overlaps
// existing entries replaces them: the old ones must be stale (a free the agent
// missed, e.g. one made before it was loaded).
//
// Thread-safety: all methods are safe to call concurrently (reader/writer
// lock; writers are allocation callbacks, readers are captures).
#ifndef KERNCAP_AGENT_CORE_ALLOCATION_TABLE_H_
#define KERNCAP_AGENT_CORE_ALLOCATION_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <vector>

namespace kerncap::agent {

enum class AllocationKind : uint8_t {
  kDevice = 1,        // cuMemAlloc / pitch / IPC-opened device memory
  kDeviceAsync = 2,   // stream-ordered pool allocation (cuMemAllocAsync ...)
  kVmmMapping = 3,    // physical memory mapped into a reserved VA range
  kManaged = 4,       // unified / managed memory
  kHostPinned = 5,    // host memory allocated pinned by the driver
  kHostRegistered = 6 // application host memory registered with the driver
};

const char* AllocationKindName(AllocationKind kind);
// Host-side kinds: the device address is the host address (UVA).
bool IsHostKind(AllocationKind kind);

inline constexpr int kAnyDevice = -1;
// Bit d set: device d may access the range. VMM mappings start with no access
// until the app calls cuMemSetAccess; every other kind is accessible.
inline constexpr uint64_t kAllDevicesMask = ~0ull;

struct Allocation {
  uint64_t va = 0;
  uint64_t size = 0;
  AllocationKind kind = AllocationKind::kDevice;
  int device = kAnyDevice;    // owning device ordinal; kAnyDevice for host/managed
  uint64_t context = 0;       // opaque backend context handle at allocation time
  uint64_t handle = 0;        // backend handle (VMM physical handle), 0 if none
  uint64_t access_mask = kAllDevicesMask;

  uint64_t end() const { return va + size; }
  bool Contains(uint64_t addr) const { return addr >= va && addr - va < size; }
};

class AllocationTable {
 public:
  AllocationTable() = default;
  AllocationTable(const AllocationTable&) = delete;
  AllocationTable& operator=(const AllocationTable&) = delete;

  // Records a live allocation. Zero-sized allocations are ignored. Entries
  // overlapping the new one are dropped (they were stale); returns how many.
  size_t Insert(const Allocation& allocation);

  // Forgets the allocation starting exactly at `va`. Returns false when none.
  bool Erase(uint64_t va);

  // Forgets [va, va+size): entries inside are dropped, entries straddling an
  // end are trimmed (cuMemUnmap of part of a mapping, cuMemAddressFree of a
  // whole reservation). Returns the number of entries dropped or trimmed.
  size_t EraseRange(uint64_t va, uint64_t size);

  // Sets the access mask bits of `devices` on every entry overlapping
  // [va, va+size) (cuMemSetAccess). Returns the number of entries touched.
  size_t GrantAccess(uint64_t va, uint64_t size, uint64_t devices);

  // Forgets every entry made under `context` (the context is being destroyed,
  // which frees its allocations). Returns how many.
  size_t EraseContext(uint64_t context);

  // The allocation containing `addr` (interior pointers resolve to their
  // allocation), if any.
  std::optional<Allocation> Lookup(uint64_t addr) const;

  // Entries overlapping [va, va+size), in address order.
  std::vector<Allocation> Overlapping(uint64_t va, uint64_t size) const;

  // Entries a dispatch on `device` can touch, in address order: those owned
  // by `device`, plus (if include_shared) host and managed entries.
  std::vector<Allocation> ListForDevice(int device, bool include_shared) const;

  std::vector<Allocation> All() const;
  size_t size() const;
  void Clear();
  // Fork child: a parent thread may have held the lock at fork time.
  void ResetAfterFork();

 private:
  // Requires mu_ held exclusively. Removes/trims entries overlapping the range.
  size_t EraseRangeLocked(uint64_t va, uint64_t size);

  mutable std::shared_mutex mu_;
  std::map<uint64_t, Allocation> by_start_;  // key: va
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_ALLOCATION_TABLE_H_
