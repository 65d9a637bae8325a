// selector.h: which dispatches an arm captures. One implementation shared by
// the daemon (validation when arming, and checking that a capture an agent
// attributes to an arm is one it selects) and the agent (matching at launch
// time), so both sides agree on the meaning of every field. Std-only.
//
// The agent evaluates selectors on the application's launching thread, so
// no arm may crash or stall it: substrings are found with memmem (linear),
// globs and regexes run on LinearRegex (linear_regex.h: an NFA simulation,
// no recursion or backtracking, program size bounded), patterns are at most
// kMaxPatternBytes and names longer than kMaxKernelNameBytes never match.
// The answer is cached per kernel name.
//
// Semantics (mirrors kerncap.v1.Selector):
//   kernel/match  kSubstring: `kernel` occurs in the demangled name (empty
//                 matches everything); kGlob: the whole demangled name
//                 matches the fnmatch(3)-style pattern (`*`, `?`, `[...]`,
//                 `[!...]`, backslash escapes; `*` also matches `/`);
//                 kRegex: an RE2-style regex (linear_regex.h: no
//                 backreferences or lookaround) searched anywhere in the
//                 demangled name;
//                 kMangled: exact equality with the mangled name. Names are
//                 matched as bytes (Latin-1). When an agent has no demangled
//                 name, the mangled one is used.
//   pid           0: any process.
//   process_name  substring of the process name; empty: any.
//   device        -1: any device; else the device ordinal.
//   skip          the first `skip` matching dispatches (per process) pass;
//                 then `count` are captured.
//   nth           >0: capture only the nth matching dispatch (1-based) of
//                 each process. nth and skip both say which dispatch is
//                 taken: giving both is refused at arm time.
//   count         captures before the arm is done (0 means 1). The daemon
//                 counts across all agents; each agent also stops after
//                 `count` captures of its own. With nth each process gives
//                 at most one capture, so nth with count > 1 collects the
//                 nth dispatch of `count` processes (refused with a pid,
//                 which names one process).
//   expires       unix ms after which the arm is dead; 0: never.
//   per_shape     kOff: as above. Otherwise one capture per distinct launch
//                 shape of each process: after `skip`, a matching dispatch
//                 is taken only when no earlier capture of this arm in the
//                 process had its shape key (agent/core/launch_shape.h says
//                 what kScalars and kLaunch put into the key); up to `count`
//                 captures (0 means kDefaultPerShapeCount). A dispatch whose
//                 shape the agent cannot compute is never taken. nth
//                 contradicts it (refused). kerncapd keeps the shapes of the
//                 captures it took for the arm and refuses a capture of a
//                 shape the arm already has (from another process).
//
// Competing arms: a dispatch is offered to the active arms in arming order
// (oldest first); the first arm that takes it captures it, and it is not
// offered to younger arms, so it does not advance their skip/nth/count. A
// dispatch an arm lets pass (skip, or before nth) is offered on to the next.
#ifndef KERNCAP_COMMON_AGENT_LINK_SELECTOR_H_
#define KERNCAP_COMMON_AGENT_LINK_SELECTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/agent_link/launch_shape.h"
#include "common/agent_link/linear_regex.h"
#include "common/agent_link/result.h"
#include "common/agent_link/vocabulary.h"

namespace kerncap::link {

// Kernel names longer than this never match an arm (the agent does not
// evaluate them) and the daemon refuses captures that carry one: it bounds
// the work a selector costs on the application's launching thread. The
// longest real names (CUTLASS/CUTE templates, demangled) are a few 10 KiB.
inline constexpr size_t kMaxKernelNameBytes = 64u << 10;
// Longest selector pattern (the daemon's request limit for strings).
inline constexpr size_t kMaxPatternBytes = 4096;

struct Selector {
  std::string kernel;
  NameMatch match = NameMatch::kSubstring;
  uint32_t pid = 0;
  std::string process_name;
  int32_t device = -1;
  uint64_t skip = 0;
  uint64_t nth = 0;
  uint32_t count = 0;
  int64_t expires_unix_ms = 0;
  int64_t rank = -1;  // -1: any; else only the process of this rank (never an unknown one)
  PerShape per_shape = PerShape::kOff;
};

// Captures a per-shape arm takes when its count is 0.
inline constexpr uint32_t kDefaultPerShapeCount = 16;

// Empty when valid; otherwise a message naming the bad field, e.g.
// "selector.kernel: invalid regex '(': missing ): (". Also refuses
// contradictory combinations (skip with nth; nth with count > 1 and a pid).
std::string ValidateSelector(const Selector& selector);

inline uint32_t EffectiveCount(const Selector& s) {
  if (s.count != 0) return s.count;
  return s.per_shape == PerShape::kOff ? 1 : kDefaultPerShapeCount;
}

bool MatchesProcess(const Selector& selector, uint32_t pid, std::string_view process_name,
                    int64_t rank = -1);
inline bool MatchesDevice(const Selector& s, int32_t device) {
  return s.device < 0 || s.device == device;
}
inline bool IsExpired(const Selector& s, int64_t now_unix_ms) {
  return s.expires_unix_ms != 0 && now_unix_ms >= s.expires_unix_ms;
}

// Matches kernel names against one selector, caching the answer per name so a
// hot launch path pays one hash lookup after the first dispatch of a kernel.
// Not thread-safe: the owner serializes calls.
class NameMatcher {
 public:
  static LinkResult<NameMatcher> Compile(const std::string& pattern, NameMatch match);

  // False for names longer than kMaxKernelNameBytes. Never throws.
  bool Matches(std::string_view demangled, std::string_view mangled);
  size_t cache_size() const { return cache_.size(); }

  // What the agent needs to keep matching off the launching thread when it
  // costs too much there (agent_link_client.h):
  // The cached answer for this kernel (over-long names: false), if any.
  std::optional<bool> Cached(std::string_view demangled, std::string_view mangled) const;
  // The work an uncached match of this kernel costs, in steps: bytes
  // scanned, times the program's size for globs and regexes (an NFA
  // simulation keeps every instruction live at worst); 0 for over-long names.
  uint64_t MatchCost(std::string_view demangled, std::string_view mangled) const;
  // Records an answer computed by a copy (WithoutCache) elsewhere.
  void Remember(std::string_view demangled, std::string_view mangled, bool result);
  // A copy sharing the compiled pattern, with an empty cache (cheap).
  NameMatcher WithoutCache() const;
  // The answer without the cache (const: thread-safe); false for
  // over-long names.
  bool MatchUncachedBounded(std::string_view demangled, std::string_view mangled) const;

 private:
  NameMatcher() = default;
  bool MatchUncached(std::string_view demangled, std::string_view mangled) const;

  // Bounds memory in processes that generate endless distinct kernel names
  // (JIT); losing the cache only costs a re-match.
  static constexpr size_t kMaxCacheEntries = 1u << 16;

  std::string pattern_;
  NameMatch match_ = NameMatch::kSubstring;
  // Glob and regex patterns, compiled once; shared by copies (matching is
  // const and thread-safe).
  std::shared_ptr<const LinearRegex> re_;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, bool, Hash, std::equal_to<>> cache_;
};

// Per-process dispatch accounting of one arm: decides which of the matching
// dispatches is captured (skip / nth / count / per_shape). Not thread-safe.
class DispatchCounter {
 public:
  explicit DispatchCounter(const Selector& selector)
      : skip_(selector.skip),
        nth_(selector.nth),
        count_(EffectiveCount(selector)),
        per_shape_(selector.per_shape != PerShape::kOff) {}

  // Called for each dispatch that matches the selector; `shape_key` is the
  // dispatch's shape key for the arm's per_shape mode (ignored by arms that
  // are not per-shape; nullopt: the agent could not compute it, and a
  // per-shape arm then lets the dispatch pass). Returns the 1-based index of
  // this matching dispatch when it is to be captured.
  std::optional<uint64_t> OnMatch(std::optional<uint64_t> shape_key = std::nullopt);
  // True once this process can take no more captures for the arm.
  bool done() const;
  // Returns the capture of the last OnMatch to the arm (that dispatch could
  // not be captured), so a later matching dispatch is taken (of a per-shape
  // arm: a later one of the same shape). Only arms without nth can do that
  // (nth names one dispatch); false otherwise.
  bool GiveBack();
  bool per_shape() const { return per_shape_; }
  uint64_t matched() const { return matched_; }
  uint32_t captured() const { return captured_; }

 private:
  uint64_t skip_;
  uint64_t nth_;
  uint32_t count_;
  bool per_shape_;
  uint64_t matched_ = 0;
  uint32_t captured_ = 0;
  // Per-shape arms: the shapes captured (at most count_ keys), and the key
  // of the last capture, which GiveBack forgets again.
  std::unordered_set<uint64_t> shapes_;
  std::optional<uint64_t> last_shape_;
};

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_AGENT_LINK_SELECTOR_H_
