#include "client/kerncapctl/args.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::ctl {
namespace {

TEST(ParseTimePointTest, AgoDatesAndRfc3339) {
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  EXPECT_EQ(*ParseTimePoint("2h", now, "--since"), now - absl::Hours(2));
  EXPECT_EQ(*ParseTimePoint("2026-11-29T18:00:05Z", now, "--since"),
            absl::FromCivil(absl::CivilSecond(2026, 11, 29, 18, 0, 5), absl::UTCTimeZone()));
  EXPECT_EQ(*ParseTimePoint("2026-11-29", now, "--since"),
            absl::FromCivil(absl::CivilDay(2026, 11, 29), absl::LocalTimeZone()));
  EXPECT_EQ(*ParseTimePoint("2026-11-29 18:00", now, "--until"),
            absl::FromCivil(absl::CivilMinute(2026, 11, 29, 18, 0), absl::LocalTimeZone()));
  auto bad = ParseTimePoint("yesterday", now, "--since");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--since: expected a duration ago"), std::string::npos);
  EXPECT_FALSE(ParseTimePoint("2026-13-45", now, "--since").ok());
}

TEST(ParseDurationTest, Units) {
  EXPECT_EQ(*ParseDuration("30s"), absl::Seconds(30));
  EXPECT_EQ(*ParseDuration("5m"), absl::Minutes(5));
  EXPECT_EQ(*ParseDuration("1h30m"), absl::Minutes(90));
  EXPECT_EQ(*ParseDuration("250ms"), absl::Milliseconds(250));
  EXPECT_EQ(*ParseDuration("2d"), absl::Hours(48));
  EXPECT_EQ(*ParseDuration("90"), absl::Seconds(90));
}

TEST(ParseDurationTest, RejectsGarbageZeroAndNegative) {
  for (const char* bad : {"", "abc", "5x", "0", "-5s", "0s", "inf", "d"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
}

TEST(ParseTagTest, KeyValue) {
  auto kv = ParseTag("run=base=1");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->first, "run");
  EXPECT_EQ(kv->second, "base=1");
  EXPECT_EQ(ParseTag("k=")->second, "");
  EXPECT_FALSE(ParseTag("novalue").ok());
  EXPECT_FALSE(ParseTag("=v").ok());
}

TEST(ParseKernelPatternTest, KindsInThePatternAndTheirConflicts) {
  auto p = ParseKernelPattern("regex:^gemm_.*f16$", "substring");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->kernel, "^gemm_.*f16$");
  EXPECT_EQ(p->match, v1::NAME_REGEX);
  p = ParseKernelPattern("mangled:_Z6matmulPf", "substring");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kernel, "_Z6matmulPf");
  EXPECT_EQ(p->match, v1::NAME_MANGLED);
  p = ParseKernelPattern("GLOB:gemm*", "glob");  // the same kind twice is fine
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->match, v1::NAME_GLOB);
  // Namespaces and other colons are pattern text.
  p = ParseKernelPattern("regex::Matcher::run", "substring");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kernel, "regex::Matcher::run");
  EXPECT_EQ(p->match, v1::NAME_SUBSTRING);
  p = ParseKernelPattern("cutlass:gemm", "glob");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kernel, "cutlass:gemm");
  EXPECT_EQ(p->match, v1::NAME_GLOB);
  // A bare pattern takes --match.
  p = ParseKernelPattern("softmax", "regex");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->match, v1::NAME_REGEX);
  // Conflicts and empty patterns are errors that say so.
  auto bad = ParseKernelPattern("regex:a.*", "glob");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("different match kinds"));
  bad = ParseKernelPattern("regex:", "substring");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("empty"));
  EXPECT_FALSE(ParseKernelPattern("x", "fuzzy").ok());
}

TEST(ParseNameMatchTest, Names) {
  EXPECT_EQ(*ParseNameMatch("substring"), v1::NAME_SUBSTRING);
  EXPECT_EQ(*ParseNameMatch("GLOB"), v1::NAME_GLOB);
  EXPECT_EQ(*ParseNameMatch("regex"), v1::NAME_REGEX);
  EXPECT_EQ(*ParseNameMatch("mangled"), v1::NAME_MANGLED);
  EXPECT_FALSE(ParseNameMatch("fuzzy").ok());
}

TEST(ParseEndpointTest, UnixAndTcp) {
  auto u = ParseEndpoint("unix:/run/k.sock");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->is_unix);
  EXPECT_EQ(u->target, "unix:/run/k.sock");
  EXPECT_EQ(ParseEndpoint("/tmp/x.sock")->unix_path, "/tmp/x.sock");
  auto t = ParseEndpoint("node17:7443");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->is_unix);
  EXPECT_EQ(t->target, "node17:7443");
  EXPECT_TRUE(ParseEndpoint("[::1]:7443").ok());
  for (const char* bad : {"node17", "node17:0", "node17:99999", ":80", "unix:rel.sock"}) {
    EXPECT_FALSE(ParseEndpoint(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace kerncap::ctl
