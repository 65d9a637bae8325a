// caller.h: who a request acts for, and whose objects it may reach.
//
// kerncapd runs once per node and is shared by every user there (issue 28).
// Every control request is served with the rights of its caller, never with
// the daemon's own: a Unix-socket peer is the uid/gid/groups/pid the kernel
// reports for the socket (SO_PEERCRED, SO_PEERGROUPS); a TCP peer acts as the
// identity the daemon's configuration names for TCP (`tcp-user`), never as
// root. Agents, arms, captures and substitutions belong to a uid (an agent's
// and its captures' is its process's, from the agent socket's credentials),
// and a caller reaches only its own, unless it is privileged.
#ifndef KERNCAP_DAEMON_CALLER_H_
#define KERNCAP_DAEMON_CALLER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kerncap {

struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  // Supplementary groups (file access is checked with them too).
  std::vector<uint32_t> groups;
  // The peer process (0 for TCP peers and in-process callers).
  int32_t pid = 0;
  // Root, or the uid kerncapd itself runs as: reaches every user's objects
  // and may run store-wide maintenance (gc, a whole-store verify).
  bool privileged = false;
  // For logs and errors: "uid 1000 (pid 4242)", "tcp 10.0.0.5:4431 as uid 65534".
  std::string description;

  bool MayReach(uint32_t owner_uid) const { return privileged || owner_uid == uid; }
};

}  // namespace kerncap

#endif  // KERNCAP_DAEMON_CALLER_H_
