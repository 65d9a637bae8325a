#include "common/agent_link/selector.h"

#include <fnmatch.h>

namespace kerncap::link {

std::string ValidateSelector(const Selector& s) {
  switch (s.match) {
    case NameMatch::kSubstring:
    case NameMatch::kGlob:
      break;
    case NameMatch::kMangled:
      if (s.kernel.empty()) return "selector.kernel: an exact mangled-name match needs a name";
      break;
    case NameMatch::kRegex: {
      LinkResult<NameMatcher> m = NameMatcher::Compile(s.kernel, s.match);
      if (!m.ok()) return "selector.kernel: " + m.error();
      break;
    }
    default:
      return "selector.match: unknown match kind " + std::to_string(static_cast<int>(s.match));
  }
  if (s.device < -1) return "selector.device: must be -1 (any) or a device ordinal";
  if (s.expires_unix_ms < 0) return "selector.expires: must not be negative";
  return "";
}

bool MatchesProcess(const Selector& s, uint32_t pid, std::string_view process_name) {
  if (s.pid != 0 && s.pid != pid) return false;
  if (!s.process_name.empty() && process_name.find(s.process_name) == std::string_view::npos) {
    return false;
  }
  return true;
}

LinkResult<NameMatcher> NameMatcher::Compile(const std::string& pattern, NameMatch match) {
  NameMatcher m;
  m.pattern_ = pattern;
  m.match_ = match;
  if (match == NameMatch::kRegex) {
    try {
      m.regex_ = std::make_shared<const std::regex>(
          pattern, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      return LinkStatus::Error("invalid regex '" + pattern + "': " + e.what());
    } catch (const std::exception& e) {
      return LinkStatus::Error("invalid regex '" + pattern + "': " + e.what());
    }
  }
  return m;
}

bool NameMatcher::MatchUncached(std::string_view demangled, std::string_view mangled) const {
  std::string_view name = demangled.empty() ? mangled : demangled;
  switch (match_) {
    case NameMatch::kSubstring:
      return name.find(pattern_) != std::string_view::npos;
    case NameMatch::kGlob:
      return ::fnmatch(pattern_.c_str(), std::string(name).c_str(), 0) == 0;
    case NameMatch::kRegex:
      try {
        return std::regex_search(name.begin(), name.end(), *regex_);
      } catch (const std::exception&) {
        return false;  // e.g. regex_error(error_complexity): never into the app
      }
    case NameMatch::kMangled:
      return mangled == pattern_;
  }
  return false;
}

bool NameMatcher::Matches(std::string_view demangled, std::string_view mangled) {
  // Mangled names identify a kernel uniquely; the demangled name is the key
  // only when an agent has no mangled one. Lookup does not allocate.
  std::string_view key = mangled.empty() ? demangled : mangled;
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  bool result = MatchUncached(demangled, mangled);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(std::string(key), result);
  return result;
}

std::optional<uint64_t> DispatchCounter::OnMatch() {
  if (done()) return std::nullopt;
  uint64_t index = ++matched_;
  bool take = nth_ > 0 ? index == skip_ + nth_ : index > skip_;
  if (!take) return std::nullopt;
  ++captured_;
  return index;
}

bool DispatchCounter::GiveBack() {
  if (nth_ > 0 || captured_ == 0) return false;
  --captured_;
  return true;
}

bool DispatchCounter::done() const {
  if (captured_ >= count_) return true;
  return nth_ > 0 && matched_ >= skip_ + nth_;
}

}  // namespace kerncap::link
