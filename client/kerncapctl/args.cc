#include "client/kerncapctl/args.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/control/api_names.h"
#include "common/status_macros.h"

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

absl::StatusOr<absl::Time> ParseTimePoint(absl::string_view text, absl::Time now,
                                          absl::string_view flag) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  const std::string prefix = flag.empty() ? "" : absl::StrCat(flag, ": ");
  if (t.empty()) return absl::InvalidArgumentError(absl::StrCat(prefix, "empty time"));
  // Dates and times first: "2026" alone would otherwise read as 2026 seconds.
  if (t.find('-') != absl::string_view::npos) {
    const std::string s(t);
    absl::Time out;
    std::string err;
    // With an explicit offset (RFC 3339).
    if (absl::ParseTime(absl::RFC3339_full, s, &out, &err)) return out;
    for (const char* f : {"%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M",
                          "%Y-%m-%dT%H:%M", "%Y-%m-%d"}) {
      if (absl::ParseTime(f, s, absl::LocalTimeZone(), &out, &err)) return out;
    }
  } else {
    auto ago = ParseDuration(t);
    if (ago.ok()) return now - *ago;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      prefix, "expected a duration ago (30m, 2h, 1d), a date (2026-11-29), a local time "
              "(2026-11-29 18:00) or RFC 3339 (2026-11-29T18:00:00Z); got \"", text, "\""));
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
  std::optional<v1::NameMatch> m = api::Parse<v1::NameMatch>(absl::AsciiStrToLower(text));
  if (m) return *m;
  return absl::InvalidArgumentError(
      absl::StrCat("--match: expected one of ",
                   absl::StrJoin(api::EnumNames(v1::NameMatch_descriptor()), ", "), "; got \"",
                   text, "\""));
}

absl::StatusOr<KernelPattern> ParseKernelPattern(absl::string_view kernel,
                                                 absl::string_view match_flag) {
  KC_ASSIGN_OR_RETURN(v1::NameMatch flag, ParseNameMatch(match_flag));
  KernelPattern out;
  out.kernel = std::string(kernel);
  out.match = flag;
  const size_t colon = kernel.find(':');
  if (colon == absl::string_view::npos ||
      (colon + 1 < kernel.size() && kernel[colon + 1] == ':')) {
    return out;
  }
  std::optional<v1::NameMatch> named =
      api::Parse<v1::NameMatch>(absl::AsciiStrToLower(kernel.substr(0, colon)));
  if (!named) return out;  // not a kind: part of the pattern ("a:b")
  if (flag != v1::NAME_SUBSTRING && flag != *named) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kernel=", kernel.substr(0, colon), ":... and --match=", match_flag,
        " name different match kinds; give one"));
  }
  out.kernel = std::string(kernel.substr(colon + 1));
  out.match = *named;
  if (out.kernel.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kernel=", kernel, ": the pattern after the kind is empty"));
  }
  return out;
}

absl::StatusOr<v1::Selector> SelectorFromFlags(const SelectorFlags& f) {
  KC_ASSIGN_OR_RETURN(KernelPattern pattern, ParseKernelPattern(f.kernel, f.match));
  v1::Selector s;
  s.set_kernel(pattern.kernel);
  s.set_match(pattern.match);
  s.set_pid(f.pid);
  s.set_process_name(f.process);
  if (f.device >= 0) {
    s.set_device(f.device);
    s.set_has_device(true);
  }
  if (f.rank >= 0) {
    s.set_rank(f.rank);
    s.set_has_rank(true);
  }
  return s;
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
