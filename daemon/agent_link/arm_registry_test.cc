// Tests of ArmRegistry alone: arming, reservations, releases, expiry,
// skipped-dispatch reports and the trimming of finished arms, with the time
// passed in (no clock, no sockets).
#include "daemon/agent_link/arm_registry.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kerncap::link {
namespace {

// Reaches every arm: the registry alone, ownership aside.
Caller RootCaller() {
  Caller c;
  c.privileged = true;
  return c;
}

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kNow = 1'700'000'000'000;  // unix ms

v1::ArmRequest Request(const std::string& kernel, uint32_t count = 1) {
  v1::ArmRequest req;
  req.mutable_selector()->set_kernel(kernel);
  req.mutable_selector()->set_count(count);
  return req;
}

// Prepares and adds `req`; its ArmInfo.
v1::ArmInfo AddArm(ArmRegistry& arms, const v1::ArmRequest& req, int64_t now = kNow) {
  absl::StatusOr<ArmRegistry::NewArm> arm = ArmRegistry::Prepare(req, now);
  EXPECT_TRUE(arm.ok()) << arm.status();
  if (!arm.ok()) return {};
  v1::ArmInfo info = arm->info;
  absl::StatusOr<ArmMsg> added = arms.Add(std::move(arm).value(), /*owner_uid=*/1000);
  EXPECT_TRUE(added.ok()) << added.status();
  return info;
}

HelloMsg Hello(uint32_t pid = 100, const std::string& process = "train.py") {
  HelloMsg hello;
  hello.pid = pid;
  hello.process_name = process;
  return hello;
}

CaptureBeginMsg Begin(const std::string& kernel, uint32_t device = 0) {
  CaptureBeginMsg begin;
  begin.demangled_name = kernel;
  begin.mangled_name = "_Z" + kernel;
  begin.device = device;
  return begin;
}

std::vector<std::string> Ids(const std::vector<v1::ArmInfo>& arms) {
  std::vector<std::string> ids;
  for (const v1::ArmInfo& a : arms) ids.push_back(a.arm_id());
  return ids;
}

TEST(ArmRegistryTest, PrepareValidatesAndNamesTheArm) {
  v1::ArmRequest negative = Request("k");
  negative.set_expires_unix_ms(-1);
  EXPECT_EQ(ArmRegistry::Prepare(negative, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::ArmRequest past = Request("k");
  past.set_expires_unix_ms(kNow - 1);
  absl::Status expired = ArmRegistry::Prepare(past, kNow).status();
  EXPECT_EQ(expired.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(expired.message(), HasSubstr("already be expired"));
  v1::ArmRequest bad_regex = Request("(");
  bad_regex.mutable_selector()->set_match(v1::NAME_REGEX);
  absl::StatusOr<ArmRegistry::NewArm> bad = ArmRegistry::Prepare(bad_regex, kNow);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("selector.kernel"));

  v1::ArmRequest ttl = Request("k");
  ttl.set_ttl_ms(500);
  (*ttl.mutable_tags())["run"] = "7";
  absl::StatusOr<ArmRegistry::NewArm> ok = ArmRegistry::Prepare(ttl, kNow);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->info.state(), v1::ARM_ACTIVE);
  EXPECT_EQ(ok->info.arm_id().rfind("arm-", 0), 0u);
  EXPECT_EQ(ok->info.arm_id().size(), 20u);  // "arm-" + 16 hex digits
  EXPECT_EQ(ok->info.created_unix_ms(), kNow);
  EXPECT_EQ(ok->info.expires_unix_ms(), kNow + 500);
  EXPECT_EQ(ok->selector.expires_unix_ms, kNow + 500);
  EXPECT_EQ(ok->info.tags().at("run"), "7");
  ASSERT_NE(ok->matcher, nullptr);
}

TEST(ArmRegistryTest, ArmsKeepTheirArmingOrder) {
  ArmRegistry arms;
  std::vector<std::string> order;
  uint64_t last_seq = 0;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<ArmRegistry::NewArm> arm = ArmRegistry::Prepare(Request("k"), kNow);
    ASSERT_TRUE(arm.ok());
    order.push_back(arm->info.arm_id());
    ArmMsg push = arms.Add(std::move(arm).value(), 1000).value();
    EXPECT_EQ(push.arm_id, order.back());
    EXPECT_EQ(push.kernel, "k");
    EXPECT_GT(push.seq, last_seq);
    last_seq = push.seq;
  }
  // Ids are random, so a map by id alone would scramble this.
  EXPECT_EQ(Ids(arms.List(false, RootCaller())), order);
  std::vector<ArmMsg> welcome = arms.ActiveFor(1, "p", -1, 0);
  ASSERT_EQ(welcome.size(), 5u);
  for (size_t i = 0; i < welcome.size(); ++i) EXPECT_EQ(welcome[i].arm_id, order[i]);
}

TEST(ArmRegistryTest, RankArmsApplyOnlyToTheProcessOfThatRank) {
  ArmRegistry arms;
  v1::ArmRequest rank1 = Request("k");
  rank1.mutable_selector()->set_rank(1);
  rank1.mutable_selector()->set_has_rank(true);
  v1::ArmInfo a = AddArm(arms, rank1);
  v1::ArmInfo any = AddArm(arms, Request("k"));
  std::vector<ArmMsg> got = arms.ActiveFor(100, "train.py", 1, 0);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].arm_id, a.arm_id());
  EXPECT_EQ(got[0].rank, 1);  // the agent checks it too
  got = arms.ActiveFor(100, "train.py", 0, 0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].arm_id, any.arm_id());
  // A process whose rank is not known never matches a rank.
  got = arms.ActiveFor(100, "train.py", -1, 0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].arm_id, any.arm_id());
  // A capture an agent of another rank says the rank arm selected is refused.
  HelloMsg hello;
  hello.pid = 100;
  hello.rank.rank = 0;
  CaptureBeginMsg begin;
  begin.demangled_name = "k";
  EXPECT_THAT(arms.Reserve(a.arm_id(), hello, 0, begin, 0, nullptr),
              ::testing::HasSubstr("does not apply to this process"));
  hello.rank.rank = 1;
  EXPECT_EQ(arms.Reserve(a.arm_id(), hello, 0, begin, 0, nullptr), "");
}

TEST(ArmRegistryTest, ActiveForKeepsOnlyArmsOfThatProcess) {
  ArmRegistry arms;
  v1::ArmRequest mine = Request("k");
  mine.mutable_selector()->set_pid(100);
  v1::ArmRequest other = Request("k");
  other.mutable_selector()->set_pid(200);
  v1::ArmRequest named = Request("k");
  named.mutable_selector()->set_process_name("train");
  v1::ArmInfo a = AddArm(arms, mine);
  AddArm(arms, other);
  v1::ArmInfo c = AddArm(arms, named);
  std::vector<ArmMsg> got = arms.ActiveFor(100, "train.py", -1, 0);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].arm_id, a.arm_id());
  EXPECT_EQ(got[1].arm_id, c.arm_id());
  EXPECT_THAT(arms.ActiveFor(300, "serve", -1, 0), IsEmpty());
  // Finished arms are not offered.
  v1::DisarmRequest d;
  d.set_arm_id(a.arm_id());
  std::vector<FinishedArm> finished;
  ASSERT_TRUE(arms.Disarm(d, RootCaller(), &finished).ok());
  got = arms.ActiveFor(100, "train.py", -1, 0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].arm_id, c.arm_id());
}

TEST(ArmRegistryTest, ReserveChecksTheDispatchAgainstTheArm) {
  ArmRegistry arms;
  v1::ArmRequest req = Request("gemm", 2);
  req.mutable_selector()->set_pid(100);
  req.mutable_selector()->set_device(1);
  req.mutable_selector()->set_has_device(true);
  (*req.mutable_tags())["job"] = "a";
  const std::string id = AddArm(arms, req).arm_id();

  EXPECT_THAT(arms.Reserve("arm-nope", Hello(), 0, Begin("gemm", 1), kNow, nullptr),
              HasSubstr("unknown arm"));
  EXPECT_THAT(arms.Reserve(id, Hello(200), 0, Begin("gemm", 1), kNow, nullptr),
              HasSubstr("does not apply to this process"));
  EXPECT_THAT(arms.Reserve(id, Hello(), 0, Begin("gemm", 0), kNow, nullptr),
              HasSubstr("does not select device 0"));
  EXPECT_THAT(arms.Reserve(id, Hello(), 0, Begin("conv", 1), kNow, nullptr),
              HasSubstr("does not select kernel conv"));

  google::protobuf::Map<std::string, std::string> tags;
  EXPECT_EQ(arms.Reserve(id, Hello(), 0, Begin("gemm", 1), kNow, &tags), "");
  EXPECT_EQ(tags.at("job"), "a");
  EXPECT_EQ(arms.Reserve(id, Hello(), 0, Begin("gemm", 1), kNow, nullptr), "");
  // Two reserved of a count of 2: pending captures count.
  EXPECT_THAT(arms.Reserve(id, Hello(), 0, Begin("gemm", 1), kNow, nullptr),
              HasSubstr("already has its captures"));
  // A failed capture gives its reservation back.
  ArmRegistry::Released failed = arms.Release(id, "cap-000000000001", /*committed=*/false);
  EXPECT_FALSE(failed.changed.has_value());
  EXPECT_THAT(failed.finished, IsEmpty());
  EXPECT_EQ(arms.Reserve(id, Hello(), 0, Begin("gemm", 1), kNow, nullptr), "");
}

TEST(ArmRegistryTest, CommittedCapturesCountAndTheLastOneFinishesTheArm) {
  ArmRegistry arms;
  const std::string id = AddArm(arms, Request("k", 2)).arm_id();
  ASSERT_EQ(arms.Reserve(id, Hello(), 0, Begin("k"), kNow, nullptr), "");
  ASSERT_EQ(arms.Reserve(id, Hello(), 0, Begin("k"), kNow, nullptr), "");

  ArmRegistry::Released first = arms.Release(id, "cap-000000000001", /*committed=*/true);
  ASSERT_TRUE(first.changed.has_value());
  EXPECT_EQ(first.changed->captured(), 1u);
  EXPECT_EQ(first.changed->state(), v1::ARM_ACTIVE);
  EXPECT_THAT(first.finished, IsEmpty());

  ArmRegistry::Released last = arms.Release(id, "cap-000000000002", /*committed=*/true);
  EXPECT_FALSE(last.changed.has_value());
  ASSERT_EQ(last.finished.size(), 1u);
  EXPECT_EQ(last.finished[0].reason, DisarmReason::kDone);
  EXPECT_EQ(last.finished[0].info.state(), v1::ARM_DONE);
  EXPECT_THAT(last.finished[0].info.capture_ids(),
              ElementsAre("cap-000000000001", "cap-000000000002"));
  EXPECT_THAT(arms.List(false, RootCaller()), IsEmpty());
  ASSERT_EQ(arms.List(true, RootCaller()).size(), 1u);
  EXPECT_THAT(arms.Reserve(id, Hello(), 0, Begin("k"), kNow, nullptr),
              HasSubstr("no longer active"));
  // Releases of unknown arms change nothing.
  ArmRegistry::Released unknown = arms.Release("arm-nope", "cap-000000000003", true);
  EXPECT_FALSE(unknown.changed.has_value());
  EXPECT_THAT(unknown.finished, IsEmpty());
}

TEST(ArmRegistryTest, PerShapeArmsTakeEachShapeOnceAcrossProcesses) {
  ArmRegistry arms;
  v1::ArmRequest req = Request("k", 0);
  req.mutable_selector()->set_per_shape(v1::PER_SHAPE_SCALARS);
  const v1::ArmInfo info = AddArm(arms, req);
  // count 0 is stated as the per-shape default.
  EXPECT_EQ(info.selector().count(), kDefaultPerShapeCount);
  const std::string id = info.arm_id();
  auto begin = [](const std::string& shape) {
    CaptureBeginMsg b = Begin("k");
    b.launch_shape = shape;
    return b;
  };
  const std::string a = LaunchShapeKeyText(0xa), b = LaunchShapeKeyText(0xb);
  ASSERT_EQ(arms.Reserve(id, Hello(100), 0, begin(a), kNow, nullptr), "");
  // Another process, same shape: refused while reserved and once committed.
  EXPECT_THAT(arms.Reserve(id, Hello(200), 0, begin(a), kNow, nullptr),
              HasSubstr("already has a capture of launch shape " + a));
  ASSERT_EQ(arms.Reserve(id, Hello(200), 0, begin(b), kNow, nullptr), "");
  // A failed capture frees its shape; a committed one keeps it.
  arms.Release(id, "", /*committed=*/false, b);
  EXPECT_EQ(arms.Reserve(id, Hello(300), 0, begin(b), kNow, nullptr), "");
  arms.Release(id, "cap-000000000001", /*committed=*/true, a);
  EXPECT_THAT(arms.Reserve(id, Hello(300), 0, begin(a), kNow, nullptr), HasSubstr("already has"));
  // No key, or not a key: refused with the reason.
  EXPECT_THAT(arms.Reserve(id, Hello(), 0, begin(""), kNow, nullptr), HasSubstr("named no shape"));
  EXPECT_THAT(arms.Reserve(id, Hello(), 0, begin("ABCDEF0123456789"), kNow, nullptr),
              HasSubstr("named no shape"));
  // Arms that are not per-shape do not look at shapes.
  const std::string plain = AddArm(arms, Request("k", 2)).arm_id();
  EXPECT_EQ(arms.Reserve(plain, Hello(), 0, begin(a), kNow, nullptr), "");
  EXPECT_EQ(arms.Reserve(plain, Hello(), 0, begin(a), kNow, nullptr), "");
}

TEST(ArmRegistryTest, PerShapeWithNthIsRefused) {
  v1::ArmRequest req = Request("k", 1);
  req.mutable_selector()->set_per_shape(v1::PER_SHAPE_LAUNCH);
  req.mutable_selector()->set_nth(3);
  absl::StatusOr<ArmRegistry::NewArm> arm = ArmRegistry::Prepare(req, kNow);
  ASSERT_FALSE(arm.ok());
  EXPECT_THAT(arm.status().message(), HasSubstr("selector.nth"));
}

TEST(ArmRegistryTest, ArmsExpireAtTheirDeadline) {
  ArmRegistry arms;
  v1::ArmRequest ttl = Request("k");
  ttl.set_ttl_ms(1000);
  const std::string id = AddArm(arms, ttl).arm_id();
  const std::string forever = AddArm(arms, Request("k")).arm_id();

  EXPECT_EQ(arms.MsUntilNextExpiry(kNow, 5000), 1001);
  EXPECT_EQ(arms.MsUntilNextExpiry(kNow, 300), 300);
  EXPECT_EQ(arms.MsUntilNextExpiry(kNow + 2000, 5000), 1);  // overdue: poll at once
  EXPECT_THAT(arms.Expire(kNow + 999), IsEmpty());
  // Past its deadline an arm takes nothing, even before Expire ran.
  EXPECT_THAT(arms.Reserve(id, Hello(), 0, Begin("k"), kNow + 1000, nullptr),
              HasSubstr("no longer active"));
  std::vector<FinishedArm> expired = arms.Expire(kNow + 1000);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].reason, DisarmReason::kExpired);
  EXPECT_EQ(expired[0].info.arm_id(), id);
  EXPECT_EQ(expired[0].info.state(), v1::ARM_EXPIRED);
  EXPECT_THAT(arms.Expire(kNow + 5000), IsEmpty());  // once
  EXPECT_EQ(arms.MsUntilNextExpiry(kNow, 5000), 5000);
  EXPECT_THAT(Ids(arms.List(false, RootCaller())), ElementsAre(forever));
}

TEST(ArmRegistryTest, DisarmOneOrAll) {
  ArmRegistry arms;
  std::vector<FinishedArm> finished;
  EXPECT_EQ(arms.Disarm(v1::DisarmRequest(), RootCaller(), &finished).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::DisarmRequest none;
  none.set_arm_id("arm-nope");
  EXPECT_EQ(arms.Disarm(none, RootCaller(), &finished).status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(finished, IsEmpty());

  const std::string a = AddArm(arms, Request("a")).arm_id();
  const std::string b = AddArm(arms, Request("b")).arm_id();
  const std::string c = AddArm(arms, Request("c")).arm_id();
  v1::DisarmRequest one;
  one.set_arm_id(b);
  absl::StatusOr<std::vector<v1::ArmInfo>> out = arms.Disarm(one, RootCaller(), &finished);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].state(), v1::ARM_DISARMED);
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_EQ(finished[0].reason, DisarmReason::kDisarmed);
  // Again: returned as it is, finished no second time.
  finished.clear();
  out = arms.Disarm(one, RootCaller(), &finished);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].state(), v1::ARM_DISARMED);
  EXPECT_THAT(finished, IsEmpty());

  v1::DisarmRequest all;
  all.set_all(true);
  out = arms.Disarm(all, RootCaller(), &finished);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->size(), 2u);
  EXPECT_EQ(finished.size(), 2u);
  EXPECT_THAT(arms.List(false, RootCaller()), IsEmpty());
  std::vector<v1::ArmInfo> listed = arms.List(true, RootCaller());
  EXPECT_EQ(Ids(listed), (std::vector<std::string>{a, b, c}));
}

TEST(ArmRegistryTest, SkippedDispatchesAreBounded) {
  ArmRegistry arms;
  EXPECT_FALSE(arms.NoteSkipped("arm-nope", 0, v1::SkippedDispatch()).has_value());
  const std::string id = AddArm(arms, Request("k")).arm_id();
  std::optional<v1::ArmInfo> info;
  for (int i = 0; i < ArmRegistry::kMaxSkipsKept + 5; ++i) {
    v1::SkippedDispatch s;
    s.set_dispatch_index(i);
    s.set_reason("texture over a CUDA array");
    info = arms.NoteSkipped(id, 0, s);
    ASSERT_TRUE(info.has_value());
  }
  EXPECT_EQ(info->skipped_count(), static_cast<uint32_t>(ArmRegistry::kMaxSkipsKept + 5));
  ASSERT_EQ(info->skipped_size(), ArmRegistry::kMaxSkipsKept);
  EXPECT_EQ(info->skipped(0).dispatch_index(), 5u);  // the oldest went
  EXPECT_EQ(info->skipped(ArmRegistry::kMaxSkipsKept - 1).dispatch_index(),
            static_cast<uint64_t>(ArmRegistry::kMaxSkipsKept + 4));
  EXPECT_EQ(arms.List(false, RootCaller())[0].skipped_count(), info->skipped_count());
}

TEST(ArmRegistryTest, FinishedArmsAreTrimmedOldestFirstOnceSettled) {
  ArmRegistry arms(/*max_finished=*/2);
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(AddArm(arms, Request("k")).arm_id());
  // The oldest has a capture still committing when it is disarmed.
  ASSERT_EQ(arms.Reserve(ids[0], Hello(), 0, Begin("k"), kNow, nullptr), "");
  std::vector<FinishedArm> finished;
  for (const std::string& id : ids) {
    v1::DisarmRequest d;
    d.set_arm_id(id);
    ASSERT_TRUE(arms.Disarm(d, RootCaller(), &finished).ok());
  }
  EXPECT_EQ(finished.size(), 4u);
  // Nothing goes past the arm that still has a capture pending.
  EXPECT_EQ(arms.List(true, RootCaller()).size(), 4u);
  // Its capture settles (committed, too late to count for an active arm);
  // the next finish trims down to the newest two.
  ArmRegistry::Released released = arms.Release(ids[0], "cap-000000000001", true);
  EXPECT_THAT(released.finished, IsEmpty());
  const std::string fifth = AddArm(arms, Request("k")).arm_id();
  v1::DisarmRequest d;
  d.set_arm_id(fifth);
  ASSERT_TRUE(arms.Disarm(d, RootCaller(), &finished).ok());
  EXPECT_EQ(Ids(arms.List(true, RootCaller())), (std::vector<std::string>{ids[3], fifth}));
  v1::DisarmRequest gone;
  gone.set_arm_id(ids[0]);
  EXPECT_EQ(arms.Disarm(gone, RootCaller(), &finished).status().code(), absl::StatusCode::kNotFound);
  // A new bound applies at the next finish.
  arms.set_max_finished(0);
  EXPECT_THAT(arms.Expire(kNow), IsEmpty());
  EXPECT_THAT(arms.List(true, RootCaller()), IsEmpty());
}

// Issue 28: arms per daemon and per owner are bounded, and the error names
// the bound; a finished arm frees its place.
TEST(ArmRegistryTest, ActiveArmsAreBoundedPerDaemonAndPerOwner) {
  ArmRegistry arms;
  arms.set_max_active(5, 3);
  auto add = [&](uint32_t uid) {
    absl::StatusOr<ArmRegistry::NewArm> arm = ArmRegistry::Prepare(Request("k"), kNow);
    EXPECT_TRUE(arm.ok());
    return arms.Add(std::move(arm).value(), uid);
  };
  std::vector<std::string> mine;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<ArmMsg> a = add(1000);
    ASSERT_TRUE(a.ok()) << a.status();
    mine.push_back(a->arm_id);
  }
  absl::StatusOr<ArmMsg> fourth = add(1000);
  ASSERT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(fourth.status().message()), HasSubstr("--max-arms-per-user=3"));
  EXPECT_EQ(arms.ActiveOf(1000), 3u);
  EXPECT_EQ(arms.List(false, RootCaller()).size(), 3u);  // the refused arm was not recorded
  // Another user still arms, up to the daemon's bound.
  ASSERT_TRUE(add(2000).ok());
  ASSERT_TRUE(add(2000).ok());
  absl::StatusOr<ArmMsg> sixth = add(3000);
  ASSERT_EQ(sixth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(sixth.status().message()), HasSubstr("--max-arms=5"));
  // Disarming one of uid 1000's frees a place for uid 1000 (and the daemon).
  std::vector<FinishedArm> finished;
  v1::DisarmRequest d;
  d.set_arm_id(mine[0]);
  ASSERT_TRUE(arms.Disarm(d, RootCaller(), &finished).ok());
  EXPECT_EQ(arms.ActiveOf(1000), 2u);
  EXPECT_TRUE(add(1000).ok());
  // 0: no bound.
  arms.set_max_active(0, 0);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(add(1000).ok());
}

}  // namespace
}  // namespace kerncap::link
