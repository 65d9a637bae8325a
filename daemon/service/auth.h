// auth.h: the optional bearer token that guards kerncapd's TCP listener.
//
// Clients send gRPC metadata "authorization: Bearer <token>". Connections on
// the Unix socket are trusted (the socket is mode 0660 in a 0750 directory);
// TCP peers must present the token when one is configured, else every RPC
// fails with UNAUTHENTICATED. The token can be replaced at runtime (SIGHUP).
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef KERNCAP_DAEMON_SERVICE_AUTH_H_
#define KERNCAP_DAEMON_SERVICE_AUTH_H_

#include <grpcpp/server_context.h>

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace kerncap::service {

class TokenAuthorizer {
 public:
  // An empty token turns the check off.
  void SetToken(std::string token) ABSL_LOCKS_EXCLUDED(mu_);
  bool enabled() const ABSL_LOCKS_EXCLUDED(mu_);

  // OK for Unix-socket peers and when no token is set; otherwise the value of
  // the "authorization" metadata must be exactly "Bearer <token>".
  absl::Status Check(const grpc::ServerContext& context) const ABSL_LOCKS_EXCLUDED(mu_);
  // The same decision from its parts (peer as grpc::ServerContext::peer()).
  absl::Status CheckPeer(absl::string_view peer, const std::string* authorization) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // gRPC peers look like "unix:/path", "ipv4:1.2.3.4:5" or "ipv6:[::1]:5".
  static bool IsUnixPeer(absl::string_view peer);

 private:
  mutable absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kerncap::service

#endif  // KERNCAP_DAEMON_SERVICE_AUTH_H_
