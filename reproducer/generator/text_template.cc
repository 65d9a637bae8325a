#include "reproducer/generator/text_template.h"

#include <cctype>
#include <cstddef>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kerncap::repro {
namespace {

bool ValidName(std::string_view n) {
  if (n.empty()) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

size_t LineOf(std::string_view t, size_t pos) {
  size_t line = 1;
  for (size_t i = 0; i < pos && i < t.size(); ++i) line += t[i] == '\n';
  return line;
}

}  // namespace

absl::StatusOr<std::string> RenderTemplate(std::string_view name, std::string_view t,
                                           const TemplateValues& v) {
  for (const auto& [k, unused] : v.text) {
    if (v.flags.count(k)) {
      return absl::InternalError(absl::StrCat("template ", std::string(name), ": '", k,
                                              "' is given as both a value and a flag"));
    }
  }
  struct Open {
    std::string name;
    bool active;
    size_t line;
  };
  std::vector<Open> stack;
  auto active = [&stack] { return stack.empty() || stack.back().active; };
  auto error = [&](size_t pos, const std::string& what) {
    return absl::InternalError(
        absl::StrCat("template ", std::string(name), " line ", LineOf(t, pos), ": ", what));
  };
  std::string out;
  size_t pos = 0;
  while (pos < t.size()) {
    const size_t open = t.find("{{", pos);
    if (open == std::string_view::npos) {
      if (active()) out.append(t.substr(pos));
      break;
    }
    if (active()) out.append(t.substr(pos, open - pos));
    const size_t close = t.find("}}", open + 2);
    if (close == std::string_view::npos) return error(open, "'{{' without '}}'");
    std::string_view tag = t.substr(open + 2, close - open - 2);
    size_t next = close + 2;
    const char kind = tag.empty() ? '\0' : tag[0];
    // A block tag or comment alone on its line takes the line with it.
    const bool block = kind == '#' || kind == '^' || kind == '/' || kind == '!';
    if (block && (open == 0 || t[open - 1] == '\n') && (next == t.size() || t[next] == '\n')) {
      if (next < t.size()) ++next;
    }
    if (kind == '!') {
      pos = next;
      continue;
    }
    std::string_view id = block ? tag.substr(1) : tag;
    if (!ValidName(id)) {
      return error(open, absl::StrCat("'{{", std::string(tag),
                                      "}}' is not a tag (names are [A-Za-z0-9_]+)"));
    }
    const std::string key(id);
    if (kind == '#' || kind == '^') {
      auto f = v.flags.find(key);
      if (f == v.flags.end()) return error(open, absl::StrCat("unknown flag '", key, "'"));
      const bool on = kind == '#' ? f->second : !f->second;
      stack.push_back({key, active() && on, LineOf(t, open)});
    } else if (kind == '/') {
      if (stack.empty() || stack.back().name != key) {
        return error(open, stack.empty() ? absl::StrCat("'{{/", key, "}}' closes no section")
                                         : absl::StrCat("'{{/", key, "}}' closes section '",
                                                        stack.back().name, "' opened on line ",
                                                        stack.back().line));
      }
      stack.pop_back();
    } else {
      auto x = v.text.find(key);
      if (x == v.text.end()) return error(open, absl::StrCat("unknown value '", key, "'"));
      if (active()) out.append(x->second);
    }
    pos = next;
  }
  if (!stack.empty()) {
    return absl::InternalError(absl::StrCat("template ", std::string(name), ": section '",
                                            stack.back().name, "' opened on line ",
                                            stack.back().line, " is never closed"));
  }
  return out;
}

}  // namespace kerncap::repro
