#include "common/control/grpc_status.h"

#include <string>

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

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  int code = static_cast<int>(status.code());
  if (code < 0 || code > kMaxCanonicalCode) code = static_cast<int>(grpc::StatusCode::UNKNOWN);
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  int code = static_cast<int>(status.error_code());
  if (code < 0 || code > kMaxCanonicalCode) code = static_cast<int>(absl::StatusCode::kUnknown);
  return absl::Status(static_cast<absl::StatusCode>(code), status.error_message());
}

}  // namespace kerncap::service
