// kerncap-asm: the text tool behind a HIP reproducer's `make asm` and
// `make asm-build` (formats and rules: amdgpu_asm.h).
//
//   kerncap-asm extract --kernel=NAME [--module=build/module.s] [--out=FILE]
//       the kernel's parts of the module, between markers -> FILE (stdout
//       without --out)
//   kerncap-asm splice --kernel=NAME [--module=build/module.s]
//       [--edited=asm/kernel.s] [--out=build/module.edited.s]
//       [--keep-register-counts]
//       the module with the kernel's parts replaced by the edited blocks
//   kerncap-asm flags [--module=build/module.s] [--arch=gfx90a]
//       the clang options that assemble the module for its target
//
// Exit status: 0 done, 1 error (one line on stderr), 2 usage.
#include <cstdio>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "reproducer/generator/amdgpu_asm.h"

namespace {

constexpr const char* kUsage =
    "usage: kerncap-asm extract --kernel=NAME [--module=build/module.s] [--out=FILE]\n"
    "       kerncap-asm splice --kernel=NAME [--module=build/module.s] [--edited=asm/kernel.s]\n"
    "                          [--out=build/module.edited.s] [--keep-register-counts]\n"
    "       kerncap-asm flags [--module=build/module.s] [--arch=GFX]\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "kerncap-asm: %s\n", msg.c_str());
  return 1;
}

int Usage(const std::string& msg) {
  std::fprintf(stderr, "kerncap-asm: %s\n%s", msg.c_str(), kUsage);
  return 2;
}

absl::StatusOr<std::string> ReadInput(const std::string& path, const std::string& hint) {
  absl::StatusOr<std::string> text = kerncap::ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("cannot read ", path, hint.empty() ? "" : " (", hint,
                                     hint.empty() ? "" : ")", ": ", text.status().message()));
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage("no command");
  const std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::map<std::string, std::string> opt = {{"module", "build/module.s"},
                                            {"edited", "asm/kernel.s"},
                                            {"out", ""},
                                            {"kernel", ""},
                                            {"arch", ""}};
  bool keep = false;
  for (int i = 2; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--keep-register-counts") {
      keep = true;
      continue;
    }
    if (!absl::ConsumePrefix(&a, "--")) return Usage(absl::StrCat("unexpected argument ", a));
    size_t eq = a.find('=');
    std::string key(a.substr(0, eq));
    if (eq == absl::string_view::npos || !opt.count(key)) {
      return Usage(absl::StrCat("unknown option --", a));
    }
    opt[key] = std::string(a.substr(eq + 1));
  }
  std::string kernel = opt["kernel"];
  if (absl::EndsWith(kernel, ".kd")) kernel.resize(kernel.size() - 3);

  if (cmd == "flags") {
    absl::StatusOr<std::string> module = ReadInput(opt["module"], "");
    if (!module.ok()) return Fail(std::string(module.status().message()));
    auto flags = kerncap::repro::AssemblerFlags(*module, opt["arch"]);
    if (!flags.ok()) return Fail(std::string(flags.status().message()));
    std::printf("%s\n", absl::StrJoin(*flags, " ").c_str());
    return 0;
  }
  if (cmd != "extract" && cmd != "splice") return Usage(absl::StrCat("unknown command ", cmd));
  if (kernel.empty()) return Usage("--kernel=NAME is required");
  absl::StatusOr<std::string> module = ReadInput(opt["module"], "run make asm first");
  if (!module.ok()) return Fail(std::string(module.status().message()));

  if (cmd == "extract") {
    auto text = kerncap::repro::ExtractKernel(*module, kernel, opt["module"]);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    if (opt["out"].empty()) {
      std::fputs(text->c_str(), stdout);
      return 0;
    }
    absl::Status st = kerncap::WriteFileAtomic(opt["out"], *text);
    if (!st.ok()) return Fail(std::string(st.message()));
    return 0;
  }

  absl::StatusOr<std::string> edited = ReadInput(opt["edited"], "run make asm first");
  if (!edited.ok()) return Fail(std::string(edited.status().message()));
  kerncap::repro::SpliceOptions so;
  so.module_name = opt["module"];
  so.edited_name = opt["edited"];
  so.keep_register_counts = keep;
  auto r = kerncap::repro::SpliceKernel(*module, *edited, kernel, so);
  if (!r.ok()) return Fail(std::string(r.status().message()));
  for (const std::string& w : r->warnings) std::fprintf(stderr, "kerncap-asm: warning: %s\n", w.c_str());
  for (const std::string& n : r->notes) std::fprintf(stderr, "kerncap-asm: %s\n", n.c_str());
  const std::string out = opt["out"].empty() ? "build/module.edited.s" : opt["out"];
  absl::Status st = kerncap::WriteFileAtomic(out, r->text);
  if (!st.ok()) return Fail(std::string(st.message()));
  return 0;
}
