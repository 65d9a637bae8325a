// linear_regex.h: the regular-expression engine of arm selectors
// (selector.h). Matching runs on the application's launching thread, so it
// must never recurse per character, backtrack or allocate without bound:
// this is a Thompson/Pike NFA simulation, O(text x program) time and
// O(program) memory, with the program bounded by kMaxInstructions.
//
// Why not RE2: the daemon could use it, but the agent (a shared object
// loaded into arbitrary applications) cannot carry Debian's libre2.a (its
// re2.o uses local-exec TLS, which a shared object cannot hold) and must not
// depend on a libre2.so whose symbols an application's own RE2 may
// interpose. Both sides must run one engine so they agree on every match;
// the tests check this one against RE2 on random patterns.
//
// Syntax (a subset of RE2's, with RE2's meaning; patterns and texts are
// bytes):
//   c            a literal byte; \c quotes any punctuation byte c
//   .            any byte, newline included
//   [abc] [^a-z] a byte class; ranges, escapes and [:alpha:]-style POSIX
//                classes inside; a ']' first is literal
//   \d \D \w \W \s \S  digit, word and space classes and their complements
//   \t \n \r \f \v \xHH  control bytes and a byte by its hex value
//   ^ $          start / end of the text (zero width)
//   (re) (?:re)  grouping (nothing is captured)
//   re|re        alternation
//   re* re+ re? re{n} re{n,} re{n,m}  repetition (n, m <= 1000), each
//                optionally followed by ? (lazy: same boolean answer)
// Anything else (backreferences, lookaround, \b, flags) does not compile,
// with an error saying what is unsupported. A '{' that does not start a
// valid repetition is a literal, as in RE2.
#ifndef KERNCAP_COMMON_AGENT_LINK_LINEAR_REGEX_H_
#define KERNCAP_COMMON_AGENT_LINK_LINEAR_REGEX_H_

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kerncap::link {

class LinearRegex {
 public:
  // Compiled programs (repetitions expanded) are at most this long: with
  // texts bounded by the caller it bounds the work of one Search.
  // The worst case is every instruction live at every byte: 500 on a 64 KiB
  // name (selector.h's bound) took 0.35 s on a loaded build machine, once
  // per distinct kernel name, for the most contrived pattern allowed;
  // patterns people write (a few dozen instructions) cost microseconds.
  static constexpr size_t kMaxInstructions = 500;
  static constexpr int kMaxRepeat = 1000;
  static constexpr int kMaxNesting = 100;

  // The compiled pattern, or nullopt with *error saying why not.
  static std::optional<LinearRegex> Compile(std::string_view pattern, std::string* error);

  // True when the pattern matches somewhere in `text`. Allocates two lists
  // of program size; never throws (false when even those cannot be had).
  bool Search(std::string_view text) const;

  size_t program_size() const { return prog_.size(); }

 private:
  friend class RegexCompiler;
  enum class Op : uint8_t { kByte, kSplit, kJmp, kBol, kEol, kMatch };
  struct Inst {
    Op op;
    uint32_t x = 0;  // kByte: class index; kSplit/kJmp: target
    uint32_t y = 0;  // kSplit: second target
  };
  std::vector<Inst> prog_;
  std::vector<std::bitset<256>> classes_;
};

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_AGENT_LINK_LINEAR_REGEX_H_
