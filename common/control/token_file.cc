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
  return std::string(first);
}

std::string BearerValue(absl::string_view token) { return absl::StrCat(kBearerPrefix, token); }

bool ParseBearerValue(absl::string_view value, absl::string_view* token) {
  if (!absl::ConsumePrefix(&value, kBearerPrefix)) return false;
  *token = value;
  return true;
}

}  // namespace kerncap::service
