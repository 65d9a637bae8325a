// token_file.h: the bearer token file that guards kerncapd's TCP listener
// (daemon/service/auth.h checks it) and that kerncapctl sends.
#ifndef KERNCAP_COMMON_CONTROL_TOKEN_FILE_H_
#define KERNCAP_COMMON_CONTROL_TOKEN_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace kerncap::service {

// Reads a token file: the first line, surrounding whitespace removed.
// InvalidArgument when empty.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace kerncap::service

#endif  // KERNCAP_COMMON_CONTROL_TOKEN_FILE_H_
