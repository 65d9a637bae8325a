#include "reproducer/generator/include_closure.h"

#include <deque>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "reproducer/generator/path_util.h"

namespace kerncap::repro {
namespace {

void AddUnique(std::vector<std::string>* out, std::set<std::string>* seen, const std::string& p) {
  if (seen->insert(p).second) out->push_back(p);
}

}  // namespace

std::vector<std::string> ParseMakeDeps(std::string_view text) {
  std::vector<std::string> out;
  // The rule's target ends at the first ": " (or ":" then newline).
  size_t colon = text.find(": ");
  if (colon == std::string_view::npos) colon = text.find(":\n");
  if (colon == std::string_view::npos) colon = text.find(':');
  if (colon == std::string_view::npos) return out;
  std::string cur;
  for (size_t i = colon + 1; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size()) {
      char n = text[i + 1];
      if (n == '\n' || n == '\r') {  // continuation
        ++i;
        if (!cur.empty()) out.push_back(std::move(cur));
        cur.clear();
        continue;
      }
      if (n == ' ' || n == '#' || n == '\\') {
        cur.push_back(n);
        ++i;
        continue;
      }
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
      // A blank line ends the first rule (-MP adds phony rules after it).
      if (c == '\n' && i + 1 < text.size() && text[i + 1] == '\n') break;
      continue;
    }
    cur.push_back(c);
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::vector<std::string> IncludeDirsOf(const CompileCommand& c) {
  std::vector<std::string> dirs;
  static const char* const kOptions[] = {"-I",         "-isystem",         "-iquote",
                                         "-idirafter", "--include-path",   "--system-include",
                                         "-isystem=",  "--include-path=",  "--system-include="};
  for (size_t i = 1; i < c.argv.size(); ++i) {
    const std::string& a = c.argv[i];
    for (const char* opt : kOptions) {
      const std::string o = opt;
      const bool joined_eq = o.back() == '=';
      if (!joined_eq && a == o && i + 1 < c.argv.size()) {
        dirs.push_back(Normalize(c.argv[++i], c.directory));
        break;
      }
      if (!absl::StartsWith(a, o) || a.size() == o.size()) continue;
      // "-I/x" and "-Ix"; the longer names only joined by '=' or before '/'.
      if (o == "-I" || joined_eq || (o[1] != '-' && a[o.size()] == '/')) {
        std::string v = a.substr(o.size());
        if (o == "-I" && !v.empty() && v[0] == '=') v = v.substr(1);
        dirs.push_back(Normalize(v, c.directory));
        break;
      }
    }
  }
  return dirs;
}

const std::vector<IncludeScanner::Directive>& IncludeScanner::DirectivesOf(
    const std::string& file) {
  auto it = directives_.find(file);
  if (it != directives_.end()) return it->second;
  static const std::regex kInclude(R"re(^\s*#\s*include\s*(["<])([^">]+)[">])re");
  std::vector<Directive> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    // Cheap reject before the regex: most lines are not directives.
    const size_t hash = line.find_first_not_of(" \t");
    if (hash == std::string::npos || line[hash] != '#') continue;
    std::smatch m;
    if (std::regex_search(line, m, kInclude)) out.push_back({m[1].str() == "\"", m[2].str()});
  }
  return directives_.emplace(file, std::move(out)).first->second;
}

std::string IncludeScanner::Resolve(const std::string& file, const Directive& d,
                                    const std::vector<std::string>& include_dirs,
                                    const std::string& root, const std::string& fallback) {
  std::string key = d.quoted ? DirName(file) : std::string();
  for (const std::string& dir : include_dirs) absl::StrAppend(&key, "\n", dir);
  absl::StrAppend(&key, "\n", root, "\n", fallback, "\n", d.name);
  auto it = resolved_.find(key);
  if (it != resolved_.end()) return it->second;
  std::vector<std::string> candidates;
  if (d.quoted) candidates.push_back(Normalize(d.name, DirName(file)));
  for (const std::string& dir : include_dirs) candidates.push_back(Normalize(d.name, dir));
  if (!fallback.empty()) candidates.push_back(Normalize(d.name, fallback));
  std::string found;
  for (const std::string& c : candidates) {
    if (IsSystemPath(c) || !FileExists(c)) continue;
    // The first existing file is the one the compiler takes; outside the
    // root it is not followed (but nothing later in the path is used).
    if (root.empty() || IsUnder(c, root)) found = c;
    break;
  }
  resolved_.emplace(std::move(key), found);
  return found;
}

std::vector<std::string> IncludeScanner::Closure(const std::string& seed,
                                                 const std::vector<std::string>& include_dirs,
                                                 const std::string& root,
                                                 const std::string& fallback,
                                                 const std::vector<std::string>& stop_when_all) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::set<std::string> wanted(stop_when_all.begin(), stop_when_all.end());
  std::deque<std::string> queue = {seed};
  while (!queue.empty()) {
    std::string file = std::move(queue.front());
    queue.pop_front();
    if (!seen.insert(file).second) continue;
    out.push_back(file);
    if (!wanted.empty() && wanted.erase(file) > 0 && wanted.empty()) break;
    for (const Directive& d : DirectivesOf(file)) {
      std::string p = Resolve(file, d, include_dirs, root, fallback);
      if (!p.empty() && seen.count(p) == 0) queue.push_back(std::move(p));
    }
  }
  return out;
}

std::vector<std::string> ScanIncludes(const std::vector<std::string>& seeds,
                                      const std::vector<std::string>& include_dirs,
                                      const std::string& root) {
  IncludeScanner scanner;
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& seed : seeds) {
    for (std::string& f : scanner.Closure(seed, include_dirs, root, root)) {
      if (seen.insert(f).second) out.push_back(std::move(f));
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> PreprocessorDependencies(const CompileCommand& command,
                                                                  const std::string& tu,
                                                                  Language lang,
                                                                  const std::string& compiler,
                                                                  const std::string& arch) {
  CoreFlags core = ExtractCoreFlags(command, tu, lang);
  std::vector<std::string> argv = {compiler};
  if (lang == Language::kCuda) {
    argv.push_back("-arch=" + arch);
  } else {
    for (const char* f : {"-x", "hip", "--cuda-device-only"}) argv.push_back(f);
    argv.push_back("--offload-arch=" + arch);
  }
  argv.insert(argv.end(), core.flags.begin(), core.flags.end());
  argv.push_back("-M");
  argv.push_back(tu);
  auto r = RunTool(argv, command.directory);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the preprocessor failed (exit ", r->exit_code, "): ", r->err.substr(0, 400)));
  }
  std::vector<std::string> out;
  for (const std::string& dep : ParseMakeDeps(r->out)) {
    out.push_back(Normalize(dep, command.directory));
  }
  return out;
}

IncludeClosure CollectIncludeClosure(const SourceLocation& loc, Language lang,
                                     const ToolPaths& tools, const std::string& arch) {
  IncludeClosure closure;
  std::set<std::string> seen;
  std::string why_not;
  if (!loc.command.has_value()) {
    why_not = "no compile command";
  } else if (!DirExists(loc.command->directory)) {
    why_not = absl::StrCat("the compile command's directory ", loc.command->directory,
                           " does not exist here");
  } else {
    const std::string& tool = lang == Language::kCuda ? tools.nvcc : tools.clang;
    if (tool.empty()) {
      why_not = lang == Language::kCuda ? "nvcc not found" : "clang not found";
    } else {
      auto deps = PreprocessorDependencies(*loc.command, loc.tu, lang, tool, arch);
      if (!deps.ok()) {
        why_not = std::string(deps.status().message());
      } else {
        AddUnique(&closure.files, &seen, loc.tu);
        for (const std::string& p : *deps) {
          if (IsUnder(p, loc.root) && !IsSystemPath(p) && FileExists(p)) {
            AddUnique(&closure.files, &seen, p);
          }
        }
        closure.method = "preprocessor";
        return closure;
      }
    }
  }
  closure.method = "scan";
  closure.note = absl::StrCat(why_not,
                              ": the line table's files and a scan of their #include "
                              "directives were used instead");
  std::vector<std::string> dirs;
  if (loc.command.has_value()) dirs = IncludeDirsOf(*loc.command);
  for (const std::string& f : loc.files) dirs.push_back(DirName(f));
  closure.files = ScanIncludes(loc.files, dirs, loc.root);
  return closure;
}

}  // namespace kerncap::repro
