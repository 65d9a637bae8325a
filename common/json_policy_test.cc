#include "common/json_policy.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace kerncap::json_policy {
namespace {

TEST(JsonPolicyTest, AddressesAreLowercaseHexStrings) {
  EXPECT_EQ(Address(0x7F3A00000000ull), "0x7f3a00000000");
  EXPECT_EQ(Address(0), "0x0");
  EXPECT_EQ(Address(~0ull), "0xffffffffffffffff");
}

TEST(JsonPolicyTest, BytesAreLowercaseHex) {
  EXPECT_EQ(HexBytes(std::string("\x00\xab\xff\x10", 4)), "00abff10");
  EXPECT_EQ(HexBytes(""), "");
}

TEST(JsonPolicyTest, NotFiniteFloatsAreStrings) {
  EXPECT_EQ(Number(1.5), 1.5);
  EXPECT_EQ(Number(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(Number(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(Number(std::nan("")), "nan");
}

TEST(JsonPolicyTest, ErrorIsOneObjectOnOneLine) {
  std::ostringstream err;
  WriteError(err, absl::NotFoundError("no capture \"cap-1\""), 3);
  std::string line = err.str();
  ASSERT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["error"]["code"], "not_found");
  EXPECT_EQ(j["error"]["message"], "no capture \"cap-1\"");
  EXPECT_EQ(j["error"]["exit_code"], 3);
  EXPECT_EQ(j["error"]["status"], "not_found");
  // The code is the exit code's name, whatever status produced it.
  auto usage = ErrorObject(absl::InvalidArgumentError("bad --count"), 2);
  EXPECT_EQ(usage["error"]["code"], "usage");
  EXPECT_EQ(usage["error"]["status"], "invalid_argument");
  EXPECT_EQ(ErrorObject(absl::UnauthenticatedError("bad token"), 6)["error"]["code"],
            "permission");
  EXPECT_EQ(StatusCodeName(absl::StatusCode::kInvalidArgument), "invalid_argument");
}

}  // namespace
}  // namespace kerncap::json_policy
