#include "client/kerncapctl/args.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kerncap::ctl {

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  absl::Duration d;
  double secs = 0;
  int64_t days = 0;
  if (t.empty()) return absl::InvalidArgumentError("empty duration");
  if (absl::SimpleAtod(t, &secs)) {
    d = absl::Seconds(secs);
  } else if (absl::EndsWith(t, "d") && absl::SimpleAtoi(t.substr(0, t.size() - 1), &days)) {
    d = absl::Hours(24 * days);
  } else if (!absl::ParseDuration(t, &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad duration \"", text, "\" (examples: 30s, 5m, 1h30m, 250ms, 2d, 90)"));
  }
  if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("duration \"", text, "\" must be positive"));
  }
  return d;
}

absl::StatusOr<std::pair<std::string, std::string>> ParseTag(absl::string_view text) {
  size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad tag \"", text, "\": expected key=value, e.g. --tag run=baseline"));
  }
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

absl::StatusOr<v1::NameMatch> ParseNameMatch(absl::string_view text) {
  std::string t = absl::AsciiStrToLower(text);
  if (t == "substring") return v1::NAME_SUBSTRING;
  if (t == "glob") return v1::NAME_GLOB;
  if (t == "regex") return v1::NAME_REGEX;
  if (t == "mangled") return v1::NAME_MANGLED;
  return absl::InvalidArgumentError(
      absl::StrCat("bad --match \"", text, "\": one of substring, glob, regex, mangled"));
}

absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view text) {
  Endpoint e;
  absl::string_view t = text;
  if (absl::ConsumePrefix(&t, "unix:") || absl::StartsWith(t, "/")) {
    if (t.empty() || t[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("bad endpoint \"", text, "\": unix sockets need an absolute path"));
    }
    e.is_unix = true;
    e.unix_path = std::string(t);
    e.target = absl::StrCat("unix:", t);
    return e;
  }
  size_t colon = t.rfind(':');
  uint32_t port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(t.substr(colon + 1), &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad endpoint \"", text, "\": expected HOST:PORT, [IPv6]:PORT or unix:/PATH"));
  }
  e.target = std::string(t);
  return e;
}

}  // namespace kerncap::ctl
