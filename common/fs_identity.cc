#include "common/fs_identity.h"

#include <grp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace kerncap {
namespace {

// setfsuid/setfsgid return the previous id and cannot report failure; an
// id of -1 is invalid, changes nothing and so reads the current one.
uint32_t CurrentFsUid() { return static_cast<uint32_t>(::syscall(SYS_setfsuid, -1)); }
uint32_t CurrentFsGid() { return static_cast<uint32_t>(::syscall(SYS_setfsgid, -1)); }

std::vector<uint32_t> ThreadGroups() {
  // getgroups(2) reads the calling thread's credentials.
  int n = ::getgroups(0, nullptr);
  if (n <= 0) return {};
  std::vector<gid_t> g(static_cast<size_t>(n));
  n = ::getgroups(n, g.data());
  if (n < 0) return {};
  return std::vector<uint32_t>(g.begin(), g.begin() + n);
}

// Applies `id` to the calling thread only. Order: groups and fsgid while the
// fsuid may still be 0, then the fsuid (which, leaving 0, drops the file
// capabilities such as CAP_DAC_OVERRIDE from this thread).
absl::Status Apply(const FsIdentity& id) {
  std::vector<gid_t> groups(id.groups.begin(), id.groups.end());
  if (::syscall(SYS_setgroups, groups.size(), groups.data()) != 0) {
    return ErrnoError(errno, "setgroups");
  }
  ::syscall(SYS_setfsgid, id.gid);
  if (CurrentFsGid() != id.gid) {
    return absl::PermissionDeniedError(absl::StrCat("cannot take on gid ", id.gid));
  }
  ::syscall(SYS_setfsuid, id.uid);
  if (CurrentFsUid() != id.uid) {
    return absl::PermissionDeniedError(absl::StrCat("cannot take on uid ", id.uid));
  }
  return absl::OkStatus();
}

// Restoring: fsuid first (back to 0 restores the file capabilities that the
// group changes may need), then gid and groups.
void Restore(const FsIdentity& id) {
  ::syscall(SYS_setfsuid, id.uid);
  ::syscall(SYS_setfsgid, id.gid);
  std::vector<gid_t> groups(id.groups.begin(), id.groups.end());
  ::syscall(SYS_setgroups, groups.size(), groups.data());
}

}  // namespace

FsIdentity ProcessFsIdentity() {
  return FsIdentity{static_cast<uint32_t>(::geteuid()), static_cast<uint32_t>(::getegid()),
                    ThreadGroups()};
}

FsIdentity ThreadFsIdentity() { return FsIdentity{CurrentFsUid(), CurrentFsGid(), ThreadGroups()}; }

bool CanSwitchFsIdentity() {
  // Root's effective set has both; a capability-aware check would need
  // libcap for a non-root daemon given CAP_SETUID, which we do not support.
  return ::geteuid() == 0;
}

absl::StatusOr<ScopedFsIdentity> ScopedFsIdentity::Enter(const FsIdentity& id) {
  FsIdentity previous = ThreadFsIdentity();
  if (previous.uid == id.uid && previous.gid == id.gid && previous.groups == id.groups) {
    return ScopedFsIdentity(std::move(previous), /*switched=*/false);
  }
  if (!CanSwitchFsIdentity()) {
    if (id.uid == previous.uid) {
      // Same user, other group view: the daemon's own is the most it has.
      return ScopedFsIdentity(std::move(previous), /*switched=*/false);
    }
    return absl::PermissionDeniedError(absl::StrCat(
        "this kerncapd runs as uid ", ::geteuid(), " and cannot act with the rights of uid ",
        id.uid, " on host paths; run it as root (the node daemon) or as that user"));
  }
  if (absl::Status st = Apply(id); !st.ok()) {
    Restore(previous);
    return st;
  }
  return ScopedFsIdentity(std::move(previous), /*switched=*/true);
}

ScopedFsIdentity::ScopedFsIdentity(ScopedFsIdentity&& other) noexcept
    : previous_(std::move(other.previous_)), switched_(other.switched_) {
  other.switched_ = false;
}

ScopedFsIdentity::~ScopedFsIdentity() {
  if (switched_) Restore(previous_);
}

ScopedOwnFsIdentity::ScopedOwnFsIdentity() {
  previous_ = ThreadFsIdentity();
  if (previous_.uid == static_cast<uint32_t>(::geteuid()) &&
      previous_.gid == static_cast<uint32_t>(::getegid())) {
    return;
  }
  FsIdentity own = ProcessFsIdentity();
  // The process's groups as the thread now reports them are the caller's:
  // take the daemon's from its main identity (root: none needed).
  own.groups.clear();
  Restore(own);
  switched_ = true;
}

ScopedOwnFsIdentity::~ScopedOwnFsIdentity() {
  if (switched_) (void)Apply(previous_);
}

bool AdoptFsIdentityForExec() {
  const long fsuid = ::syscall(SYS_setfsuid, -1);
  const long fsgid = ::syscall(SYS_setfsgid, -1);
  if (fsuid == static_cast<long>(::geteuid()) && fsgid == static_cast<long>(::getegid())) {
    return true;
  }
  if (::syscall(SYS_setresgid, fsgid, fsgid, fsgid) != 0) return false;
  if (::syscall(SYS_setresuid, fsuid, fsuid, fsuid) != 0) return false;
  return ::geteuid() == static_cast<uid_t>(fsuid);
}

}  // namespace kerncap
