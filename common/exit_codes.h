// exit_codes.h: the one exit-code table of every kerncap binary (kerncapctl,
// kerncapd, kerncap-replay, and the reproducer projects' Makefile and run.py,
// which pass kerncap-replay's code on). docs/EXIT_CODES.md is the user-facing
// copy of this table; `kerncapctl help exit-codes` prints it from here.
//
// A code says what kind of outcome it was, never which binary produced it:
// 3 is "not found" everywhere, and a failed validation (the kernel ran and
// its outputs differ) has its own code instead of sharing 1 with errors.
#ifndef KERNCAP_COMMON_EXIT_CODES_H_
#define KERNCAP_COMMON_EXIT_CODES_H_

#include <span>
#include <string>

#include <optional>

#include "absl/status/status.h"

namespace kerncap::exit_code {

inline constexpr int kOk = 0;            // done; validate: every compared region matched
inline constexpr int kError = 1;         // failed for a reason not listed below
inline constexpr int kUsage = 2;         // bad command line: unknown command/flag, bad value
inline constexpr int kNotFound = 3;      // no such capture, arm, file or context
inline constexpr int kUnavailable = 4;   // kerncapd not reachable or not answering in time
inline constexpr int kDataLoss = 5;      // stored data failed verification (verify, digests)
inline constexpr int kPermission = 6;    // permission denied or authentication failed
inline constexpr int kConflict = 7;      // already exists or in use (store locked, --out exists)
inline constexpr int kMismatch = 8;      // validation ran and outputs differ from the captured ones
inline constexpr int kRefused = 9;       // not done: the answer would not be faithful (nothing validated)
inline constexpr int kNoDevice = 77;     // no GPU driver or device (ctest/automake "skipped")

struct ExitCodeInfo {
  int code;
  const char* name;     // short lowercase name, as in JSON error objects
  const char* meaning;  // one line for help texts
};

// Every code above, in increasing order.
std::span<const ExitCodeInfo> AllExitCodes();
// "ok", "not_found", ...; "unknown" for a code not in the table.
const char* ExitCodeName(int code);
// The table as one line for --help footers: "0 ok, 1 error, 2 usage, ...,
// 77 no_device (docs/EXIT_CODES.md)". Every binary's help prints this, so
// help and docs cannot drift apart (tests/repo_checks/check_exit_codes.py).
std::string ExitCodesSummary();

// The exit code for a failed operation's status (kOk for OK). gRPC and absl
// codes map by meaning: NotFound -> kNotFound, Unavailable and
// DeadlineExceeded -> kUnavailable, PermissionDenied and Unauthenticated ->
// kPermission, DataLoss -> kDataLoss, AlreadyExists -> kConflict,
// InvalidArgument and OutOfRange -> kUsage, the rest -> kError.
// A status whose exit code is set explicitly (e.g. a preflight that ran a
// validation which found differences: kMismatch) rides in a payload, so it
// survives being returned through layers that only pass statuses on.
int ForStatus(const absl::Status& status);
absl::Status WithExitCode(absl::Status status, int code);
// The exit code WithExitCode set on `status`, if any.
std::optional<int> ExplicitCode(const absl::Status& status);

}  // namespace kerncap::exit_code

#endif  // KERNCAP_COMMON_EXIT_CODES_H_
