#include "common/agent_link/selector.h"

#include <fnmatch.h>
#include <stdlib.h>

#include <chrono>
#include <random>

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

// What the agent's off-thread matching relies on: an estimate of the work
// before doing it, answers computed by a cache-less copy, and recording them.
TEST(SelectorTest, CostCachedAnswersAndCopiesWithoutCache) {
  LinkResult<NameMatcher> re = NameMatcher::Compile("[a-z]*[a-z]*q", NameMatch::kRegex);
  ASSERT_TRUE(re.ok());
  const std::string name(1000, 'a');
  EXPECT_GT(re->MatchCost(name, ""), 1000u * 3);  // bytes times the program
  LinkResult<NameMatcher> sub = NameMatcher::Compile("q", NameMatch::kSubstring);
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(sub->MatchCost(name, ""), 1001u);
  EXPECT_EQ(sub->MatchCost(std::string(kMaxKernelNameBytes + 1, 'a'), ""), 0u);
  EXPECT_FALSE(re->Cached(name, "").has_value());
  NameMatcher copy = re->WithoutCache();
  EXPECT_FALSE(copy.MatchUncachedBounded(name, ""));
  EXPECT_TRUE(copy.MatchUncachedBounded(name + "q", ""));
  re->Remember(name, "", false);
  ASSERT_TRUE(re->Cached(name, "").has_value());
  EXPECT_FALSE(*re->Cached(name, ""));
  EXPECT_EQ(copy.cache_size(), 0u);
  EXPECT_FALSE(re->Matches(name, ""));  // from the cache
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
  EXPECT_TRUE(Match("[", NameMatch::kGlob, "["));
  s.device = -5;
  EXPECT_NE(ValidateSelector(s).find("selector.device"), std::string::npos);
  s.device = 1;
  s.expires_unix_ms = -1;
  EXPECT_NE(ValidateSelector(s).find("expires"), std::string::npos);
}

// Selectors run on the application's launching thread: no pattern and no
// kernel name may crash it (std::regex recursed once per character and
// overflowed the stack on a 20k-character name) or stall it ((a|aa)*b on
// 40 characters backtracked for over a minute).
TEST(SelectorTest, HostileNamesAndPatternsNeverCrashOrStall) {
  struct Case {
    std::string pattern;
    NameMatch how;
    std::string name;
    bool expect;
  };
  std::mt19937 rng(7);
  std::string ab(kMaxKernelNameBytes, 'a');
  for (char& c : ab) c = "ab"[rng() & 1];
  const Case cases[] = {
      {"(a|b)*c", NameMatch::kRegex, std::string(20000, 'a'), false},
      {"(a|aa)*b", NameMatch::kRegex, std::string(40, 'a'), false},
      {"(a|aa)*b", NameMatch::kRegex, std::string(kMaxKernelNameBytes, 'a'), false},
      // A pattern whose DFA has 2^20 states: RE2 falls back to its NFA,
      // still linear in the name.
      {"(a|b)*a(a|b){20}c", NameMatch::kRegex, ab, false},
      {"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", NameMatch::kGlob, std::string(kMaxKernelNameBytes, 'a'),
       false},
      {std::string(kMaxPatternBytes - 1, 'a') + "b", NameMatch::kSubstring,
       std::string(kMaxKernelNameBytes, 'a'), false},
      {"a", NameMatch::kSubstring, std::string(kMaxKernelNameBytes - 1, 'b') + "a", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pattern.substr(0, 40));
    LinkResult<NameMatcher> m = NameMatcher::Compile(c.pattern, c.how);
    ASSERT_TRUE(m.ok()) << m.error();
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(m->Matches(c.name, ""), c.expect);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 0.5) << "a launch would stall this long";
  }
  // Longer names are not matched at all (and not cached).
  LinkResult<NameMatcher> any = NameMatcher::Compile("", NameMatch::kSubstring);
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any->Matches(std::string(kMaxKernelNameBytes, 'k'), ""));
  EXPECT_FALSE(any->Matches(std::string(kMaxKernelNameBytes + 1, 'k'), ""));
  EXPECT_FALSE(any->Matches("k", std::string(kMaxKernelNameBytes + 1, 'k')));
  EXPECT_EQ(any->cache_size(), 1u);
  // Over-long and over-complex patterns are refused when arming.
  Selector s;
  s.match = NameMatch::kRegex;
  s.kernel = std::string(kMaxPatternBytes + 1, 'a');
  EXPECT_NE(ValidateSelector(s).find("longer than 4096"), std::string::npos);
  s.kernel = "((((a{100}){100}){100}){100})";
  EXPECT_NE(ValidateSelector(s).find("selector.kernel"), std::string::npos) << ValidateSelector(s);
  // Bytes that are not UTF-8 are matched as bytes.
  EXPECT_TRUE(Match("\xff", NameMatch::kSubstring, "ker\xffnel"));
  EXPECT_TRUE(Match("ker.nel", NameMatch::kRegex, "ker\xffnel"));
}

// Globs are translated to RE2; they must mean what fnmatch(3) means.
TEST(SelectorTest, GlobsMatchWhatFnmatchMatches) {
  const char* patterns[] = {"*",        "matmul*",  "*matmul*", "?at*",      "[mc]at*",
                            "[!m]at*",  "[^m]at*",  "[a-c]*",   "*[]]*",     "*[!]]*",
                            "[",        "*[*",      "a\\*b",    "a\\",       "*.cu",
                            "void *(*", "[[:digit:]]*", "*<128>*", "k[0-9][0-9]", "*/*"};
  const char* names[] = {"matmul",     "cat",  "bat",    "at",   "a*b",       "ab",
                         "a\\",        "x.cu", "k12",    "k1",   "void f(int)", "[",
                         "x[y",        "]",    "a]b",    "7up",  "matmul<128>", "a/b",
                         "",           "mmat"};
  for (const char* p : patterns) {
    LinkResult<NameMatcher> m = NameMatcher::Compile(p, NameMatch::kGlob);
    ASSERT_TRUE(m.ok()) << p << ": " << m.error();
    for (const char* n : names) {
      EXPECT_EQ(m->Matches(n, ""), ::fnmatch(p, n, 0) == 0) << "pattern " << p << " name " << n;
    }
  }
}

TEST(SelectorTest, ContradictoryCombinationsAreRefused) {
  Selector s;
  s.kernel = "k";
  s.skip = 2;
  s.nth = 3;
  EXPECT_NE(ValidateSelector(s).find("skip and nth"), std::string::npos);
  s.skip = 0;
  EXPECT_EQ(ValidateSelector(s), "");
  s.count = 4;  // the 3rd dispatch of 4 processes
  EXPECT_EQ(ValidateSelector(s), "");
  s.pid = 77;  // ... but one process has only one 3rd dispatch
  EXPECT_NE(ValidateSelector(s).find("count must be 1"), std::string::npos);
  s.nth = 0;
  s.skip = 5;
  EXPECT_EQ(ValidateSelector(s), "");  // skip 5, then take 4
}

TEST(SelectorTest, RankSelectsOnlyTheProcessOfThatRank) {
  Selector s;
  EXPECT_TRUE(MatchesProcess(s, 1, "train", 3));
  EXPECT_TRUE(MatchesProcess(s, 1, "train", -1));  // no rank asked: any process
  s.rank = 3;
  EXPECT_TRUE(MatchesProcess(s, 1, "train", 3));
  EXPECT_FALSE(MatchesProcess(s, 1, "train", 0));
  EXPECT_FALSE(MatchesProcess(s, 1, "train", -1));  // an unknown rank never matches
  EXPECT_FALSE(MatchesProcess(s, 1, "train"));
  EXPECT_EQ(ValidateSelector(s), "");
  s.rank = -2;
  EXPECT_NE(ValidateSelector(s).find("selector.rank"), std::string::npos);
  // The rank travels with the arm.
  s.rank = 5;
  ArmMsg a = ArmFromSelector("arm-1", s);
  EXPECT_EQ(a.rank, 5);
  EXPECT_EQ(SelectorFromArm(a).rank, 5);
  Frame f;
  f.type = MessageType::kArm;
  f.json = R"({"arm_id":"arm-1","kernel":"k"})";  // from a daemon before ranks
  ArmMsg old;
  ASSERT_TRUE(DecodeBody(f, &old).ok());
  EXPECT_EQ(SelectorFromArm(old).rank, -1);
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

TEST(SelectorTest, PerShapeTakesTheFirstDispatchOfEachShapeUpToItsCount) {
  Selector s;
  s.per_shape = PerShape::kScalars;
  EXPECT_EQ(EffectiveCount(s), kDefaultPerShapeCount);
  s.count = 3;
  s.skip = 1;
  DispatchCounter c(s);
  ASSERT_TRUE(c.per_shape());
  const uint64_t shapes[] = {7, 7, 8, 7, 9, 8, 10, 11};
  std::vector<uint64_t> taken;
  for (uint64_t key : shapes) {
    if (auto idx = c.OnMatch(key)) taken.push_back(*idx);
  }
  // Dispatch 1 is skipped; then shapes 7 (2), 8 (3), 9 (5); count 3 ends it.
  EXPECT_EQ(taken, (std::vector<uint64_t>{2, 3, 5}));
  EXPECT_TRUE(c.done());

  // No key (the agent could not compute it): never taken.
  Selector t;
  t.per_shape = PerShape::kLaunch;
  DispatchCounter d(t);
  EXPECT_FALSE(d.OnMatch(std::nullopt).has_value());
  EXPECT_EQ(d.OnMatch(1).value_or(0), 2u);
  EXPECT_FALSE(d.OnMatch(1).has_value());  // same shape again

  // A dispatch given back leaves its shape open for the next one of it.
  EXPECT_TRUE(d.GiveBack());
  EXPECT_EQ(d.OnMatch(1).value_or(0), 4u);
  EXPECT_EQ(d.captured(), 1u);

  // Arms that are not per-shape ignore keys.
  Selector plain;
  plain.count = 2;
  DispatchCounter e(plain);
  EXPECT_EQ(e.OnMatch(5).value_or(0), 1u);
  EXPECT_EQ(e.OnMatch(5).value_or(0), 2u);
}

TEST(SelectorTest, PerShapeRefusesNthAndTravelsInTheArm) {
  Selector s;
  s.kernel = "gemm";
  s.per_shape = PerShape::kScalars;
  EXPECT_EQ(ValidateSelector(s), "");
  s.nth = 3;
  EXPECT_NE(ValidateSelector(s).find("selector.nth"), std::string::npos);
  s.nth = 0;
  s.per_shape = static_cast<PerShape>(7);
  EXPECT_NE(ValidateSelector(s).find("selector.per_shape"), std::string::npos);
  s.per_shape = PerShape::kLaunch;
  ArmMsg a = ArmFromSelector("arm-1", s);
  nlohmann::json j = a;
  EXPECT_EQ(j["per_shape"], "launch");
  ArmMsg back = j.get<ArmMsg>();
  EXPECT_EQ(SelectorFromArm(back).per_shape, PerShape::kLaunch);
  // From a daemon that predates per-shape arms: off.
  j.erase("per_shape");
  EXPECT_EQ(SelectorFromArm(j.get<ArmMsg>()).per_shape, PerShape::kOff);
  j["per_shape"] = "sometimes";
  EXPECT_THROW(j.get<ArmMsg>(), std::exception);
}

TEST(SelectorTest, ArmMessageRoundTrip) {
  Selector s;
  s.kernel = "mm.*";
  s.match = NameMatch::kRegex;
  s.device = 2;
  s.nth = 5;
  ArmMsg a = ArmFromSelector("arm-9", s);
  EXPECT_EQ(a.match, NameMatch::kRegex);
  // Through the wire: the match travels as its name.
  Frame frame;
  frame.type = MessageType::kArm;
  frame.json = EncodeBody(a);
  EXPECT_NE(frame.json.find("\"match\":\"regex\""), std::string::npos) << frame.json;
  ArmMsg decoded;
  ASSERT_TRUE(DecodeBody(frame, &decoded).ok());
  Selector back = SelectorFromArm(decoded);
  EXPECT_EQ(back.kernel, "mm.*");
  EXPECT_EQ(back.match, NameMatch::kRegex);
  EXPECT_EQ(back.device, 2);
  EXPECT_EQ(back.nth, 5u);
  // An unknown match name fails the frame, naming the field and the names it takes.
  frame.json = R"({"arm_id":"arm-9","kernel":"mm","match":"fuzzy"})";
  LinkStatus st = DecodeBody(frame, &decoded);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("name match 'fuzzy' is not one of: substring, glob, regex, mangled"),
            std::string::npos)
      << st.message();
}

TEST(SocketPathTest, EnvOverridesDefault) {
  ::setenv(kAgentSocketEnv, "/tmp/x/agent.sock", 1);
  EXPECT_EQ(ResolveAgentSocketPath(), "/tmp/x/agent.sock");
  ::unsetenv(kAgentSocketEnv);
  std::string def = DefaultAgentSocketPath();
  EXPECT_EQ(ResolveAgentSocketPath(), def);
  EXPECT_NE(def.find("agent.sock"), std::string::npos);
}

// The agent of a user with no kerncapd of their own reaches the node's
// system daemon; their own daemon and $KERNCAP_AGENT_SOCKET win over it.
std::string* g_existing = new std::string;
bool Exists(const std::string& p) { return p == *g_existing || p == kSystemAgentSocketPath; }
bool OnlyOwnOrNothing(const std::string& p) { return p == *g_existing; }

TEST(SocketPathTest, AgentFindsTheSystemDaemonWhenNoPerUserOneRuns) {
  if (::geteuid() == 0) GTEST_SKIP() << "root always uses /run/kerncap";
  ::unsetenv(kAgentSocketEnv);
  const std::string own = DefaultAgentSocketPath();
  *g_existing = "";
  EXPECT_EQ(ResolveAgentConnectPath(&Exists), kSystemAgentSocketPath);
  EXPECT_EQ(ResolveAgentConnectPath(&OnlyOwnOrNothing), own);  // neither: the per-user one
  *g_existing = own;
  EXPECT_EQ(ResolveAgentConnectPath(&Exists), own);
  ::setenv(kAgentSocketEnv, "/tmp/y/agent.sock", 1);
  EXPECT_EQ(ResolveAgentConnectPath(&Exists), "/tmp/y/agent.sock");
  ::unsetenv(kAgentSocketEnv);
}

}  // namespace
}  // namespace kerncap::link
