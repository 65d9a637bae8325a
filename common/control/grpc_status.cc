#include "common/control/grpc_status.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "common/exit_codes.h"

namespace kerncap::service {
namespace {

// Both enums follow google.rpc.Code; check the two ends of the range so a
// future renumbering cannot slip through silently.
static_assert(static_cast<int>(absl::StatusCode::kOk) == static_cast<int>(grpc::StatusCode::OK));
static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) ==
              static_cast<int>(grpc::StatusCode::UNAUTHENTICATED));
static_assert(static_cast<int>(absl::StatusCode::kDataLoss) ==
              static_cast<int>(grpc::StatusCode::DATA_LOSS));

constexpr int kMaxCanonicalCode = static_cast<int>(grpc::StatusCode::UNAUTHENTICATED);

// An exit code set on a status (exit_code::WithExitCode: a preflight whose
// validation found differences exits 8, not "failed precondition") crosses
// gRPC in the status details as "kerncap.dev/exit_code=N".
constexpr char kExitCodeDetail[] = "kerncap.dev/exit_code=";

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  int code = static_cast<int>(status.code());
  if (code < 0 || code > kMaxCanonicalCode) code = static_cast<int>(grpc::StatusCode::UNKNOWN);
  std::string details;
  if (std::optional<int> exit = exit_code::ExplicitCode(status)) {
    details = absl::StrCat(kExitCodeDetail, *exit);
  }
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(status.message()), details);
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  int code = static_cast<int>(status.error_code());
  if (code < 0 || code > kMaxCanonicalCode) code = static_cast<int>(absl::StatusCode::kUnknown);
  absl::Status out(static_cast<absl::StatusCode>(code), status.error_message());
  // error_details() returns a copy: keep it alive while it is parsed.
  const std::string details_copy = status.error_details();
  absl::string_view details = details_copy;
  int exit = 0;
  // Only a plain exit code in range is taken from a peer.
  if (absl::ConsumePrefix(&details, kExitCodeDetail) && absl::SimpleAtoi(details, &exit) &&
      exit > 0 && exit < 256) {
    out = exit_code::WithExitCode(std::move(out), exit);
  }
  return out;
}

}  // namespace kerncap::service
