#include "client/kerncapctl/context_config.h"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace kerncap::ctl {
namespace {

constexpr char kKeys[] =
    "host, socket, tls-ca, tls-cert, tls-key, token-file, insecure";

bool BareName(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

// A TOML basic string starting at s[0] == '"'. Sets *rest to what follows.
absl::StatusOr<std::string> BasicString(absl::string_view s, absl::string_view* rest) {
  std::string out;
  for (size_t i = 1; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      *rest = s.substr(i + 1);
      return out;
    }
    if (c == '\\') {
      if (++i >= s.size()) break;
      switch (s[i]) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        default:
          return absl::InvalidArgumentError(
              absl::StrCat("unsupported escape \\", std::string(1, s[i]),
                           " (use \\\\, \\\", \\n or \\t)"));
      }
      continue;
    }
    if (static_cast<unsigned char>(c) < 0x20) {
      return absl::InvalidArgumentError("control character in a string");
    }
    out.push_back(c);
  }
  return absl::InvalidArgumentError("string without its closing \"");
}

// After a value: only whitespace and a comment may follow.
bool OnlyComment(absl::string_view rest) {
  rest = absl::StripLeadingAsciiWhitespace(rest);
  return rest.empty() || rest[0] == '#';
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

std::string Resolve(const std::string& path, absl::string_view dir) {
  if (path.empty() || path[0] == '/' || dir.empty()) return path;
  return absl::StrCat(dir, "/", path);
}

}  // namespace

const Context* ContextConfig::Find(absl::string_view name) const {
  for (const Context& c : contexts) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

Context* ContextConfig::Find(absl::string_view name) {
  for (Context& c : contexts) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

absl::StatusOr<ContextConfig> ParseContextConfig(absl::string_view text, absl::string_view file,
                                                 absl::string_view dir) {
  ContextConfig cfg;
  Context* current = nullptr;  // the table being read; nullptr: top level
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(file, ":", line_no, ": ", what));
    };
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      size_t close = line.find(']');
      if (close == absl::string_view::npos || !OnlyComment(line.substr(close + 1))) {
        return bad("expected a table header [contexts.NAME]");
      }
      absl::string_view header = absl::StripAsciiWhitespace(line.substr(1, close - 1));
      if (!absl::ConsumePrefix(&header, "contexts.")) {
        return bad(absl::StrCat("unknown table [", header, "]: only [contexts.NAME] tables"));
      }
      std::string name;
      if (!header.empty() && header[0] == '"') {
        absl::string_view rest;
        auto s = BasicString(header, &rest);
        if (!s.ok() || !rest.empty()) return bad("bad quoted context name");
        name = *s;
      } else if (BareName(header)) {
        name = std::string(header);
      } else {
        return bad(absl::StrCat("context name \"", header,
                                "\": use letters, digits, '-' and '_', or quote it"));
      }
      if (name.empty()) return bad("empty context name");
      if (cfg.Find(name) != nullptr) return bad(absl::StrCat("context \"", name, "\" defined twice"));
      cfg.contexts.push_back(Context{});
      current = &cfg.contexts.back();
      current->name = name;
      continue;
    }
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos) return bad("expected key = value");
    std::string key(absl::StripAsciiWhitespace(line.substr(0, eq)));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(eq + 1));
    if (!BareName(key)) return bad(absl::StrCat("bad key \"", key, "\""));
    // The value: a basic string or a boolean.
    std::string str;
    bool is_bool = false;
    bool flag = false;
    if (!value.empty() && value[0] == '"') {
      absl::string_view rest;
      auto s = BasicString(value, &rest);
      if (!s.ok()) return bad(s.status().message());
      if (!OnlyComment(rest)) return bad("unexpected text after the value");
      str = *s;
    } else {
      absl::string_view word = value.substr(0, value.find_first_of(" \t#"));
      if (!OnlyComment(value.substr(word.size()))) return bad("unexpected text after the value");
      if (word == "true" || word == "false") {
        is_bool = true;
        flag = word == "true";
      } else {
        return bad(absl::StrCat("value of ", key, ": expected a \"quoted string\" or true/false"));
      }
    }
    if (current == nullptr) {
      if (key != "current-context") {
        return bad(absl::StrCat("unknown key \"", key,
                                "\" at the top level (only current-context; context settings go "
                                "under [contexts.NAME])"));
      }
      if (is_bool) return bad("current-context: expected a \"quoted\" context name");
      cfg.current = str;
      continue;
    }
    if (key == "insecure") {
      if (!is_bool) return bad("insecure: expected true or false");
      current->insecure = flag;
      continue;
    }
    if (is_bool) return bad(absl::StrCat(key, ": expected a \"quoted string\""));
    if (key == "host") {
      current->host = str;
    } else if (key == "socket") {
      current->socket = Resolve(str, dir);
    } else if (key == "tls-ca") {
      current->tls_ca = Resolve(str, dir);
    } else if (key == "tls-cert") {
      current->tls_cert = Resolve(str, dir);
    } else if (key == "tls-key") {
      current->tls_key = Resolve(str, dir);
    } else if (key == "token-file") {
      current->token_file = Resolve(str, dir);
    } else {
      return bad(absl::StrCat("unknown key \"", key, "\" (context keys: ", kKeys, ")"));
    }
  }
  for (const Context& c : cfg.contexts) {
    if (!c.host.empty() && !c.socket.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": context \"", c.name, "\" has both host and socket: give one"));
    }
  }
  if (!cfg.current.empty() && cfg.Find(cfg.current) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": current-context \"", cfg.current, "\" is not defined ([contexts.", cfg.current,
        "] is missing)"));
  }
  return cfg;
}

std::string FormatContextConfig(const ContextConfig& config) {
  std::string out = "# kerncapctl contexts (kerncapctl config set-context / use-context)\n";
  if (!config.current.empty()) absl::StrAppend(&out, "current-context = ", Quote(config.current), "\n");
  for (const Context& c : config.contexts) {
    absl::StrAppend(&out, "\n[contexts.", BareName(c.name) ? c.name : Quote(c.name), "]\n");
    auto put = [&](const char* key, const std::string& v) {
      if (!v.empty()) absl::StrAppend(&out, key, " = ", Quote(v), "\n");
    };
    put("host", c.host);
    put("socket", c.socket);
    put("tls-ca", c.tls_ca);
    put("tls-cert", c.tls_cert);
    put("tls-key", c.tls_key);
    put("token-file", c.token_file);
    if (c.insecure) absl::StrAppend(&out, "insecure = true\n");
  }
  return out;
}

absl::StatusOr<ContextConfig> LoadContextConfig(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return ContextConfig{};
  KC_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseContextConfig(text, path, DirName(path));
}

absl::Status SaveContextConfig(const std::string& path, const ContextConfig& config) {
  KC_RETURN_IF_ERROR(MakeDirs(DirName(path), 0700));
  return WriteFileAtomic(path, FormatContextConfig(config), 0600);
}

}  // namespace kerncap::ctl
