#include "agent/link/substitution_table.h"

#include <gtest/gtest.h>

namespace kerncap::agent {
namespace {

using Clock = SubstitutionTable::Clock;

struct FakeVariant : SubstitutionVariant {
  int context = 0;
};

link::SubstituteMsg Msg(std::string id, std::string kernel) {
  link::SubstituteMsg m;
  m.sub_id = std::move(id);
  m.kernel = std::move(kernel);
  m.format = link::CodeObjectFormat::kCubin;
  return m;
}

SubstitutionTable::PrepareFn Loads(int* calls, int context = 1) {
  return [calls, context](const link::SubstituteMsg&, const std::string& code,
                          std::string_view) -> link::LinkResult<SubstitutionTable::Prepared> {
    ++*calls;
    if (code != "CODE") return link::LinkStatus::Error("bad image");
    SubstitutionTable::Prepared p;
    auto v = std::make_shared<FakeVariant>();
    v->context = context;
    p.variant = v;
    p.checks = {"layout matches"};
    return p;
  };
}

TEST(SubstitutionTableTest, SubstitutesMatchingDispatchesUntilCount) {
  SubstitutionTable table(42, "app");
  auto m = Msg("s1", "saxpy");
  m.count = 2;
  const auto t0 = Clock::now();
  ASSERT_TRUE(table.Add(m, "CODE", t0).ok());
  EXPECT_TRUE(table.live());
  int loads = 0;
  EXPECT_FALSE(table.Decide("other", "_Z5otherv", 0, t0, Loads(&loads), {}));
  EXPECT_EQ(loads, 0);  // a non-matching dispatch loads nothing
  auto d1 = table.Decide("saxpy(float*)", "_Z5saxpyPf", 0, t0, Loads(&loads), {});
  ASSERT_TRUE(d1);
  EXPECT_TRUE(d1->use_variant);
  EXPECT_NE(d1->variant, nullptr);
  EXPECT_FALSE(d1->timed);
  auto d2 = table.Decide("saxpy(float*)", "_Z5saxpyPf", 0, t0, Loads(&loads), {});
  ASSERT_TRUE(d2);
  EXPECT_EQ(loads, 1);  // loaded once
  EXPECT_FALSE(table.live());  // count reached
  EXPECT_FALSE(table.Decide("saxpy(float*)", "_Z5saxpyPf", 0, t0, Loads(&loads), {}));
  auto r = table.Report("s1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, link::SubstitutionState::kEnded);
  EXPECT_EQ(r->variant_launches, 2u);
  EXPECT_EQ(r->kernel, "_Z5saxpyPf");
  EXPECT_EQ(r->checks, std::vector<std::string>{"layout matches"});
  EXPECT_NE(r->reason.find("count of 2"), std::string::npos);
}

TEST(SubstitutionTableTest, RefusedVariantNeverSubstitutes) {
  SubstitutionTable table(42, "app");
  ASSERT_TRUE(table.Add(Msg("s1", "saxpy"), "BROKEN", Clock::now()).ok());
  int loads = 0;
  EXPECT_FALSE(table.Decide("saxpy", "saxpy", 0, Clock::now(), Loads(&loads), {}));
  EXPECT_FALSE(table.Decide("saxpy", "saxpy", 0, Clock::now(), Loads(&loads), {}));
  EXPECT_EQ(loads, 1);
  auto reports = table.TakeReports(Clock::now());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].state, link::SubstitutionState::kRefused);
  EXPECT_EQ(reports[0].reason, "bad image");
  EXPECT_EQ(reports[0].variant_launches, 0u);
  EXPECT_FALSE(table.live());
}

TEST(SubstitutionTableTest, AbAlternatesOriginalFirstAndTimesBoth) {
  SubstitutionTable table(42, "app");
  auto m = Msg("s1", "k");
  m.ab = true;
  ASSERT_TRUE(table.Add(m, "CODE", Clock::now()).ok());
  int loads = 0;
  std::vector<bool> sides;
  for (int i = 0; i < 4; ++i) {
    auto d = table.Decide("k", "k", 0, Clock::now(), Loads(&loads), {});
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->timed);
    sides.push_back(d->use_variant);
    table.AddTiming("s1", d->use_variant, d->use_variant ? 10.0 + i : 20.0 + i);
  }
  EXPECT_EQ(sides, (std::vector<bool>{false, true, false, true}));
  auto r = table.Report("s1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->variant_launches, 2u);
  EXPECT_EQ(r->original_launches, 2u);
  EXPECT_EQ(r->variant.samples, 2u);
  EXPECT_DOUBLE_EQ(r->variant.mean_us, 12.0);  // 11, 13
  EXPECT_DOUBLE_EQ(r->original.mean_us, 21.0);  // 20, 22
  EXPECT_DOUBLE_EQ(r->original.min_us, 20.0);
  EXPECT_DOUBLE_EQ(r->original.max_us, 22.0);
  EXPECT_NEAR(r->variant.stddev_us, 1.41421356, 1e-6);
}

TEST(SubstitutionTableTest, EndedReportWaitsForOutstandingTimings) {
  SubstitutionTable table(42, "app");
  auto m = Msg("s1", "k");
  m.ab = true;
  m.count = 1;
  ASSERT_TRUE(table.Add(m, "CODE", Clock::now()).ok());
  int loads = 0;
  auto d1 = table.Decide("k", "k", 0, Clock::now(), Loads(&loads), {});  // original
  auto d2 = table.Decide("k", "k", 0, Clock::now(), Loads(&loads), {});  // variant: count reached
  ASSERT_TRUE(d1 && d2);
  EXPECT_FALSE(table.live());
  table.AddTiming("s1", false, 3.0);
  for (const auto& r : table.TakeReports(Clock::now())) EXPECT_NE(r.state, link::SubstitutionState::kEnded);
  table.AddTiming("s1", true, 2.0);
  auto reports = table.TakeReports(Clock::now());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].state, link::SubstitutionState::kEnded);
  EXPECT_EQ(reports[0].variant.samples, 1u);
  EXPECT_EQ(reports[0].original.samples, 1u);
}

TEST(SubstitutionTableTest, TtlEndsEvenWithoutDispatches) {
  SubstitutionTable table(42, "app");
  auto m = Msg("s1", "k");
  m.ttl_ms = 100;
  const auto t0 = Clock::now();
  ASSERT_TRUE(table.Add(m, "CODE", t0).ok());
  (void)table.TakeReports(t0);  // the pending report
  auto reports = table.TakeReports(t0 + std::chrono::milliseconds(150));
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].state, link::SubstitutionState::kEnded);
  EXPECT_FALSE(table.live());
}

TEST(SubstitutionTableTest, RemoveDropAndDeclinedContexts) {
  SubstitutionTable table(42, "app");
  ASSERT_TRUE(table.Add(Msg("s1", "k"), "CODE", Clock::now()).ok());
  EXPECT_FALSE(table.Add(Msg("s1", "k"), "CODE", Clock::now()).ok());  // duplicate
  int loads = 0;
  auto other_context = [](const SubstitutionVariant& v) {
    return static_cast<const FakeVariant&>(v).context == 2;
  };
  EXPECT_FALSE(table.Decide("k", "k", 0, Clock::now(), Loads(&loads, 1), other_context));
  EXPECT_EQ(table.Report("s1")->variant_launches, 0u);  // declined: not counted
  EXPECT_TRUE(table.Remove("s1", link::UnsubstituteReason::kUnsubstituted));
  EXPECT_FALSE(table.live());
  EXPECT_FALSE(table.Remove("nope", link::UnsubstituteReason::kUnsubstituted));
  ASSERT_TRUE(table.Add(Msg("s2", "k"), "CODE", Clock::now()).ok());
  table.DropAll();
  EXPECT_FALSE(table.live());
  EXPECT_FALSE(table.Report("s2"));
}

TEST(SubstitutionTableTest, RefusesOtherProcessesAndBadSelectors) {
  SubstitutionTable table(42, "app");
  auto m = Msg("s1", "k");
  m.pid = 7;
  EXPECT_FALSE(table.Add(m, "CODE", Clock::now()).ok());
  auto bad = Msg("s2", "(");
  bad.match = link::NameMatch::kRegex;
  EXPECT_FALSE(table.Add(bad, "CODE", Clock::now()).ok());
  EXPECT_FALSE(table.Add(Msg("s3", "k"), "", Clock::now()).ok());
}

}  // namespace
}  // namespace kerncap::agent
