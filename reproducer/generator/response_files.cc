#include "reproducer/generator/response_files.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "reproducer/generator/path_util.h"

#ifdef KERNCAP_GENERATOR_HAVE_LLVM
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/StringSaver.h"
#endif

namespace kerncap::repro {
namespace {

bool IsNvcc(const CompileCommand& c) {
  if (c.argv.empty()) return false;
  const std::string tool = std::filesystem::path(c.argv[0]).filename().string();
  return tool == "nvcc" || absl::StartsWith(tool, "nvcc.");
}

// The file list of an nvcc options-file word and how many argv words it
// took (1 joined, 2 separate); 0 when `a` is not one.
int NvccOptionsFileWord(const std::vector<std::string>& argv, size_t i, std::string* list) {
  const std::string& a = argv[i];
  for (const char* name : {"--options-file", "-optf"}) {
    const std::string n = name;
    if (a == n) {
      if (i + 1 >= argv.size()) return 0;
      *list = argv[i + 1];
      return 2;
    }
    if (absl::StartsWith(a, n + "=")) {
      *list = a.substr(n.size() + 1);
      return 1;
    }
  }
  return 0;
}

class Expander {
 public:
  Expander(const CompileCommand& c, const std::function<std::string(const std::string&)>& localize)
      : command_(c), nvcc_(IsNvcc(c)), localize_(localize) {}

  ExpandedCommand Run() {
    ExpandedCommand out;
    out.command = command_;
    out.command.argv.clear();
    if (command_.argv.empty()) return out;
    out.command.argv.push_back(command_.argv[0]);
    std::vector<std::string> rest(command_.argv.begin() + 1, command_.argv.end());
    std::vector<std::string> chain;
    Expand(rest, 0, &chain, &out);
    return out;
  }

 private:
  // Appends `words` to out->command.argv with every option file replaced by
  // its words. `chain`: the files being expanded (cycle detection).
  void Expand(const std::vector<std::string>& words, int depth, std::vector<std::string>* chain,
              ExpandedCommand* out) {
    for (size_t i = 0; i < words.size(); ++i) {
      const std::string& a = words[i];
      std::vector<std::string> names;
      std::string flag;
      int taken = 0;
      if (nvcc_) {
        std::string list;
        taken = NvccOptionsFileWord(words, i, &list);
        if (taken > 0) {
          flag = taken == 2 ? a + " " + list : a;
          for (absl::string_view n : absl::StrSplit(list, ',', absl::SkipEmpty())) {
            names.emplace_back(n);
          }
        }
      } else if (a.size() > 1 && a[0] == '@') {
        taken = 1;
        flag = a;
        names.push_back(a.substr(1));
      }
      if (taken == 0) {
        out->command.argv.push_back(a);
        continue;
      }
      // A list of files is replaced as a whole when every one is read; else
      // the word stays (and the failure is reported) so nothing is half done.
      std::vector<std::pair<std::string, std::string>> texts;  // path, text
      bool all_read = true;
      for (const std::string& name : names) {
        OptionFileUse use;
        use.flag = flag;
        use.depth = depth;
        std::string path = Normalize(name, command_.directory);
        if (localize_) path = localize_(path);
        use.path = path;
        if (std::find(chain->begin(), chain->end(), path) != chain->end()) {
          use.error = "the options file includes itself";
        } else if (depth >= kMaxOptionFileDepth) {
          use.error = absl::StrCat("options files nest deeper than ", kMaxOptionFileDepth);
        } else {
          auto text = ReadFile(path);
          if (!text.ok()) {
            use.error = absl::StrCat("cannot be read: ", text.status().message());
          } else {
            texts.emplace_back(path, std::move(*text));
          }
        }
        if (!use.error.empty()) all_read = false;
        out->files.push_back(std::move(use));
      }
      if (!all_read) {
        for (int k = 0; k < taken; ++k) out->command.argv.push_back(words[i + k]);
        i += taken - 1;
        continue;
      }
      i += taken - 1;
      for (auto& [path, text] : texts) {
        chain->push_back(path);
        Expand(nvcc_ ? SplitNvccOptionsFile(text) : SplitGnuResponseFile(text), depth + 1, chain,
               out);
        chain->pop_back();
      }
    }
  }

  const CompileCommand& command_;
  const bool nvcc_;
  const std::function<std::string(const std::string&)>& localize_;
};

}  // namespace

std::vector<std::string> SplitNvccOptionsFile(std::string_view text) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false, quoted = false;
  for (char c : text) {
    if (c == '"') {
      quoted = !quoted;
      in_word = true;
      continue;
    }
    if (!quoted && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
      if (in_word) words.push_back(std::move(cur));
      cur.clear();
      in_word = false;
      continue;
    }
    cur.push_back(c);
    in_word = true;
  }
  if (in_word) words.push_back(std::move(cur));
  return words;
}

std::vector<std::string> SplitGnuResponseFile(std::string_view text) {
#ifdef KERNCAP_GENERATOR_HAVE_LLVM
  llvm::BumpPtrAllocator alloc;
  llvm::StringSaver saver(alloc);
  llvm::SmallVector<const char*, 64> argv;
  llvm::cl::TokenizeGNUCommandLine(llvm::StringRef(text.data(), text.size()), saver, argv);
  std::vector<std::string> words;
  for (const char* w : argv) {
    if (w != nullptr) words.emplace_back(w);
  }
  return words;
#else
  auto words = SplitCommandLine(text);
  return words.ok() ? *words : std::vector<std::string>{};
#endif
}

ExpandedCommand ExpandOptionFiles(const CompileCommand& command,
                                  const std::function<std::string(const std::string&)>& localize) {
  return Expander(command, localize).Run();
}

}  // namespace kerncap::repro
