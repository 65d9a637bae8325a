#include "reproducer/generator/compile_db.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "reproducer/generator/path_util.h"

namespace kerncap::repro {

absl::StatusOr<std::vector<std::string>> SplitCommandLine(std::string_view s) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) words.push_back(std::move(cur));
      cur.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\' && i + 1 < s.size()) {
      cur.push_back(s[++i]);
    } else if (c == '\'') {
      size_t end = s.find('\'', i + 1);
      if (end == std::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("unterminated ' in command: ", std::string(s)));
      }
      cur.append(s.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < s.size() && s[j] != '"'; ++j) {
        if (s[j] == '\\' && j + 1 < s.size() &&
            (s[j + 1] == '"' || s[j + 1] == '\\' || s[j + 1] == '$' || s[j + 1] == '`')) {
          ++j;
        }
        cur.push_back(s[j]);
      }
      if (j >= s.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("unterminated \" in command: ", std::string(s)));
      }
      i = j;
    } else {
      cur.push_back(c);
    }
  }
  if (in_word) words.push_back(std::move(cur));
  return words;
}

absl::StatusOr<std::vector<CompileCommand>> ParseCompileDatabase(std::string_view text,
                                                                 const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a compilation database (expected a JSON array)"));
  }
  std::vector<CompileCommand> out;
  for (const nlohmann::json& e : j) {
    if (!e.is_object() || !e.contains("directory") || !e.contains("file") ||
        !e["directory"].is_string() || !e["file"].is_string()) {
      continue;
    }
    CompileCommand c;
    c.database = path;
    c.directory = Normalize(e["directory"].get<std::string>(), DirName(path));
    c.file = Normalize(e["file"].get<std::string>(), c.directory);
    if (e.contains("arguments") && e["arguments"].is_array()) {
      for (const nlohmann::json& a : e["arguments"]) {
        if (a.is_string()) c.argv.push_back(a.get<std::string>());
      }
    } else if (e.contains("command") && e["command"].is_string()) {
      auto words = SplitCommandLine(e["command"].get<std::string>());
      if (!words.ok()) continue;
      c.argv = std::move(*words);
    }
    if (c.argv.empty()) continue;
    out.push_back(std::move(c));
  }
  return out;
}

absl::StatusOr<std::vector<CompileCommand>> LoadCompileDatabase(const std::string& path) {
  KC_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseCompileDatabase(text, Normalize(path, std::filesystem::current_path().string()));
}

}  // namespace kerncap::repro
