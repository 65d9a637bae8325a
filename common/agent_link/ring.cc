#include "common/agent_link/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <utility>

namespace kerncap::link {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + strerror(errno); }

static_assert(kRingSeals == (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW));

}  // namespace

std::string ValidateRingLayout(const RingLayout& l, uint64_t chunk_size) {
  if (l.slot_size < kMinSlotSize || l.slot_size > kMaxSlotSize) {
    return "ring slot size " + std::to_string(l.slot_size) + " outside [" +
           std::to_string(kMinSlotSize) + ", " + std::to_string(kMaxSlotSize) + "]";
  }
  if (l.slot_count == 0 || l.slot_count > kMaxSlotCount) {
    return "ring slot count " + std::to_string(l.slot_count) + " outside [1, " +
           std::to_string(kMaxSlotCount) + "]";
  }
  if (l.bytes() > kMaxRingBytes) return "ring larger than " + std::to_string(kMaxRingBytes);
  if (chunk_size == 0 || l.slot_size % chunk_size != 0) {
    return "ring slot size " + std::to_string(l.slot_size) + " is not a multiple of the chunk size " +
           std::to_string(chunk_size);
  }
  return "";
}

LinkResult<UniqueFd> CreateRingMemfd(const RingLayout& layout, const char* name) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return LinkStatus::Error(Errno("memfd_create"));
  if (::ftruncate(fd.get(), static_cast<off_t>(layout.bytes())) != 0) {
    return LinkStatus::Error(Errno("ftruncate(ring)"));
  }
  // Allocate every page now, in the daemon: the memcg charge lands here and a
  // later shortage surfaces as an error at connect time, not as SIGBUS.
  int rc;
  do {
    rc = ::fallocate(fd.get(), 0, 0, static_cast<off_t>(layout.bytes()));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return LinkStatus::Error(Errno("fallocate(ring)"));
  if (::fcntl(fd.get(), F_ADD_SEALS, kRingSeals) != 0) {
    return LinkStatus::Error(Errno("F_ADD_SEALS(ring)"));
  }
  return fd;
}

LinkStatus CheckRingFd(int fd, const RingLayout& layout) {
  int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) return LinkStatus::Error(Errno("F_GET_SEALS(ring)"));
  if ((seals & kRingSeals) != kRingSeals) {
    return LinkStatus::Error("ring memfd is not sealed against resizing");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return LinkStatus::Error(Errno("fstat(ring)"));
  if (static_cast<uint64_t>(st.st_size) != layout.bytes()) {
    return LinkStatus::Error("ring memfd has " + std::to_string(st.st_size) + " bytes, expected " +
                             std::to_string(layout.bytes()));
  }
  return LinkStatus::Ok();
}

LinkResult<RingMapping> RingMapping::Map(int fd, const RingLayout& layout, bool writable) {
  int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void* p = ::mmap(nullptr, layout.bytes(), prot, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return LinkStatus::Error(Errno("mmap(ring)"));
  RingMapping m;
  m.base_ = static_cast<uint8_t*>(p);
  m.layout_ = layout;
  return m;
}

RingMapping::RingMapping(RingMapping&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), layout_(other.layout_) {}

RingMapping& RingMapping::operator=(RingMapping&& other) noexcept {
  if (this != &other) {
    Reset();
    base_ = std::exchange(other.base_, nullptr);
    layout_ = other.layout_;
  }
  return *this;
}

RingMapping::~RingMapping() { Reset(); }

void RingMapping::Reset() {
  if (base_ != nullptr) ::munmap(base_, layout_.bytes());
  base_ = nullptr;
}

}  // namespace kerncap::link
