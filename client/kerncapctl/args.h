// args.h: parsers for kerncapctl's argument values (durations, tags, name
// matching modes), kept apart from CLI11 wiring so they can be tested alone.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_ARGS_H_
#define KERNCAP_CLIENT_KERNCAPCTL_ARGS_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap::ctl {

// "30s", "5m", "1h30m", "250ms", "2d" or a bare number of seconds ("90").
// Must be positive.
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text);

// A point in time for --since/--until: a duration ago ("2h", "30m", "1d"),
// a date "2026-11-29" (local midnight), a local time "2026-11-29 18:00[:05]"
// or "2026-11-29T18:00[:05]", or RFC 3339 with an offset ("...T18:00:05Z",
// "...+01:00"). `flag` names the option in the error (none when empty).
absl::StatusOr<absl::Time> ParseTimePoint(absl::string_view text, absl::Time now,
                                          absl::string_view flag);

// "key=value" (value may be empty, may contain '='; key may not be empty).
absl::StatusOr<std::pair<std::string, std::string>> ParseTag(absl::string_view text);

// "substring" | "glob" | "regex" | "mangled".
absl::StatusOr<v1::NameMatch> ParseNameMatch(absl::string_view text);

// --kernel with --match: the pattern and how it matches. The pattern may
// name its match kind itself, as Nsight Compute's --kernel-name takes
// "regex:": "regex:PAT", "glob:PAT", "mangled:NAME", "substring:TEXT". A
// prefix followed by another ':' is a C++ namespace ("regex::Matcher"), not a
// kind. A kind in the pattern and a different --match (other than the
// default, substring) is an error naming both.
struct KernelPattern {
  std::string kernel;
  v1::NameMatch match = v1::NAME_SUBSTRING;
};
absl::StatusOr<KernelPattern> ParseKernelPattern(absl::string_view kernel,
                                                 absl::string_view match_flag);

// The selector flags arm and substitute share (--kernel --match --pid
// --process --device, and arm's --rank): device and rank -1 mean any.
struct SelectorFlags {
  std::string kernel;
  std::string match;
  uint32_t pid = 0;
  std::string process;
  int device = -1;
  int64_t rank = -1;
};
absl::StatusOr<v1::Selector> SelectorFromFlags(const SelectorFlags& flags);

// Where kerncapctl talks to: "unix:/path", "/path" (a Unix socket) or
// "host:port" / "[v6]:port" (TCP). Returns the gRPC target string.
struct Endpoint {
  std::string target;  // "unix:/path" or "host:port"
  bool is_unix = false;
  std::string unix_path;
};
absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view text);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_ARGS_H_
