#include "common/digest.h"

#include <string>

#include "gtest/gtest.h"

namespace kerncap {
namespace {

TEST(DigestTest, Sha256MatchesKnownVector) {
  // FIPS 180-2 test vector for "abc".
  EXPECT_EQ(Sha256("abc").ToHex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(DigestTest, HexRoundTripAndRejectsBadInput) {
  Digest d = Sha256("kerncap");
  auto back = Digest::FromHex(d.ToHex());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, d);
  EXPECT_FALSE(Digest::FromHex("abc").ok());
  EXPECT_FALSE(Digest::FromHex(std::string(64, 'g')).ok());
  EXPECT_FALSE(Digest::FromBytes("short").ok());
}

TEST(DigestTest, IsAllZeroFindsLastByte) {
  std::string buf(1 << 20, '\0');
  EXPECT_TRUE(IsAllZero(buf.data(), buf.size()));
  buf.back() = 1;
  EXPECT_FALSE(IsAllZero(buf.data(), buf.size()));
  buf.back() = 0;
  buf[300] = 7;
  EXPECT_FALSE(IsAllZero(buf.data(), buf.size()));
}

}  // namespace
}  // namespace kerncap
