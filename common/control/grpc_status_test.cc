#include "common/control/grpc_status.h"

#include "common/exit_codes.h"

#include "gtest/gtest.h"

namespace kerncap::service {
namespace {

TEST(GrpcStatusTest, OkMapsToOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatusTest, KeepsCodeAndMessage) {
  grpc::Status s = ToGrpcStatus(absl::DataLossError("chunk 1f2e: checksum mismatch"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_EQ(s.error_message(), "chunk 1f2e: checksum mismatch");
  EXPECT_EQ(ToGrpcStatus(absl::NotFoundError("x")).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(ToGrpcStatus(absl::UnauthenticatedError("x")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("x")).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST(GrpcStatusTest, RoundTripsEveryCanonicalCode) {
  for (int code = 1; code <= 16; ++code) {
    absl::Status a(static_cast<absl::StatusCode>(code), "m");
    absl::Status back = FromGrpcStatus(ToGrpcStatus(a));
    EXPECT_EQ(back.code(), a.code()) << code;
    EXPECT_EQ(back.message(), "m");
  }
}

TEST(GrpcStatusTest, NonCanonicalCodeBecomesUnknown) {
  absl::Status odd(static_cast<absl::StatusCode>(42), "odd");
  EXPECT_EQ(ToGrpcStatus(odd).error_code(), grpc::StatusCode::UNKNOWN);
}

// An explicit exit code (a preflight whose validation found differences:
// 8) crosses gRPC; a peer cannot pass anything else off as one.
TEST(GrpcStatusTest, AnExplicitExitCodeCrossesGrpc) {
  absl::Status s = exit_code::WithExitCode(absl::FailedPreconditionError("differs"), 8);
  grpc::Status g = ToGrpcStatus(s);
  absl::Status back = FromGrpcStatus(g);
  EXPECT_EQ(back.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(exit_code::ForStatus(back), 8);
  EXPECT_EQ(exit_code::ForStatus(FromGrpcStatus(ToGrpcStatus(absl::NotFoundError("x")))),
            exit_code::kNotFound);
  for (const char* bad : {"kerncap.dev/exit_code=999", "kerncap.dev/exit_code=x", "junk"}) {
    absl::Status b = FromGrpcStatus(grpc::Status(grpc::StatusCode::INTERNAL, "m", bad));
    EXPECT_EQ(exit_code::ForStatus(b), exit_code::kError) << bad;
  }
}

}  // namespace
}  // namespace kerncap::service
