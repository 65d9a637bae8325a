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

// -I folders of a command, absolute.
std::vector<std::string> IncludeDirs(const CompileCommand& c) {
  std::vector<std::string> dirs;
  for (size_t i = 1; i < c.argv.size(); ++i) {
    const std::string& a = c.argv[i];
    for (const char* opt : {"-I", "-isystem", "-iquote", "-idirafter"}) {
      const std::string o = opt;
      if (a == o && i + 1 < c.argv.size()) {
        dirs.push_back(Normalize(c.argv[i + 1], c.directory));
        break;
      }
      if (absl::StartsWith(a, o) && a.size() > o.size() && (o == "-I" || a[o.size()] == '/')) {
        dirs.push_back(Normalize(a.substr(o.size()), c.directory));
        break;
      }
    }
  }
  return dirs;
}

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

std::vector<std::string> ScanIncludes(const std::vector<std::string>& seeds,
                                      const std::vector<std::string>& include_dirs,
                                      const std::string& root) {
  static const std::regex kInclude(R"re(^\s*#\s*include\s*(["<])([^">]+)[">])re");
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::deque<std::string> queue(seeds.begin(), seeds.end());
  while (!queue.empty()) {
    std::string file = queue.front();
    queue.pop_front();
    if (!seen.insert(file).second) continue;
    out.push_back(file);
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, kInclude)) continue;
      const std::string name = m[2].str();
      std::vector<std::string> candidates;
      if (m[1].str() == "\"") candidates.push_back(Normalize(name, DirName(file)));
      for (const std::string& d : include_dirs) candidates.push_back(Normalize(name, d));
      candidates.push_back(Normalize(name, root));
      for (const std::string& c : candidates) {
        if (IsUnder(c, root) && !IsSystemPath(c) && FileExists(c)) {
          queue.push_back(c);
          break;
        }
      }
    }
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
      CoreFlags core = ExtractCoreFlags(*loc.command, loc.tu, lang);
      std::vector<std::string> argv = {tool};
      if (lang == Language::kCuda) {
        argv.push_back("-arch=" + arch);
      } else {
        for (const char* f : {"-x", "hip", "--cuda-device-only"}) argv.push_back(f);
        argv.push_back("--offload-arch=" + arch);
      }
      argv.insert(argv.end(), core.flags.begin(), core.flags.end());
      argv.push_back("-M");
      argv.push_back(loc.tu);
      auto r = RunTool(argv, loc.command->directory);
      if (!r.ok()) {
        why_not = std::string(r.status().message());
      } else if (r->exit_code != 0) {
        std::string err = r->err.substr(0, 400);
        why_not = absl::StrCat("the preprocessor failed (exit ", r->exit_code, "): ", err);
      } else {
        AddUnique(&closure.files, &seen, loc.tu);
        for (const std::string& dep : ParseMakeDeps(r->out)) {
          std::string p = Normalize(dep, loc.command->directory);
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
  if (loc.command.has_value()) dirs = IncludeDirs(*loc.command);
  for (const std::string& f : loc.files) dirs.push_back(DirName(f));
  closure.files = ScanIncludes(loc.files, dirs, loc.root);
  return closure;
}

}  // namespace kerncap::repro
