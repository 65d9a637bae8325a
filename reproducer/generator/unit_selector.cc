#include "reproducer/generator/unit_selector.h"

#include <cstdlib>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

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

// Runs fn(0..n-1) on up to `jobs` threads (each call runs a compiler).
void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& fn) {
  if (jobs <= 0) {
    jobs = static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  }
  const size_t workers = std::min<size_t>(n, static_cast<size_t>(jobs));
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) fn(i);
    });
  }
  for (std::thread& t : threads) t.join();
}

// Whether PTX text declares `symbol` as a kernel entry
// ("[.visible|.weak] .entry SYMBOL(").
bool PtxHasEntry(const std::string& ptx, const std::string& symbol) {
  const std::string needle = ".entry " + symbol;
  for (size_t at = ptx.find(needle); at != std::string::npos; at = ptx.find(needle, at + 1)) {
    const size_t end = at + needle.size();
    if (end < ptx.size() && (ptx[end] == '(' || ptx[end] == ' ' || ptx[end] == '\n')) return true;
  }
  return false;
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
      // Up to max_preprocess of them (database order), `jobs` at a time.
      const size_t run = std::min(picks.size(), q.max_preprocess);
      std::vector<char> has_def(run, 0);
      std::vector<size_t> coverage(run, 0);
      ParallelFor(run, q.jobs, [&](size_t k) {
        const int i = picks[k];
        auto deps = PreprocessorDependencies(db[i], db[i].file, q.lang, q.compiler, q.arch);
        if (!deps.ok()) return;
        std::vector<std::string> closure = *deps;
        closure.push_back(db[i].file);
        has_def[k] = q.defining_file.empty() ? Coverage(closure, q.line_files) > 0
                                             : Coverage(closure, {q.defining_file}) > 0;
        coverage[k] = Coverage(closure, q.line_files);
      });
      std::vector<std::pair<int, size_t>> confirmed;
      for (size_t k = 0; k < run; ++k) {
        if (has_def[k]) confirmed.emplace_back(picks[k], coverage[k]);
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
    ScratchDir tmp("kerncap-unit-");
    // Only the first max_compile candidates (database order) are compiled.
    std::vector<int> compiled = picks;
    if (compiled.size() > q.max_compile) {
      compiled.resize(q.max_compile);
      notes.push_back(absl::StrCat(picks.size() - compiled.size(),
                                   " later candidate(s) not compiled (at most ", q.max_compile,
                                   ")"));
    }
    // One device-only compile of compiled[k] in `mode`: the output's bytes,
    // empty when it failed.
    auto compile = [&](size_t k, const std::vector<std::string>& mode, const char* ext) {
      const int i = compiled[k];
      CoreFlags core = ExtractCoreFlags(db[i], db[i].file, q.lang);
      std::vector<std::string> argv = {q.compiler};
      argv.insert(argv.end(), mode.begin(), mode.end());
      argv.insert(argv.end(), core.flags.begin(), core.flags.end());
      const std::string out = absl::StrCat(tmp.path(), "/", k, ext);
      argv.insert(argv.end(), {"-o", out, db[i].file});
      auto r = RunTool(argv, db[i].directory, q.compile_timeout_s);
      if (!r.ok() || r->exit_code != 0) return std::string();
      auto bytes = ReadFile(out);
      return bytes.ok() ? *bytes : std::string();
    };
    // The candidates the compiles narrowed the choice to; empty: no
    // narrowing (every candidate stays, the method stays the step before's).
    std::vector<int> narrowed;
    bool decided = tmp.path().empty();
    // 4a. CUDA: the PTX screen. cicc at -O0: which kernels a unit emits is
    // decided by the front end's instantiations, not by optimization (half
    // the time again for heavy templates). A candidate whose PTX compile
    // fails is not ruled out: the full compile decides it.
    if (!decided && q.lang == Language::kCuda) {
      enum Screen : char { kLacks, kDefines, kUnknown };
      std::vector<char> screen(compiled.size(), kUnknown);
      ParallelFor(compiled.size(), q.jobs, [&](size_t k) {
        const std::string ptx = compile(k, {"-ptx", "-arch=" + q.arch, "-Xcicc", "-O0"}, ".ptx");
        if (!ptx.empty()) screen[k] = PtxHasEntry(ptx, q.kernel_symbol) ? kDefines : kLacks;
      });
      std::vector<int> kept;
      size_t defines = 0;
      for (size_t k = 0; k < compiled.size(); ++k) {
        if (screen[k] != kLacks) kept.push_back(compiled[k]);
        defines += screen[k] == kDefines;
      }
      if (kept.empty()) {
        // Every PTX compiled and none has the entry: no cubin can have it.
        notes.push_back(absl::StrCat("the PTX of none of ", compiled.size(),
                                     " candidate(s) defines ", q.kernel_symbol));
        decided = true;
      } else if (defines == 0 && kept.size() == compiled.size()) {
        notes.push_back("no candidate could be compiled to PTX; full device compiles decide");
      } else {
        notes.push_back(absl::StrCat("the PTX of ", defines, " of ", compiled.size(),
                                     " candidate(s) defines ", q.kernel_symbol,
                                     kept.size() > defines
                                         ? absl::StrCat(" (", kept.size() - defines,
                                                        " could not be compiled to PTX)")
                                         : ""));
        decided = kept.size() == 1 && defines == 1;
        if (decided) narrowed = kept;
        compiled = std::move(kept);
      }
    }
    // 4b. Full device compiles: the captured code itself decides.
    if (!decided) {
      auto captured = KernelCodeBytes(q.code_object, q.kernel_symbol);
      std::vector<char> defines(compiled.size(), 0), same(compiled.size(), 0);
      ParallelFor(compiled.size(), q.jobs, [&](size_t k) {
        const std::string bytes = compile(k, DeviceCompileMode(q.lang, q.arch), ".o");
        if (bytes.empty()) return;
        auto code = KernelCodeBytes(bytes, q.kernel_symbol);
        if (!code.ok()) return;
        defines[k] = 1;
        same[k] = captured.ok() && *code == *captured;
      });
      int exact = -1;
      for (size_t k = 0; k < compiled.size(); ++k) {
        if (defines[k]) narrowed.push_back(compiled[k]);
        if (same[k] && exact < 0) exact = compiled[k];
      }
      if (exact >= 0) {
        notes.push_back(absl::StrCat("a device compile of ", db[exact].file,
                                     " gives the captured code of ", q.kernel_symbol));
        narrowed = {exact};
      } else if (!narrowed.empty()) {
        notes.push_back(absl::StrCat(narrowed.size(), " of ", compiled.size(),
                                     " compiled candidates define ", q.kernel_symbol,
                                     ", none with exactly the captured code"));
      } else {
        notes.push_back(absl::StrCat("no device compile of ", compiled.size(),
                                     " candidate(s) defined ", q.kernel_symbol));
      }
    }
    if (!narrowed.empty()) {
      picks = std::move(narrowed);
      choice.method = "device_compile";
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
