// grpc_status.h: the one conversion point between absl::Status (used by every
// library in kerncap) and grpc::Status (the wire). Canonical codes have the
// same numeric values in both; the message is kept verbatim.
#ifndef KERNCAP_COMMON_CONTROL_GRPC_STATUS_H_
#define KERNCAP_COMMON_CONTROL_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace kerncap::service {

// absl -> grpc at the service edge (server handlers).
grpc::Status ToGrpcStatus(const absl::Status& status);

// grpc -> absl at the client edge (kerncapctl, daemon-to-daemon pulls).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace kerncap::service

#endif  // KERNCAP_COMMON_CONTROL_GRPC_STATUS_H_
