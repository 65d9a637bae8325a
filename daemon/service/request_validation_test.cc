#include "daemon/service/request_validation.h"

#include <cstdlib>
#include <filesystem>

#include "gtest/gtest.h"

namespace kerncap::service {
namespace {

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

TEST(ValidateIdTest, AcceptsIdsAndPrefixes) {
  EXPECT_TRUE(ValidateId("cap-7f3a", "capture_id").ok());
  EXPECT_TRUE(ValidateId("arm_12.b", "arm_id").ok());
}

TEST(ValidateIdTest, RejectsEmptyTraversalAndOddBytes) {
  EXPECT_EQ(ValidateId("", "capture_id").code(), kInvalid);
  EXPECT_EQ(ValidateId("..", "capture_id").code(), kInvalid);
  EXPECT_EQ(ValidateId("cap/../x", "capture_id").code(), kInvalid);
  EXPECT_EQ(ValidateId("cap 1", "capture_id").code(), kInvalid);
  EXPECT_EQ(ValidateId(std::string(200, 'a'), "capture_id").code(), kInvalid);
  absl::Status s = ValidateId("a/b", "capture_id");
  EXPECT_NE(s.message().find("capture_id"), absl::string_view::npos) << s;
}

TEST(ValidateListCapturesTest, LimitAndTag) {
  v1::ListCapturesRequest r;
  EXPECT_TRUE(ValidateListCaptures(r).ok());
  r.set_limit(100'000);
  EXPECT_TRUE(ValidateListCaptures(r).ok());
  r.set_limit(4'000'000'000u);
  EXPECT_EQ(ValidateListCaptures(r).code(), kInvalid);
  r.set_limit(0);
  r.set_tag("keyonly");  // any capture that has the tag
  EXPECT_TRUE(ValidateListCaptures(r).ok());
  r.set_tag("=v");
  EXPECT_EQ(ValidateListCaptures(r).code(), kInvalid);
  r.set_tag("k=");
  EXPECT_TRUE(ValidateListCaptures(r).ok());
}

TEST(ValidateArmTest, Rules) {
  const int64_t now = 1'000'000;
  v1::ArmRequest r;
  r.mutable_selector()->set_kernel("matmul");
  EXPECT_TRUE(ValidateArm(r, now).ok());
  r.set_ttl_ms(1000);
  r.set_expires_unix_ms(now + 5);
  EXPECT_EQ(ValidateArm(r, now).code(), kInvalid);  // both
  r.set_ttl_ms(0);
  r.set_expires_unix_ms(now - 5);
  EXPECT_EQ(ValidateArm(r, now).code(), kInvalid);  // past
  r.set_expires_unix_ms(0);
  r.mutable_selector()->set_match(static_cast<v1::NameMatch>(77));
  EXPECT_EQ(ValidateArm(r, now).code(), kInvalid);
  r.mutable_selector()->set_match(v1::NAME_REGEX);
  r.mutable_selector()->set_kernel("");
  EXPECT_EQ(ValidateArm(r, now).code(), kInvalid);  // regex needs a pattern
  r.mutable_selector()->set_kernel("gemm.*");
  (*r.mutable_tags())[""] = "x";
  EXPECT_EQ(ValidateArm(r, now).code(), kInvalid);
  r.mutable_tags()->clear();
  r.mutable_selector()->set_has_device(true);
  r.mutable_selector()->set_device(-2);
  EXPECT_EQ(ValidateArm(r, now).code(), kInvalid);
}

TEST(ValidateDisarmTest, NeedsExactlyOneOfIdOrAll) {
  v1::DisarmRequest r;
  EXPECT_EQ(ValidateDisarm(r).code(), kInvalid);
  r.set_all(true);
  EXPECT_TRUE(ValidateDisarm(r).ok());
  r.set_arm_id("arm-1");
  EXPECT_EQ(ValidateDisarm(r).code(), kInvalid);
  r.set_all(false);
  EXPECT_TRUE(ValidateDisarm(r).ok());
}

TEST(ParseDigestsTest, SizeAndCount) {
  google::protobuf::RepeatedPtrField<std::string> raw;
  *raw.Add() = Sha256("x").ToBytes();
  auto ok = ParseDigests(raw, 10, "digests");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->size(), 1u);
  *raw.Add() = "abc";
  EXPECT_EQ(ParseDigests(raw, 10, "digests").status().code(), kInvalid);
  raw.RemoveLast();
  for (int i = 0; i < 5; ++i) *raw.Add() = Sha256("y").ToBytes();
  EXPECT_EQ(ParseDigests(raw, 3, "digests").status().code(), kInvalid);
}

TEST(ValidateReferenceFolderTest, AbsoluteExistingDirectoryOnly) {
  std::string dir = testing::TempDir();
  EXPECT_TRUE(ValidateReferenceFolder(std::filesystem::absolute(dir).string()).ok());
  EXPECT_EQ(ValidateReferenceFolder("").code(), kInvalid);
  EXPECT_EQ(ValidateReferenceFolder("relative/dir").code(), kInvalid);
  EXPECT_EQ(ValidateReferenceFolder("/tmp/../etc").code(), kInvalid);
  EXPECT_EQ(ValidateReferenceFolder("/nonexistent/kerncap/xyz").code(), kInvalid);
  EXPECT_EQ(ValidateReferenceFolder("/proc/self/status").code(), kInvalid);  // a file
}

TEST(ValidateImportedManifestTest, VersionAndId) {
  v1::CaptureManifest m;
  m.set_format_version(1);
  m.set_capture_id("cap-12");
  EXPECT_TRUE(ValidateImportedManifest(m).ok());
  m.set_format_version(9);
  EXPECT_EQ(ValidateImportedManifest(m).code(), kInvalid);
  m.set_format_version(1);
  m.set_capture_id("../../etc");
  EXPECT_EQ(ValidateImportedManifest(m).code(), kInvalid);
}

}  // namespace
}  // namespace kerncap::service
