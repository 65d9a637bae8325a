#include "common/agent_link/selector.h"

#include <string.h>

#include <new>

namespace kerncap::link {
namespace {

// Appends `c` to a regular expression as a literal byte.
void AppendLiteral(char c, std::string* out) {
  const unsigned char u = static_cast<unsigned char>(c);
  if ((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_') {
    out->push_back(c);
    return;
  }
  static const char kHex[] = "0123456789abcdef";
  out->append("\\x");
  out->push_back(kHex[u >> 4]);
  out->push_back(kHex[u & 15]);
}

// Translates an fnmatch(3) pattern (no flags) into a LinearRegex that
// matches the same whole strings: `*` any bytes, `?` one byte, `[...]` a
// bracket expression (`!` or `^` negates, `]` first is literal, ranges and
// [:class:] pass through), `\x` the literal x. A `[` without its `]` is a
// literal `[`, as fnmatch treats it; a pattern ending in a lone backslash is
// malformed to fnmatch and matches nothing.
std::string GlobToRegex(const std::string& glob) {
  std::string re = "^(?:";
  for (size_t i = 0; i < glob.size(); ++i) {
    const char c = glob[i];
    if (c == '*') {
      re += ".*";
    } else if (c == '?') {
      re += ".";
    } else if (c == '\\') {
      if (i + 1 == glob.size()) return "[^\\x00-\\xff]";  // an empty class: no match
      AppendLiteral(glob[++i], &re);
    } else if (c == '[') {
      size_t j = i + 1;
      std::string cls = "[";
      if (j < glob.size() && (glob[j] == '!' || glob[j] == '^')) {
        cls += '^';
        ++j;
      }
      bool first = true;
      bool closed = false;
      for (; j < glob.size(); ++j) {
        const char d = glob[j];
        if (d == ']' && !first) {
          closed = true;
          break;
        }
        first = false;
        if (d == '[' && j + 1 < glob.size() && glob[j + 1] == ':') {
          const size_t end = glob.find(":]", j + 2);
          if (end != std::string::npos) {
            cls.append(glob, j, end + 2 - j);  // [:alpha:] and friends
            j = end + 1;
            continue;
          }
        }
        if (d == '-' ) {
          cls += '-';
        } else {
          AppendLiteral(d, &cls);
        }
      }
      if (closed) {
        re += cls + "]";
        i = j;
      } else {
        AppendLiteral('[', &re);
      }
    } else {
      AppendLiteral(c, &re);
    }
  }
  re += ")$";
  return re;
}

}  // namespace

std::string ValidateSelector(const Selector& s) {
  if (s.kernel.size() > kMaxPatternBytes) {
    return "selector.kernel: pattern of " + std::to_string(s.kernel.size()) +
           " bytes is longer than " + std::to_string(kMaxPatternBytes);
  }
  switch (s.match) {
    case NameMatch::kSubstring:
    case NameMatch::kGlob:
    case NameMatch::kRegex: {
      LinkResult<NameMatcher> m = NameMatcher::Compile(s.kernel, s.match);
      if (!m.ok()) return "selector.kernel: " + m.error();
      break;
    }
    case NameMatch::kMangled:
      if (s.kernel.empty()) return "selector.kernel: an exact mangled-name match needs a name";
      break;
    default:
      return "selector.match: unknown match kind " + std::to_string(static_cast<int>(s.match));
  }
  if (s.device < -1) return "selector.device: must be -1 (any) or a device ordinal";
  if (s.rank < -1) return "selector.rank: must be a rank (0 or more)";
  if (s.expires_unix_ms < 0) return "selector.expires: must not be negative";
  if (s.nth > 0 && s.skip > 0) {
    return "selector.skip: skip and nth both choose which dispatch is taken; give nth=N (the "
           "Nth matching dispatch) or skip=S (the dispatches after the first S), not both";
  }
  if (s.per_shape != PerShape::kOff && s.per_shape != PerShape::kScalars &&
      s.per_shape != PerShape::kLaunch) {
    return "selector.per_shape: unknown value " + std::to_string(static_cast<int>(s.per_shape));
  }
  if (s.per_shape != PerShape::kOff && s.nth > 0) {
    return "selector.nth: a per-shape arm takes the first dispatch of each shape; nth names one "
           "dispatch. Use skip=S to let the first S matching dispatches pass";
  }
  if (s.nth > 0 && s.count > 1 && s.pid != 0) {
    return "selector.count: nth takes one dispatch per process, and pid names one process, so "
           "count must be 1";
  }
  return "";
}

bool MatchesProcess(const Selector& s, uint32_t pid, std::string_view process_name,
                    int64_t rank) {
  if (s.pid != 0 && s.pid != pid) return false;
  if (s.rank >= 0 && s.rank != rank) return false;
  if (!s.process_name.empty() && process_name.find(s.process_name) == std::string_view::npos) {
    return false;
  }
  return true;
}

LinkResult<NameMatcher> NameMatcher::Compile(const std::string& pattern, NameMatch match) {
  if (pattern.size() > kMaxPatternBytes) {
    return LinkStatus::Error("pattern of " + std::to_string(pattern.size()) +
                             " bytes is longer than " + std::to_string(kMaxPatternBytes));
  }
  NameMatcher m;
  m.pattern_ = pattern;
  m.match_ = match;
  std::string expression;
  const char* kind = "";
  switch (match) {
    case NameMatch::kSubstring:
    case NameMatch::kMangled:
      return m;
    case NameMatch::kGlob:
      expression = GlobToRegex(pattern);
      kind = "glob";
      break;
    case NameMatch::kRegex:
      expression = pattern;
      kind = "regex";
      break;
  }
  std::string error;
  std::optional<LinearRegex> re = LinearRegex::Compile(expression, &error);
  if (!re.has_value()) {
    return LinkStatus::Error(std::string("invalid ") + kind + " '" + pattern + "': " + error);
  }
  try {
    m.re_ = std::make_shared<const LinearRegex>(std::move(*re));
  } catch (const std::exception& e) {
    return LinkStatus::Error(std::string("cannot compile ") + kind + " '" + pattern +
                             "': " + e.what());
  }
  return m;
}

bool NameMatcher::MatchUncached(std::string_view demangled, std::string_view mangled) const {
  std::string_view name = demangled.empty() ? mangled : demangled;
  switch (match_) {
    case NameMatch::kSubstring:
      // glibc's memmem is linear (two-way) whatever the pattern.
      return pattern_.empty() ||
             ::memmem(name.data(), name.size(), pattern_.data(), pattern_.size()) != nullptr;
    case NameMatch::kGlob:
    case NameMatch::kRegex:
      return re_ != nullptr && re_->Search(name);
    case NameMatch::kMangled:
      return mangled == pattern_;
  }
  return false;
}

bool NameMatcher::Matches(std::string_view demangled, std::string_view mangled) {
  // Bounded work per launch: over-long names are never matched (and never
  // cached, so they cost no memory either).
  if (demangled.size() > kMaxKernelNameBytes || mangled.size() > kMaxKernelNameBytes) {
    return false;
  }
  // Mangled names identify a kernel uniquely; the demangled name is the key
  // only when an agent has no mangled one. Lookup does not allocate.
  std::string_view key = mangled.empty() ? demangled : mangled;
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  bool result = MatchUncached(demangled, mangled);
  try {
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(key), result);
  } catch (const std::bad_alloc&) {
    // Out of memory: answer without caching rather than into the app.
  }
  return result;
}

namespace {
bool OverLong(std::string_view demangled, std::string_view mangled) {
  return demangled.size() > kMaxKernelNameBytes || mangled.size() > kMaxKernelNameBytes;
}
}  // namespace

std::optional<bool> NameMatcher::Cached(std::string_view demangled,
                                        std::string_view mangled) const {
  if (OverLong(demangled, mangled)) return false;
  auto it = cache_.find(mangled.empty() ? demangled : mangled);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

uint64_t NameMatcher::MatchCost(std::string_view demangled, std::string_view mangled) const {
  if (OverLong(demangled, mangled)) return 0;
  const uint64_t bytes = (demangled.empty() ? mangled : demangled).size() + 1;
  switch (match_) {
    case NameMatch::kSubstring: return bytes;
    case NameMatch::kMangled: return mangled.size() + 1;
    case NameMatch::kGlob:
    case NameMatch::kRegex: return bytes * (re_ != nullptr ? re_->program_size() : 1);
  }
  return bytes;
}

void NameMatcher::Remember(std::string_view demangled, std::string_view mangled, bool result) {
  if (OverLong(demangled, mangled)) return;
  try {
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.insert_or_assign(std::string(mangled.empty() ? demangled : mangled), result);
  } catch (const std::bad_alloc&) {
  }
}

NameMatcher NameMatcher::WithoutCache() const {
  NameMatcher m;
  m.pattern_ = pattern_;
  m.match_ = match_;
  m.re_ = re_;
  return m;
}

bool NameMatcher::MatchUncachedBounded(std::string_view demangled,
                                       std::string_view mangled) const {
  if (OverLong(demangled, mangled)) return false;
  return MatchUncached(demangled, mangled);
}

std::optional<uint64_t> DispatchCounter::OnMatch(std::optional<uint64_t> shape_key) {
  if (done()) return std::nullopt;
  uint64_t index = ++matched_;
  bool take = nth_ > 0 ? index == skip_ + nth_ : index > skip_;
  if (!take) return std::nullopt;
  if (per_shape_) {
    if (!shape_key || shapes_.count(*shape_key) != 0) return std::nullopt;
    shapes_.insert(*shape_key);
    last_shape_ = shape_key;
  }
  ++captured_;
  return index;
}

bool DispatchCounter::GiveBack() {
  if (nth_ > 0 || captured_ == 0) return false;
  --captured_;
  if (last_shape_) {
    shapes_.erase(*last_shape_);
    last_shape_.reset();
  }
  return true;
}

bool DispatchCounter::done() const {
  if (captured_ >= count_) return true;
  return nth_ > 0 && matched_ >= skip_ + nth_;
}

}  // namespace kerncap::link
