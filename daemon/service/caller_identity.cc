#include "daemon/service/caller_identity.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace kerncap::service {
namespace {

constexpr uint32_t kNobody = 65534;

std::vector<uint32_t> GroupsOfUser(const char* name, gid_t gid) {
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  while (::getgrouplist(name, gid, groups.data(), &n) < 0) {
    if (n <= static_cast<int>(groups.size()) || n > 65536) return {gid};
    groups.resize(static_cast<size_t>(n));
  }
  return std::vector<uint32_t>(groups.begin(), groups.begin() + n);
}

absl::StatusOr<std::vector<uint32_t>> PeerGroups(int fd) {
  std::vector<gid_t> groups(64);
  while (true) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return std::vector<uint32_t>(groups.begin(), groups.end());
    }
    if (errno != ERANGE || len / sizeof(gid_t) <= groups.size() || len > (1u << 20)) {
      return ErrnoError(errno, "SO_PEERGROUPS");
    }
    groups.resize(len / sizeof(gid_t));
  }
}

}  // namespace

bool IsPrivilegedUid(uint32_t uid) { return uid == 0 || uid == static_cast<uint32_t>(::geteuid()); }

absl::StatusOr<TcpIdentity> ResolveTcpIdentity(const std::string& user) {
  std::string want = user;
  if (want.empty()) {
    if (::geteuid() != 0) {
      TcpIdentity own;
      own.id = ProcessFsIdentity();
      passwd pw{};
      passwd* found = nullptr;
      std::vector<char> buf(16384);
      if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) == 0 && found) {
        own.name = found->pw_name;
      } else {
        own.name = absl::StrCat("uid ", ::geteuid());
      }
      return own;
    }
    want = "nobody";
  }
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  uint32_t uid = 0;
  const bool numeric = absl::SimpleAtoi(want, &uid);
  int rc = numeric ? ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found)
                   : ::getpwnam_r(want.c_str(), &pw, buf.data(), buf.size(), &found);
  TcpIdentity out;
  if (rc == 0 && found != nullptr) {
    out.id.uid = found->pw_uid;
    out.id.gid = found->pw_gid;
    out.id.groups = GroupsOfUser(found->pw_name, found->pw_gid);
    out.name = found->pw_name;
  } else if (numeric) {
    // A uid without a passwd entry (containers): its own group, no others.
    out.id = FsIdentity{uid, uid, {}};
    out.name = absl::StrCat("uid ", uid);
  } else if (user.empty()) {
    out.id = FsIdentity{kNobody, kNobody, {}};
    out.name = "nobody";
  } else {
    return absl::InvalidArgumentError(absl::StrCat("tcp-user: no user named \"", user, "\""));
  }
  if (out.id.uid == 0) {
    return absl::InvalidArgumentError(
        "tcp-user: TCP clients may not act as root; name an unprivileged user");
  }
  return out;
}

absl::StatusOr<Caller> CallerFromPeer(absl::string_view peer, const TcpIdentity& tcp) {
  if (absl::ConsumePrefix(&peer, "fd:")) {
    int fd = -1;
    auto [end, ec] = std::from_chars(peer.data(), peer.data() + peer.size(), fd);
    if (ec != std::errc() || end != peer.data() + peer.size() || fd < 0) {
      return absl::PermissionDeniedError("cannot tell who the caller is (bad peer)");
    }
    int domain = 0;
    socklen_t dlen = sizeof(domain);
    if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) != 0 || domain != AF_UNIX) {
      return absl::PermissionDeniedError("cannot tell who the caller is (not a Unix socket)");
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot tell who the caller is: ", ErrnoError(errno, "SO_PEERCRED").message()));
    }
    Caller c;
    c.uid = cred.uid;
    c.gid = cred.gid;
    c.pid = cred.pid;
    absl::StatusOr<std::vector<uint32_t>> groups = PeerGroups(fd);
    if (!groups.ok()) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot tell the caller's groups: ", groups.status().message()));
    }
    c.groups = std::move(*groups);
    c.privileged = IsPrivilegedUid(c.uid);
    c.description = absl::StrCat("uid ", c.uid, " (pid ", c.pid, ")");
    return c;
  }
  if (absl::StartsWith(peer, "ipv4:") || absl::StartsWith(peer, "ipv6:")) {
    Caller c;
    c.uid = tcp.id.uid;
    c.gid = tcp.id.gid;
    c.groups = tcp.id.groups;
    c.privileged = c.uid != 0 && IsPrivilegedUid(c.uid);
    c.description = absl::StrCat("tcp ", peer, " as ", tcp.name, " (uid ", c.uid, ")");
    return c;
  }
  return absl::PermissionDeniedError(
      absl::StrCat("cannot tell who the caller is (peer \"", peer,
                   "\"): kerncapd serves its Unix socket through its own listener"));
}

}  // namespace kerncap::service
