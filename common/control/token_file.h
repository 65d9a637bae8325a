// token_file.h: the bearer token file that guards kerncapd's TCP listener
// (daemon/service/auth.h checks it) and that kerncapctl sends.
#ifndef KERNCAP_COMMON_CONTROL_TOKEN_FILE_H_
#define KERNCAP_COMMON_CONTROL_TOKEN_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kerncap::service {

// How the token travels: gRPC metadata "authorization: Bearer <token>".
inline constexpr char kAuthorizationMetadataKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";
// "Bearer <token>".
std::string BearerValue(absl::string_view token);
// The token of a "Bearer <token>" value; false when the value has another form.
bool ParseBearerValue(absl::string_view value, absl::string_view* token);

// Reads a token file: the first line, surrounding whitespace removed.
// InvalidArgument when empty or when the token holds a byte outside
// printable ASCII (0x20..0x7e), which no gRPC client could send.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace kerncap::service

#endif  // KERNCAP_COMMON_CONTROL_TOKEN_FILE_H_
