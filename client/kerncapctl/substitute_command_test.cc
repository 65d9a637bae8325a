#include "client/kerncapctl/substitute_command.h"

#include <string>

#include "gtest/gtest.h"

namespace kerncap::ctl {
namespace {

TEST(SubstituteCommandTest, DetectsCodeObjectFormats) {
  EXPECT_EQ(*DetectCodeObjectFormat(std::string("\x7f" "ELF\x02\x01", 6), "k.cubin"), "cubin");
  EXPECT_EQ(*DetectCodeObjectFormat(std::string("\x50\xed\x55\xba\x01\x00", 6), "k.fatbin"),
            "fatbin");
  EXPECT_EQ(*DetectCodeObjectFormat(".version 8.8\n.target sm_90\n.address_size 64\n", "k.ptx"),
            "ptx");
  auto bad = DetectCodeObjectFormat("int main() {}", "k.cu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("k.cu"), std::string::npos);
  EXPECT_FALSE(DetectCodeObjectFormat("", "empty").ok());
}

}  // namespace
}  // namespace kerncap::ctl
