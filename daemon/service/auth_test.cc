#include "daemon/service/auth.h"

#include <unistd.h>

#include "common/file_util.h"
#include "gtest/gtest.h"

namespace kerncap::service {
namespace {

TEST(TokenAuthorizerTest, NoTokenAllowsEveryone) {
  TokenAuthorizer auth;
  EXPECT_FALSE(auth.enabled());
  EXPECT_TRUE(auth.CheckPeer("ipv4:10.0.0.1:5000", nullptr).ok());
}

TEST(TokenAuthorizerTest, UnixPeersAreTrusted) {
  TokenAuthorizer auth;
  auth.SetToken("s3cret");
  EXPECT_TRUE(auth.CheckPeer("unix:/run/kerncap/kerncapd.sock", nullptr).ok());
}

TEST(TokenAuthorizerTest, TcpPeersNeedTheExactBearerToken) {
  TokenAuthorizer auth;
  auth.SetToken("s3cret");
  std::string good = "Bearer s3cret";
  std::string bad = "Bearer s3cres";
  std::string no_scheme = "s3cret";
  EXPECT_TRUE(auth.CheckPeer("ipv6:[::1]:7443", &good).ok());
  EXPECT_EQ(auth.CheckPeer("ipv4:1.2.3.4:1", nullptr).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.CheckPeer("ipv4:1.2.3.4:1", &bad).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(auth.CheckPeer("ipv4:1.2.3.4:1", &no_scheme).code(),
            absl::StatusCode::kUnauthenticated);
  auth.SetToken("rotated");
  EXPECT_EQ(auth.CheckPeer("ipv4:1.2.3.4:1", &good).code(), absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace kerncap::service
