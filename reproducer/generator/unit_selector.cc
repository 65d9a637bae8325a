#include "reproducer/generator/unit_selector.h"

#include <cstdlib>

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "reproducer/generator/include_closure.h"
#include "reproducer/generator/path_util.h"
#include "reproducer/generator/tool_runner.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> FilesOf(const std::vector<CompileCommand>& db,
                                 const std::vector<int>& picks) {
  std::vector<std::string> out;
  for (int i : picks) out.push_back(db[i].file);
  return out;
}

// How many of `files` `closure` holds.
size_t Coverage(const std::vector<std::string>& closure, const std::vector<std::string>& files) {
  std::set<std::string> c(closure.begin(), closure.end());
  size_t n = 0;
  for (const std::string& f : files) n += c.count(f);
  return n;
}

// Keeps the candidates of highest score.
std::vector<int> Best(const std::vector<std::pair<int, size_t>>& scored) {
  size_t best = 0;
  for (const auto& [i, s] : scored) best = std::max(best, s);
  std::vector<int> out;
  for (const auto& [i, s] : scored) {
    if (s == best) out.push_back(i);
  }
  return out;
}

}  // namespace

UnitChoice ChooseUnit(const std::vector<CompileCommand>& db, const UnitQuery& q) {
  UnitChoice choice;
  std::vector<int> picks;
  // 1. The entries of the defining file itself.
  for (int i = 0; i < static_cast<int>(db.size()); ++i) {
    const bool match = q.defining_file.empty()
                           ? std::find(q.line_files.begin(), q.line_files.end(), db[i].file) !=
                                 q.line_files.end()
                           : db[i].file == q.defining_file;
    if (match) picks.push_back(i);
  }
  choice.method = "entry";
  std::vector<std::string> notes;
  if (picks.empty()) {
    // 2. Include closures (textual), the defining file (else any line-table
    // file) in them, best coverage of the line table kept.
    IncludeScanner scanner;
    std::vector<std::pair<int, size_t>> scored;
    std::vector<std::string> wanted = q.line_files;
    if (!q.defining_file.empty() &&
        std::find(wanted.begin(), wanted.end(), q.defining_file) == wanted.end()) {
      wanted.push_back(q.defining_file);
    }
    for (int i = 0; i < static_cast<int>(db.size()); ++i) {
      std::vector<std::string> closure =
          scanner.Closure(db[i].file, IncludeDirsOf(db[i]), "", "", wanted);
      const bool has_def = q.defining_file.empty()
                               ? Coverage(closure, q.line_files) > 0
                               : Coverage(closure, {q.defining_file}) > 0;
      if (has_def) scored.emplace_back(i, Coverage(closure, q.line_files));
    }
    if (scored.empty()) {
      choice.note = absl::StrCat(
          "no entry of the database compiles ",
          q.defining_file.empty() ? "a file of the line table" : q.defining_file,
          " or a file whose #include closure holds it");
      return choice;
    }
    picks = Best(scored);
    choice.method = "include_scan";
    notes.push_back(absl::StrCat(scored.size(), " entr", scored.size() == 1 ? "y" : "ies",
                                 " include ",
                                 q.defining_file.empty() ? "the line table's files"
                                                         : q.defining_file,
                                 " (textual scan)"));
    // 3. The preprocessor, as the build configured it.
    if (picks.size() > 1 && !q.compiler.empty()) {
      std::vector<std::pair<int, size_t>> confirmed;
      size_t run = 0;
      for (int i : picks) {
        if (run++ >= q.max_preprocess) break;
        auto deps = PreprocessorDependencies(db[i], db[i].file, q.lang, q.compiler, q.arch);
        if (!deps.ok()) continue;
        std::vector<std::string> closure = *deps;
        closure.push_back(db[i].file);
        const bool has_def = q.defining_file.empty() ? Coverage(closure, q.line_files) > 0
                                                     : Coverage(closure, {q.defining_file}) > 0;
        if (has_def) confirmed.emplace_back(i, Coverage(closure, q.line_files));
      }
      if (!confirmed.empty()) {
        picks = Best(confirmed);
        choice.method = "preprocessor";
        notes.push_back(absl::StrCat(confirmed.size(), " confirmed by the preprocessor (-M)"));
      }
    }
  } else if (picks.size() > 1) {
    notes.push_back(absl::StrCat(picks.size(), " entries compile ", db[picks[0]].file));
  }
  // 4. Device compiles: which candidate produces the captured kernel.
  if (picks.size() > 1 && !q.compiler.empty() && !q.kernel_symbol.empty()) {
    auto captured = KernelCodeBytes(q.code_object, q.kernel_symbol);
    ScratchDir tmp("kerncap-unit-");
    std::vector<int> with_symbol;
    int exact = -1;
    size_t compiled = 0;
    for (int i : picks) {
      if (compiled >= q.max_compile || tmp.path().empty()) break;
      ++compiled;
      CoreFlags core = ExtractCoreFlags(db[i], db[i].file, q.lang);
      std::vector<std::string> argv = {q.compiler};
      for (const std::string& f : DeviceCompileMode(q.lang, q.arch)) argv.push_back(f);
      argv.insert(argv.end(), core.flags.begin(), core.flags.end());
      const std::string out = absl::StrCat(tmp.path(), "/", compiled, ".o");
      argv.insert(argv.end(), {"-o", out, db[i].file});
      auto r = RunTool(argv, db[i].directory, q.compile_timeout_s);
      if (!r.ok() || r->exit_code != 0) continue;
      auto bytes = ReadFile(out);
      if (!bytes.ok()) continue;
      auto code = KernelCodeBytes(*bytes, q.kernel_symbol);
      if (!code.ok()) continue;
      with_symbol.push_back(i);
      if (captured.ok() && *code == *captured) {
        exact = i;
        break;  // the captured code itself: decisive
      }
    }
    if (exact >= 0) {
      notes.push_back(absl::StrCat(
          "a device compile of ", db[exact].file, " gives the captured code of ", q.kernel_symbol,
          compiled < picks.size()
              ? absl::StrCat(" (", picks.size() - compiled, " later candidate(s) not compiled)")
              : ""));
      picks = {exact};
      choice.method = "device_compile";
    } else if (!with_symbol.empty()) {
      notes.push_back(absl::StrCat(with_symbol.size(), " of ", compiled,
                                   " compiled candidates define ", q.kernel_symbol,
                                   ", none with exactly the captured code"));
      picks = with_symbol;
      choice.method = "device_compile";
    } else {
      notes.push_back(absl::StrCat("no device compile of ", compiled, " candidate(s) defined ",
                                   q.kernel_symbol));
    }
  }
  choice.candidates = FilesOf(db, picks);
  choice.entry = picks.front();
  if (picks.size() > 1) {
    choice.ambiguous = true;
    notes.push_back(absl::StrCat("still ambiguous between ", picks.size(), " entries (",
                                 absl::StrJoin(choice.candidates, ", "),
                                 "): the first in database order is used"));
  }
  choice.note = absl::StrJoin(notes, "; ");
  return choice;
}

}  // namespace kerncap::repro
