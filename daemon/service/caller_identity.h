// caller_identity.h: who a gRPC request comes from (daemon/caller.h).
//
// kerncapd accepts its Unix socket's connections itself and hands each one to
// gRPC as a channel of its own (UnixListener), so a call's peer reads
// "fd:N", the daemon's descriptor of that connection. While the call is
// being served its connection (and so that descriptor) stays open, and the
// kernel's record of the connecting process (SO_PEERCRED: pid, uid, gid;
// SO_PEERGROUPS: supplementary groups, as they were at connect time) is the
// caller's identity. Nothing the client sends can change it.
//
// TCP peers ("ipv4:...", "ipv6:...") act as the configured TCP identity
// (`tcp-user`): the daemon's own user when it is not root, else nobody
// unless the configuration names a user; never root. Any other peer is
// refused: a request whose caller cannot be told is not served.
#ifndef KERNCAP_DAEMON_SERVICE_CALLER_IDENTITY_H_
#define KERNCAP_DAEMON_SERVICE_CALLER_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/fs_identity.h"
#include "daemon/caller.h"

namespace kerncap::service {

// What TCP peers act as.
struct TcpIdentity {
  FsIdentity id{65534, 65534, {}};  // nobody, unless configured
  std::string name = "nobody";      // the user's name, for messages
};

// `user`: a user name or a numeric uid; empty: the daemon's own user, or
// "nobody" when the daemon runs as root. InvalidArgument for an unknown user
// or for root (a remote client never acts as root).
absl::StatusOr<TcpIdentity> ResolveTcpIdentity(const std::string& user);

// The caller of a request whose gRPC peer is `peer`.
absl::StatusOr<Caller> CallerFromPeer(absl::string_view peer, const TcpIdentity& tcp);

// A caller's fs identity (for ScopedFsIdentity).
inline FsIdentity FsIdentityOf(const Caller& c) { return FsIdentity{c.uid, c.gid, c.groups}; }

// Whether `uid` reaches every user's objects (root, or the daemon's own).
bool IsPrivilegedUid(uint32_t uid);

}  // namespace kerncap::service

#endif  // KERNCAP_DAEMON_SERVICE_CALLER_IDENTITY_H_
