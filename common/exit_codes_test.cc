#include "common/exit_codes.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace kerncap::exit_code {
namespace {

TEST(ExitCodesTest, TableIsOrderedAndNamesAreUnique) {
  std::set<std::string> names;
  int last = -1;
  for (const ExitCodeInfo& e : AllExitCodes()) {
    EXPECT_GT(e.code, last);
    last = e.code;
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    EXPECT_STRNE(e.meaning, "");
    EXPECT_STREQ(ExitCodeName(e.code), e.name);
  }
  EXPECT_STREQ(ExitCodeName(42), "unknown");
}

TEST(ExitCodesTest, StatusesMapByMeaning) {
  EXPECT_EQ(ForStatus(absl::OkStatus()), kOk);
  EXPECT_EQ(ForStatus(absl::NotFoundError("x")), kNotFound);
  EXPECT_EQ(ForStatus(absl::UnavailableError("x")), kUnavailable);
  EXPECT_EQ(ForStatus(absl::DeadlineExceededError("x")), kUnavailable);
  EXPECT_EQ(ForStatus(absl::UnauthenticatedError("x")), kPermission);
  EXPECT_EQ(ForStatus(absl::PermissionDeniedError("x")), kPermission);
  EXPECT_EQ(ForStatus(absl::DataLossError("x")), kDataLoss);
  EXPECT_EQ(ForStatus(absl::AlreadyExistsError("x")), kConflict);
  EXPECT_EQ(ForStatus(absl::FailedPreconditionError("x")), kError);
  EXPECT_EQ(ForStatus(absl::InvalidArgumentError("x")), kUsage);
  EXPECT_EQ(ForStatus(absl::InternalError("x")), kError);
  // Distinct outcomes never share a code.
  EXPECT_NE(kMismatch, kError);
  EXPECT_NE(kNotFound, kError);
}

TEST(ExitCodesTest, AnExplicitCodeWinsAndSurvivesCopies) {
  absl::Status s = WithExitCode(absl::FailedPreconditionError("preflight: outputs differ"), kMismatch);
  absl::Status copy = s;
  EXPECT_EQ(ForStatus(copy), kMismatch);
  EXPECT_EQ(copy.message(), "preflight: outputs differ");
  // OK stays OK: an exit code is never attached to success.
  EXPECT_EQ(ForStatus(WithExitCode(absl::OkStatus(), kRefused)), kOk);
}

}  // namespace
}  // namespace kerncap::exit_code
