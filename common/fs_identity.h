// fs_identity.h: touch files with another user's rights, on one thread.
//
// A root kerncapd serves every user of its node. When a request names a host
// path (a reproducer's out_dir, a source_dir, a reference folder to import),
// the daemon must open, create and replace files there exactly as the caller
// could, never with its own rights (issue 28). Linux keeps credentials per
// thread, and the file-system ids (fsuid, fsgid) and supplementary groups are
// what every permission check on a path uses; switching them on the serving
// thread alone (raw syscalls: glibc's wrappers would broadcast setgroups to
// every thread of the daemon) leaves the daemon's other threads, and the
// files they hold open, untouched.
//
//   ScopedFsIdentity  switches the calling thread to a caller's ids and back
//   ScopedOwnFsIdentity  steps back to the daemon's own ids inside such a
//                     scope (reading the store while writing a caller's file)
//   AdoptFsIdentityForExec  in a forked child: make the exec'd program run
//                     as the thread's fs identity (execve resets fsuid to the
//                     euid, so without it a compiler run for a caller would
//                     run as root)
//
// Threads inherit the creating thread's credentials, so workers a scope
// starts act for the caller too.
#ifndef KERNCAP_COMMON_FS_IDENTITY_H_
#define KERNCAP_COMMON_FS_IDENTITY_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kerncap {

struct FsIdentity {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary groups
  bool operator==(const FsIdentity&) const = default;
};

// The identity this process runs with (euid, egid, its groups).
FsIdentity ProcessFsIdentity();

// The calling thread's current fs identity (fsuid, fsgid, groups).
FsIdentity ThreadFsIdentity();

// Whether this process may take on other users' fs identities
// (CAP_SETUID and CAP_SETGID in its effective set, as root has).
bool CanSwitchFsIdentity();

class ScopedFsIdentity {
 public:
  // Switches the calling thread to `id`. A process that cannot switch
  // (CanSwitchFsIdentity() false: a per-user kerncapd) succeeds only when
  // `id` is its own identity, and says so otherwise: it refuses to act for
  // another user rather than act with its own rights.
  static absl::StatusOr<ScopedFsIdentity> Enter(const FsIdentity& id);

  ScopedFsIdentity(ScopedFsIdentity&& other) noexcept;
  ScopedFsIdentity& operator=(ScopedFsIdentity&&) = delete;
  ScopedFsIdentity(const ScopedFsIdentity&) = delete;
  ~ScopedFsIdentity();  // back to the identity the thread had before

 private:
  ScopedFsIdentity(FsIdentity previous, bool switched)
      : previous_(std::move(previous)), switched_(switched) {}
  FsIdentity previous_;
  bool switched_ = false;
};

// Inside a ScopedFsIdentity: the daemon's own ids until it ends (for the
// daemon's own files: the store). A no-op when the thread already has them.
class ScopedOwnFsIdentity {
 public:
  ScopedOwnFsIdentity();
  ~ScopedOwnFsIdentity();
  ScopedOwnFsIdentity(const ScopedOwnFsIdentity&) = delete;
  ScopedOwnFsIdentity& operator=(const ScopedOwnFsIdentity&) = delete;

 private:
  FsIdentity previous_;
  bool switched_ = false;
};

// Async-signal-safe; for a child between fork and exec. When the thread that
// forked had another user's fs identity, sets the child's real, effective
// and saved ids to it (groups are inherited as they were), so the program it
// execs runs as that user. False when that fails: the child must not exec.
bool AdoptFsIdentityForExec();

}  // namespace kerncap

#endif  // KERNCAP_COMMON_FS_IDENTITY_H_
