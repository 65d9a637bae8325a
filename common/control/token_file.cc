#include "common/control/token_file.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace kerncap::service {

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  KC_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  absl::string_view first = text;
  if (size_t nl = first.find('\n'); nl != absl::string_view::npos) first = first.substr(0, nl);
  first = absl::StripAsciiWhitespace(first);
  if (first.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is empty"));
  }
  // A token travels as gRPC metadata, which holds printable ASCII only; a
  // control byte or NUL is a damaged file (a truncated or preallocated one),
  // not a token anyone could send.
  for (size_t i = 0; i < first.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(first[i]);
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token file ", path, " holds a non-printable byte (0x", absl::Hex(c, absl::kZeroPad2),
          ") at offset ", i, "; a token is printable ASCII"));
    }
  }
  return std::string(first);
}

std::string BearerValue(absl::string_view token) { return absl::StrCat(kBearerPrefix, token); }

bool ParseBearerValue(absl::string_view value, absl::string_view* token) {
  if (!absl::ConsumePrefix(&value, kBearerPrefix)) return false;
  *token = value;
  return true;
}

}  // namespace kerncap::service
