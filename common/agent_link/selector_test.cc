#include "common/agent_link/selector.h"

#include <stdlib.h>

#include "common/agent_link/messages.h"
#include "common/agent_link/socket_path.h"
#include "gtest/gtest.h"

namespace kerncap::link {
namespace {

bool Match(const std::string& pattern, NameMatch how, const std::string& demangled,
           const std::string& mangled = "") {
  LinkResult<NameMatcher> m = NameMatcher::Compile(pattern, how);
  EXPECT_TRUE(m.ok()) << m.error();
  return m->Matches(demangled, mangled);
}

TEST(SelectorTest, NameMatchKinds) {
  EXPECT_TRUE(Match("matmul", NameMatch::kSubstring, "void gemm::matmul_bf16<128>(float*)"));
  EXPECT_FALSE(Match("conv", NameMatch::kSubstring, "matmul"));
  EXPECT_TRUE(Match("", NameMatch::kSubstring, "anything"));
  EXPECT_TRUE(Match("*matmul*<128>*", NameMatch::kGlob, "void matmul_bf16<128>(float*)"));
  EXPECT_FALSE(Match("matmul*", NameMatch::kGlob, "void matmul_bf16<128>(float*)"));
  EXPECT_TRUE(Match("matmul_(bf16|fp8)", NameMatch::kRegex, "void matmul_fp8<1>()"));
  EXPECT_FALSE(Match("^matmul", NameMatch::kRegex, "void matmul()"));
  EXPECT_TRUE(Match("_Z6matmulv", NameMatch::kMangled, "matmul()", "_Z6matmulv"));
  EXPECT_FALSE(Match("_Z6matmul", NameMatch::kMangled, "matmul()", "_Z6matmulv"));
  // Without a demangled name, the mangled one is searched.
  EXPECT_TRUE(Match("matmul", NameMatch::kSubstring, "", "_Z6matmulv"));
}

TEST(SelectorTest, MatchResultIsCachedPerKernel) {
  LinkResult<NameMatcher> m = NameMatcher::Compile("mat", NameMatch::kSubstring);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->Matches("matmul", "_Z6matmulv"));
  EXPECT_TRUE(m->Matches("matmul", "_Z6matmulv"));
  EXPECT_FALSE(m->Matches("conv", "_Z4convv"));
  EXPECT_EQ(m->cache_size(), 2u);
}

TEST(SelectorTest, ValidationNamesTheBadField) {
  Selector s;
  s.kernel = "matmul(";
  s.match = NameMatch::kRegex;
  std::string err = ValidateSelector(s);
  EXPECT_NE(err.find("selector.kernel"), std::string::npos) << err;
  EXPECT_NE(err.find("invalid regex"), std::string::npos) << err;
  s.kernel = "";
  s.match = NameMatch::kMangled;
  EXPECT_NE(ValidateSelector(s), "");
  s.match = NameMatch::kGlob;
  s.kernel = "[";
  EXPECT_EQ(ValidateSelector(s), "");  // fnmatch treats it literally
  s.device = -5;
  EXPECT_NE(ValidateSelector(s).find("selector.device"), std::string::npos);
  s.device = 1;
  s.expires_unix_ms = -1;
  EXPECT_NE(ValidateSelector(s).find("expires"), std::string::npos);
}

TEST(SelectorTest, ProcessDeviceAndExpiry) {
  Selector s;
  EXPECT_TRUE(MatchesProcess(s, 123, "python"));
  s.pid = 7;
  EXPECT_FALSE(MatchesProcess(s, 123, "python"));
  EXPECT_TRUE(MatchesProcess(s, 7, "python"));
  s.process_name = "vllm";
  EXPECT_FALSE(MatchesProcess(s, 7, "python"));
  EXPECT_TRUE(MatchesProcess(s, 7, "vllm-worker"));
  EXPECT_TRUE(MatchesDevice(s, 3));
  s.device = 1;
  EXPECT_FALSE(MatchesDevice(s, 3));
  EXPECT_TRUE(MatchesDevice(s, 1));
  EXPECT_FALSE(IsExpired(s, 1000));
  s.expires_unix_ms = 1000;
  EXPECT_TRUE(IsExpired(s, 1000));
  EXPECT_FALSE(IsExpired(s, 999));
}

std::vector<uint64_t> Taken(const Selector& s, int dispatches) {
  DispatchCounter c(s);
  std::vector<uint64_t> taken;
  for (int i = 0; i < dispatches; ++i) {
    if (auto idx = c.OnMatch()) taken.push_back(*idx);
  }
  return taken;
}

TEST(SelectorTest, SkipNthCount) {
  Selector s;
  EXPECT_EQ(Taken(s, 5), (std::vector<uint64_t>{1}));  // count 0 means 1
  s.count = 3;
  EXPECT_EQ(Taken(s, 10), (std::vector<uint64_t>{1, 2, 3}));
  s.skip = 2;
  EXPECT_EQ(Taken(s, 10), (std::vector<uint64_t>{3, 4, 5}));
  s.nth = 4;
  EXPECT_EQ(Taken(s, 10), (std::vector<uint64_t>{6}));
  s.skip = 0;
  s.nth = 2;
  s.count = 1;
  DispatchCounter c(s);
  EXPECT_FALSE(c.OnMatch().has_value());
  EXPECT_FALSE(c.done());
  EXPECT_EQ(c.OnMatch().value_or(0), 2u);
  EXPECT_TRUE(c.done());
}

TEST(SelectorTest, GiveBackLetsALaterDispatchBeTaken) {
  Selector s;
  s.skip = 1;
  DispatchCounter c(s);  // count 1
  EXPECT_FALSE(c.OnMatch().has_value());
  EXPECT_EQ(c.OnMatch().value_or(0), 2u);
  EXPECT_TRUE(c.done());
  EXPECT_TRUE(c.GiveBack());  // dispatch 2 could not be captured
  EXPECT_FALSE(c.done());
  EXPECT_EQ(c.OnMatch().value_or(0), 3u);
  EXPECT_TRUE(c.done());
  EXPECT_EQ(c.captured(), 1u);

  Selector n;
  n.nth = 2;
  DispatchCounter d(n);
  (void)d.OnMatch();
  EXPECT_EQ(d.OnMatch().value_or(0), 2u);
  EXPECT_FALSE(d.GiveBack());  // nth names one dispatch: nothing later
  EXPECT_TRUE(d.done());
  DispatchCounter fresh(s);
  EXPECT_FALSE(fresh.GiveBack());  // nothing taken yet
}

TEST(SelectorTest, ArmMessageRoundTrip) {
  Selector s;
  s.kernel = "mm.*";
  s.match = NameMatch::kRegex;
  s.device = 2;
  s.nth = 5;
  ArmMsg a = ArmFromSelector("arm-9", s);
  EXPECT_EQ(a.match, "regex");
  LinkResult<Selector> back = SelectorFromArm(a);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->kernel, "mm.*");
  EXPECT_EQ(back->match, NameMatch::kRegex);
  EXPECT_EQ(back->device, 2);
  EXPECT_EQ(back->nth, 5u);
  a.match = "fuzzy";
  EXPECT_FALSE(SelectorFromArm(a).ok());
}

TEST(SocketPathTest, EnvOverridesDefault) {
  ::setenv(kAgentSocketEnv, "/tmp/x/agent.sock", 1);
  EXPECT_EQ(ResolveAgentSocketPath(), "/tmp/x/agent.sock");
  ::unsetenv(kAgentSocketEnv);
  std::string def = DefaultAgentSocketPath();
  EXPECT_EQ(ResolveAgentSocketPath(), def);
  EXPECT_NE(def.find("agent.sock"), std::string::npos);
}

}  // namespace
}  // namespace kerncap::link
