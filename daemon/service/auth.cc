#include "daemon/service/auth.h"

#include "common/control/token_file.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kerncap::service {
namespace {

// Compares without an early exit so the time taken does not reveal how many
// leading bytes of a guess were right.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

}  // namespace

void TokenAuthorizer::SetToken(std::string token) {
  absl::MutexLock lock(&mu_);
  token_ = std::move(token);
}

bool TokenAuthorizer::enabled() const {
  absl::MutexLock lock(&mu_);
  return !token_.empty();
}

bool TokenAuthorizer::IsUnixPeer(absl::string_view peer) {
  // "fd:N": a connection kerncapd's own Unix listener accepted and handed to
  // gRPC (unix_listener.h); it serves no other kind of descriptor.
  return absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:") ||
         absl::StartsWith(peer, "fd:");
}

absl::Status TokenAuthorizer::CheckPeer(absl::string_view peer,
                                        const std::string* authorization) const {
  if (IsUnixPeer(peer)) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (token_.empty()) return absl::OkStatus();
  if (authorization == nullptr) {
    return absl::UnauthenticatedError(
        "this kerncapd requires a token on TCP: send \"authorization: Bearer <token>\" "
        "(kerncapctl --token-file)");
  }
  absl::string_view value;
  if (!ParseBearerValue(*authorization, &value) || !ConstantTimeEquals(value, token_)) {
    return absl::UnauthenticatedError("invalid bearer token");
  }
  return absl::OkStatus();
}

absl::Status TokenAuthorizer::Check(const grpc::ServerContext& context) const {
  const auto& md = context.client_metadata();
  auto it = md.find(kAuthorizationMetadataKey);
  if (it == md.end()) return CheckPeer(context.peer(), nullptr);
  std::string value(it->second.data(), it->second.size());
  return CheckPeer(context.peer(), &value);
}

}  // namespace kerncap::service
