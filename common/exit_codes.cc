#include "common/exit_codes.h"

#include <array>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace kerncap::exit_code {
namespace {

constexpr char kExitCodePayload[] = "kerncap.dev/exit_code";

constexpr std::array<ExitCodeInfo, 11> kTable = {{
    {kOk, "ok", "success (validate: every compared region matched)"},
    {kError, "error", "failed for a reason not listed here (replay error, I/O, internal)"},
    {kUsage, "usage", "bad command line: unknown command or flag, malformed or out-of-range value"},
    {kNotFound, "not_found", "no such capture, arm, file or context"},
    {kUnavailable, "unavailable", "kerncapd not reachable or not answering in time"},
    {kDataLoss, "data_loss", "stored data failed verification (verify, chunk digests)"},
    {kPermission, "permission", "permission denied or authentication failed"},
    {kConflict, "conflict", "already exists or in use (store locked by another kerncapd, "
                            "repro --out exists without --force)"},
    {kMismatch, "mismatch", "validation ran and the outputs differ from the captured ones"},
    {kRefused, "refused", "not done because the result would not be faithful (e.g. run.py: the "
                          "rebuilt kernel is another binary); nothing was validated"},
    {kNoDevice, "no_device", "no GPU driver or device on this machine (tests report skipped)"},
}};

}  // namespace

std::span<const ExitCodeInfo> AllExitCodes() { return kTable; }

std::string ExitCodesSummary() {
  std::string text;
  for (const ExitCodeInfo& e : kTable) {
    if (!text.empty()) text += ", ";
    text += std::to_string(e.code) + " " + e.name;
  }
  return text + " (docs/EXIT_CODES.md)";
}

const char* ExitCodeName(int code) {
  for (const ExitCodeInfo& e : kTable) {
    if (e.code == code) return e.name;
  }
  return "unknown";
}

absl::Status WithExitCode(absl::Status status, int code) {
  if (!status.ok()) status.SetPayload(kExitCodePayload, absl::Cord(std::to_string(code)));
  return status;
}

std::optional<int> ExplicitCode(const absl::Status& status) {
  if (auto p = status.GetPayload(kExitCodePayload)) {
    int code = 0;
    if (absl::SimpleAtoi(std::string(*p), &code)) return code;
  }
  return std::nullopt;
}

int ForStatus(const absl::Status& status) {
  if (std::optional<int> code = ExplicitCode(status)) return *code;
  switch (status.code()) {
    case absl::StatusCode::kOk: return kOk;
    case absl::StatusCode::kNotFound: return kNotFound;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded: return kUnavailable;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated: return kPermission;
    case absl::StatusCode::kDataLoss: return kDataLoss;
    case absl::StatusCode::kAlreadyExists: return kConflict;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return kUsage;
    default: return kError;
  }
}

}  // namespace kerncap::exit_code
