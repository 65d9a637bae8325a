#include "common/control/token_file.h"

#include <unistd.h>

#include "common/file_util.h"
#include "gtest/gtest.h"

namespace kerncap::service {
namespace {

TEST(ReadTokenFileTest, FirstLineTrimmed) {
  std::string path = testing::TempDir() + "/token-" + std::to_string(::getpid());
  ASSERT_TRUE(WriteFileAtomic(path, "  abc123 \nignored\n", 0600).ok());
  auto token = ReadTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "abc123");
  ASSERT_TRUE(WriteFileAtomic(path, "\n", 0600).ok());
  EXPECT_EQ(ReadTokenFile(path).status().code(), absl::StatusCode::kInvalidArgument);
  ::unlink(path.c_str());
  EXPECT_FALSE(ReadTokenFile(path).ok());
}

TEST(TokenFileTest, BearerValueRoundTrips) {
  EXPECT_EQ(BearerValue("s3cret"), "Bearer s3cret");
  absl::string_view token;
  ASSERT_TRUE(ParseBearerValue("Bearer s3cret", &token));
  EXPECT_EQ(token, "s3cret");
  EXPECT_FALSE(ParseBearerValue("Basic s3cret", &token));
  EXPECT_FALSE(ParseBearerValue("bearer s3cret", &token));
}

}  // namespace
}  // namespace kerncap::service
