// connection.h: how kerncapctl reaches a kerncapd (Unix socket, or TCP with
// TLS and an optional bearer token) and how failures become exit codes.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_CONNECTION_H_
#define KERNCAP_CLIENT_KERNCAPCTL_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerncap/v1/control.grpc.pb.h"

namespace kerncap::ctl {

struct ConnectionOptions {
  std::string socket;    // Unix socket path (used when host is empty)
  std::string host;      // HOST:PORT
  std::string tls_ca;    // PEM file of the CA that signed the daemon's cert
  std::string tls_cert;  // client certificate (mutual TLS)
  std::string tls_key;
  std::string token_file;  // bearer token
  bool insecure = false;   // plaintext TCP (only to daemons started with --insecure-tcp)
  double timeout_s = 30;   // deadline of unary calls; 0: none
};

class Connection {
 public:
  // `endpoint` overrides socket/host when non-empty ("unix:/p", "/p", "h:p").
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const ConnectionOptions& options,
                                                          const std::string& endpoint = "");

  v1::KerncapControl::Stub& stub() { return *stub_; }
  // A context with the token attached; unary calls also get the deadline.
  std::unique_ptr<grpc::ClientContext> NewContext(bool unary) const;
  // Converts a call's status, adding a hint for an unreachable daemon.
  absl::Status Check(const grpc::Status& status) const;
  // "socket /run/kerncap/kerncapd.sock" or "host node17:7443".
  const std::string& where() const { return where_; }
  // The deadline of unary calls in seconds (0: none).
  double timeout_s() const { return timeout_s_; }

 private:
  Connection() = default;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::KerncapControl::Stub> stub_;
  std::string token_;
  double timeout_s_ = 0;
  std::string where_;
  bool tls_ = false;  // TCP with TLS
};

// Whether an UNAVAILABLE status's message is gRPC's report of a failed TLS
// handshake (an untrusted or mismatched certificate, a missing client
// certificate) rather than of a daemon that does not answer.
bool IsTlsHandshakeFailure(absl::string_view message);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_CONNECTION_H_
