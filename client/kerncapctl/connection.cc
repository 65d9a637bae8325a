#include "client/kerncapctl/connection.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/kerncapctl/args.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/control/default_paths.h"
#include "common/control/token_file.h"
#include "common/control/grpc_status.h"
#include "common/control/limits.h"

namespace kerncap::ctl {

bool IsTlsHandshakeFailure(absl::string_view message) {
  const std::string m = absl::AsciiStrToLower(message);
  for (const char* word : {"handshake", "ssl_error", "certificate", "tsi_", "ssl routines"}) {
    if (absl::StrContains(m, word)) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const ConnectionOptions& options,
                                                             const std::string& endpoint) {
  std::unique_ptr<Connection> c(new Connection());
  c->timeout_s_ = options.timeout_s;
  std::string spec = endpoint;
  if (spec.empty()) spec = options.host.empty() ? options.socket : options.host;
  if (spec.empty()) return absl::InvalidArgumentError("no --socket or --host given");
  KC_ASSIGN_OR_RETURN(Endpoint ep, ParseEndpoint(spec));

  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (ep.is_unix) {
    c->where_ = absl::StrCat("socket ", ep.unix_path);
    struct stat st;
    if (::stat(ep.unix_path.c_str(), &st) != 0) {
      if (errno == EACCES) {
        const std::string hint = service::SocketAccessHint(ep.unix_path);
        return absl::PermissionDeniedError(absl::StrCat(
            "cannot reach ", ep.unix_path, ": permission denied",
            hint.empty() ? std::string() : absl::StrCat(" (", hint, ")")));
      }
      return absl::UnavailableError(absl::StrCat(
          "no kerncapd socket at ", ep.unix_path,
          " — is kerncapd running? (start it with `kerncapd`, or pass --socket=PATH)"));
    }
    if (::access(ep.unix_path.c_str(), R_OK | W_OK) != 0) {
      const std::string hint = service::SocketAccessHint(ep.unix_path);
      return absl::PermissionDeniedError(absl::StrCat(
          "no permission to use ", ep.unix_path, " (",
          hint.empty() ? std::string("the socket is mode 0660: join its group, or run as its owner")
                       : hint,
          ")"));
    }
    creds = grpc::InsecureChannelCredentials();
  } else {
    c->where_ = absl::StrCat("host ", ep.target);
    c->tls_ = !options.insecure;
    if (options.insecure) {
      creds = grpc::InsecureChannelCredentials();
    } else {
      grpc::SslCredentialsOptions ssl;
      if (!options.tls_ca.empty()) {
        KC_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile(options.tls_ca));
      }
      if (!options.tls_cert.empty() || !options.tls_key.empty()) {
        if (options.tls_cert.empty() || options.tls_key.empty()) {
          return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
        }
        KC_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFile(options.tls_cert));
        KC_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFile(options.tls_key));
      }
      creds = grpc::SslCredentials(ssl);
    }
    if (!options.token_file.empty()) {
      KC_ASSIGN_OR_RETURN(c->token_, service::ReadTokenFile(options.token_file));
    }
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(service::kMaxMessageBytes);
  args.SetMaxSendMessageSize(service::kMaxMessageBytes);
  c->channel_ = grpc::CreateCustomChannel(ep.target, creds, args);
  c->stub_ = v1::KerncapControl::NewStub(c->channel_);
  return c;
}

std::unique_ptr<grpc::ClientContext> Connection::NewContext(bool unary) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!token_.empty()) {
    ctx->AddMetadata(service::kAuthorizationMetadataKey, service::BearerValue(token_));
  }
  if (unary && timeout_s_ > 0) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000)));
  }
  return ctx;
}

absl::Status Connection::Check(const grpc::Status& status) const {
  absl::Status s = service::FromGrpcStatus(status);
  // A TLS handshake that fails reaches us as UNAVAILABLE, like a daemon that
  // is not running; it is an authentication failure (exit 6), and retrying
  // or starting kerncapd would not help.
  if (s.code() == absl::StatusCode::kUnavailable && tls_ && IsTlsHandshakeFailure(s.message())) {
    return absl::UnauthenticatedError(absl::StrCat(
        "TLS handshake with kerncapd failed, ", where_, " (", s.message(),
        "): check that --tls-ca names the CA that signed the daemon's certificate, that the "
        "host name matches it, and --tls-cert/--tls-key when the daemon asks for a client "
        "certificate"));
  }
  if (s.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach kerncapd (", s.message(), ") — is kerncapd running? ", where_));
  }
  if (s.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(absl::StrCat(
        "kerncapd did not answer in time (", s.message(), "); ", where_, " (see --timeout)"));
  }
  return s;
}

}  // namespace kerncap::ctl
