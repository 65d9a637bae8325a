#include "daemon/service/caller_identity.h"

#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace kerncap::service {
namespace {

// "fd:N": the kernel's record of the connecting process, nothing the peer
// says.
TEST(CallerIdentityTest, AUnixPeerIsItsSocketsCredentials) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  TcpIdentity tcp;
  absl::StatusOr<Caller> c = CallerFromPeer(absl::StrCat("fd:", sv[0]), tcp);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->uid, ::getuid());
  EXPECT_EQ(c->gid, ::getgid());
  EXPECT_EQ(c->pid, ::getpid());
  EXPECT_EQ(c->privileged, true);  // the daemon's own user (this process)
  EXPECT_TRUE(c->MayReach(12345));
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(CallerIdentityTest, WhatCannotBeToldIsRefused) {
  TcpIdentity tcp;
  for (const char* peer : {"unix:/run/kerncap/kerncapd.sock", "fd:abc", "fd:-1", "fd:99999",
                           "ipv5:1.2.3.4", ""}) {
    absl::StatusOr<Caller> c = CallerFromPeer(peer, tcp);
    ASSERT_FALSE(c.ok()) << peer;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kPermissionDenied) << peer;
  }
  // A descriptor that is not a Unix socket.
  int fd = ::dup(0);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(CallerFromPeer(absl::StrCat("fd:", fd), tcp).ok());
  ::close(fd);
}

TEST(CallerIdentityTest, TcpPeersActAsTheConfiguredUserNeverRoot) {
  absl::StatusOr<TcpIdentity> tcp = ResolveTcpIdentity("4242");
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  absl::StatusOr<Caller> c = CallerFromPeer("ipv4:10.0.0.5:4431", *tcp);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->uid, 4242u);
  EXPECT_EQ(c->pid, 0);
  EXPECT_EQ(c->privileged, ::geteuid() == 4242u);
  EXPECT_NE(c->description.find("10.0.0.5"), std::string::npos) << c->description;
  EXPECT_FALSE(ResolveTcpIdentity("root").ok());
  EXPECT_FALSE(ResolveTcpIdentity("0").ok());
  EXPECT_FALSE(ResolveTcpIdentity("no-such-user-kerncap").ok());
  absl::StatusOr<TcpIdentity> dflt = ResolveTcpIdentity("");
  ASSERT_TRUE(dflt.ok()) << dflt.status();
  if (::geteuid() == 0) {
    EXPECT_NE(dflt->id.uid, 0u) << "a root daemon's TCP clients act as root";
  } else {
    EXPECT_EQ(dflt->id.uid, ::geteuid());
  }
}

}  // namespace
}  // namespace kerncap::service
