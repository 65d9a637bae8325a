#include "common/agent_link/linear_regex.h"

#include <chrono>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "re2/re2.h"

namespace kerncap::link {
namespace {

bool Search(const std::string& pattern, const std::string& text) {
  std::string error;
  std::optional<LinearRegex> re = LinearRegex::Compile(pattern, &error);
  EXPECT_TRUE(re.has_value()) << pattern << ": " << error;
  return re.has_value() && re->Search(text);
}

std::string CompileError(const std::string& pattern) {
  std::string error;
  std::optional<LinearRegex> re = LinearRegex::Compile(pattern, &error);
  return re.has_value() ? "" : error;
}

TEST(LinearRegexTest, MatchesLikeRe2OnKernelNames) {
  EXPECT_TRUE(Search("matmul_(bf16|fp8)", "void matmul_fp8<1>()"));
  EXPECT_FALSE(Search("^matmul", "void matmul()"));
  EXPECT_TRUE(Search("^void", "void matmul()"));
  EXPECT_TRUE(Search("\\(\\)$", "void matmul()"));
  EXPECT_TRUE(Search("gemm<\\d+,\\s*\\w+>", "gemm<128, float>"));
  EXPECT_FALSE(Search("gemm<\\d+>", "gemm<x>"));
  EXPECT_TRUE(Search("[[:upper:]][a-z]+Kernel", "void ReduceKernel()"));
  EXPECT_TRUE(Search("[^a-z]{3}", "abcDEF"));
  EXPECT_FALSE(Search("[^a-z]{4}", "abcDEF"));
  EXPECT_TRUE(Search("x{2,3}y", "xxxy"));
  EXPECT_TRUE(Search("(?:ab)+c", "ababc"));
  EXPECT_TRUE(Search("a{,2}", "a{,2}"));  // not a repetition: literal
  EXPECT_TRUE(Search("\\x41\\.", "A."));
  EXPECT_TRUE(Search("a.c", "a\nc"));  // '.' matches every byte
  EXPECT_TRUE(Search("\\Aab\\z", "ab"));
  EXPECT_TRUE(Search("", "anything"));
  EXPECT_TRUE(Search("(a*)*b", "aaab"));  // empty loops terminate
  EXPECT_TRUE(Search("[]a]", "]"));
  EXPECT_TRUE(Search("\xff+", "k\xff\xffz"));
}

TEST(LinearRegexTest, UnsupportedAndMalformedPatternsSayWhy) {
  EXPECT_NE(CompileError("(a").find("missing )"), std::string::npos);
  EXPECT_NE(CompileError("a)").find("unexpected )"), std::string::npos);
  EXPECT_NE(CompileError("[a").find("missing ]"), std::string::npos);
  EXPECT_NE(CompileError("[z-a]").find("bad character class range"), std::string::npos);
  EXPECT_NE(CompileError("*a").find("missing argument"), std::string::npos);
  EXPECT_NE(CompileError("a**").find("bad repetition operator"), std::string::npos);
  EXPECT_NE(CompileError("a{1001}").find("bad repetition operator"), std::string::npos);
  EXPECT_NE(CompileError("(a)\\1").find("unsupported escape \\1"), std::string::npos);
  EXPECT_NE(CompileError("a\\b").find("unsupported escape"), std::string::npos);
  EXPECT_NE(CompileError("(?=a)").find("unsupported group"), std::string::npos);
  EXPECT_NE(CompileError("a\\").find("trailing"), std::string::npos);
  EXPECT_NE(CompileError("(((a{100}){100}){100})").find("too complex"), std::string::npos);
  EXPECT_NE(CompileError(std::string(200, '(') + std::string(200, ')')).find("nested"),
            std::string::npos);
}

// The worst patterns for backtracking engines cost one NFA pass here.
TEST(LinearRegexTest, WorkIsLinearInTheText) {
  struct Case {
    const char* pattern;
    std::string text;
  } cases[] = {
      {"(a|aa)*b", std::string(64 << 10, 'a')},
      {"(a*)*b", std::string(64 << 10, 'a')},
      {"(x+x+)+y", std::string(64 << 10, 'x')},
      {"(a|b)*a(a|b){20}c", std::string(64 << 10, 'a')},
      {"(.*a){20}b", std::string(64 << 10, 'a')},
  };
  for (const Case& c : cases) {
    auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(Search(c.pattern, c.text)) << c.pattern;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5)
        << c.pattern;
  }
}

// Random patterns over a small alphabet, checked against RE2 (bytes, '.'
// matching newline, unanchored search): whenever both compile a pattern
// they must agree on every text, and what RE2 refuses this engine refuses.
std::string RandomPattern(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::string out;
  const int atoms = 1 + pick(4);
  for (int i = 0; i < atoms; ++i) {
    switch (pick(depth > 2 ? 6 : 8)) {
      case 0: case 1: case 2: out += "abc"[pick(3)]; break;
      case 3: out += '.'; break;
      case 4: out += std::string("[") + (pick(3) == 0 ? "^" : "") + "a-b" + "c"[0] + "]"; break;
      case 5: out += pick(2) ? "^" : "$"; break;
      case 6: out += "(" + RandomPattern(rng, depth + 1) + ")"; break;
      default: out += "(?:" + RandomPattern(rng, depth + 1) + "|" + RandomPattern(rng, depth + 1) + ")";
    }
    switch (pick(8)) {
      case 0: out += '*'; break;
      case 1: out += '+'; break;
      case 2: out += '?'; break;
      case 3: out += "{" + std::to_string(pick(3)) + "," + std::to_string(2 + pick(2)) + "}"; break;
      case 4: out += "{" + std::to_string(pick(3)) + "}"; break;
      default: break;
    }
  }
  if (pick(5) == 0) out += "|" + RandomPattern(rng, depth + 1);
  return out;
}

TEST(LinearRegexTest, AgreesWithRe2OnRandomPatterns) {
  re2::RE2::Options o;
  o.set_encoding(re2::RE2::Options::EncodingLatin1);
  o.set_dot_nl(true);
  o.set_never_capture(true);
  o.set_log_errors(false);
  std::mt19937 rng(20260101);
  int compared = 0;
  int too_complex = 0;
  for (int p = 0; p < 3000; ++p) {
    const std::string pattern = RandomPattern(rng, 0);
    re2::RE2 reference(pattern, o);
    std::string error;
    std::optional<LinearRegex> mine = LinearRegex::Compile(pattern, &error);
    if (!reference.ok()) {
      EXPECT_FALSE(mine.has_value()) << "RE2 refuses " << pattern << ": " << reference.error();
      continue;
    }
    if (!mine.has_value()) {
      // The one refusal of ours RE2 does not share: the program bound.
      EXPECT_NE(error.find("too complex"), std::string::npos) << pattern << ": " << error;
      ++too_complex;
      continue;
    }
    for (int t = 0; t < 20; ++t) {
      std::string text;
      const int len = static_cast<int>(rng() % 12);
      for (int i = 0; i < len; ++i) text += "abcd\n"[rng() % 5];
      ASSERT_EQ(mine->Search(text), re2::RE2::PartialMatch(text, reference))
          << "pattern " << pattern << " text '" << text << "'";
      ++compared;
    }
  }
  EXPECT_GT(compared, 40000);
  EXPECT_LT(too_complex, 100);
}

}  // namespace
}  // namespace kerncap::link
