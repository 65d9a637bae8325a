#include "reproducer/nvrtc/nvrtc_options.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/exit_codes.h"

namespace kerncap::repro::nvrtc {
namespace {

enum class Fate { kTranslate, kDrop, kRefuse };

// How a translated flag's value is written for NVRTC.
enum class Form {
  kBare,      // the NVRTC option alone (no value)
  kJoined,    // option + value ("-D" "X=1" -> "-DX=1")
  kEquals,    // option=value
  kPtxas,     // -Xptxas: nvcc splits the value at commas, one ptxas option each
  kIsystem,   // collected, appended as -I after everything (see Invocation::options)
  kRdc,       // -rdc=true refused, -rdc=false says nothing
  kLanguage,  // -x cu says nothing (CUDA is all NVRTC compiles), any other is refused
};

struct Flag {
  const char* short_name;  // "-D" (nullptr: none)
  const char* long_name;   // "--define-macro" (nullptr: none)
  bool takes_value;
  bool joined;  // the value may follow the short name directly (-DX, -Idir, -O3)
  Fate fate;
  Form form;
  const char* nvrtc;  // kTranslate: the NVRTC option
  const char* why;    // kDrop / kRefuse: the reason, for the user
};

// Host-only flags are dropped: NVRTC compiles no host code, and the host
// compiler never sees the device code nvcc hands to cicc/ptxas.
constexpr char kHost[] = "host compilation only";
constexpr char kNoFatbin[] = "the fatbinary only (a CUBIN is written)";

const Flag kFlags[] = {
    // The preprocessor.
    {"-D", "--define-macro", true, true, Fate::kTranslate, Form::kJoined, "-D", nullptr},
    {"-U", "--undefine-macro", true, true, Fate::kTranslate, Form::kJoined, "-U", nullptr},
    {"-I", "--include-path", true, true, Fate::kTranslate, Form::kJoined, "-I", nullptr},
    {"-isystem", "--system-include", true, false, Fate::kTranslate, Form::kIsystem, "-I", nullptr},
    {"-include", "--pre-include", true, false, Fate::kTranslate, Form::kEquals, "--pre-include",
     nullptr},
    {"-std", "--std", true, false, Fate::kTranslate, Form::kEquals, "--std", nullptr},
    // Device code generation: the same options in NVRTC.
    {"-G", "--device-debug", false, false, Fate::kTranslate, Form::kBare, "--device-debug",
     nullptr},
    {"-lineinfo", "--generate-line-info", false, false, Fate::kTranslate, Form::kBare,
     "--generate-line-info", nullptr},
    {"-maxrregcount", "--maxrregcount", true, false, Fate::kTranslate, Form::kEquals,
     "--maxrregcount", nullptr},
    {"-use_fast_math", "--use_fast_math", false, false, Fate::kTranslate, Form::kBare,
     "--use_fast_math", nullptr},
    {"-ftz", "--ftz", true, false, Fate::kTranslate, Form::kEquals, "--ftz", nullptr},
    {"-prec-div", "--prec-div", true, false, Fate::kTranslate, Form::kEquals, "--prec-div",
     nullptr},
    {"-prec-sqrt", "--prec-sqrt", true, false, Fate::kTranslate, Form::kEquals, "--prec-sqrt",
     nullptr},
    {"-fmad", "--fmad", true, false, Fate::kTranslate, Form::kEquals, "--fmad", nullptr},
    {"-Xptxas", "--ptxas-options", true, false, Fate::kTranslate, Form::kPtxas, "--ptxas-options",
     nullptr},
    {"-extra-device-vectorization", "--extra-device-vectorization", false, false, Fate::kTranslate,
     Form::kBare, "--extra-device-vectorization", nullptr},
    {"-restrict", "--restrict", false, false, Fate::kTranslate, Form::kBare, "--restrict", nullptr},
    {"-dopt", "--dopt", true, false, Fate::kTranslate, Form::kEquals, "--dopt", nullptr},
    // Diagnostics only.
    {"-w", "--disable-warnings", false, false, Fate::kTranslate, Form::kBare, "--disable-warnings",
     nullptr},
    {"-diag-suppress", "--diag-suppress", true, false, Fate::kTranslate, Form::kEquals,
     "--diag-suppress", nullptr},
    // NVRTC has neither option. Relaxed constexpr: the constexpr functions a
    // minimal unit's kernel calls are unannotated, which NVRTC compiles as
    // __device__ under -default-device (always given, nvrtc_main.cc says why).
    // Extended lambdas: a __device__ lambda matters only in host code, which
    // NVRTC rejects anyway (the generator then keeps nvcc).
    {"-expt-relaxed-constexpr", "--expt-relaxed-constexpr", false, false, Fate::kDrop, Form::kBare,
     nullptr,
     "no NVRTC option; -default-device compiles unannotated constexpr "
     "functions for the device"},
    {"-expt-extended-lambda", "--expt-extended-lambda", false, false, Fate::kDrop, Form::kBare,
     nullptr, "no NVRTC option; only host code holds such lambdas, which NVRTC rejects"},
    {"-extended-lambda", "--extended-lambda", false, false, Fate::kDrop, Form::kBare, nullptr,
     "no NVRTC option; only host code holds such lambdas, which NVRTC rejects"},
    // Host compilation and nvcc's driver.
    {"-O", "--optimize", true, true, Fate::kDrop, Form::kBare, nullptr, kHost},
    {"-g", "--debug", false, false, Fate::kDrop, Form::kBare, nullptr, kHost},
    {"-Xcompiler", "--compiler-options", true, false, Fate::kDrop, Form::kBare, nullptr, kHost},
    {"-ccbin", "--compiler-bindir", true, false, Fate::kDrop, Form::kBare, nullptr, kHost},
    {"-fPIC", nullptr, false, false, Fate::kDrop, Form::kBare, nullptr, kHost},
    {"-forward-unknown-to-host-compiler", "--forward-unknown-to-host-compiler", false, false,
     Fate::kDrop, Form::kBare, nullptr, kHost},
    {"-m64", nullptr, false, false, Fate::kDrop, Form::kBare, nullptr,
     "device code is 64-bit only"},
    {"-t", "--threads", true, false, Fate::kDrop, Form::kBare, nullptr,
     "nvcc's parallel compilation of several architectures"},
    {"-compress-mode", "--compress-mode", true, false, Fate::kDrop, Form::kBare, nullptr,
     kNoFatbin},
    {"-Wno-deprecated-gpu-targets", nullptr, false, false, Fate::kDrop, Form::kBare, nullptr,
     "nvcc's warning about architectures"},
    {"-x", "--x", true, false, Fate::kTranslate, Form::kLanguage, nullptr, nullptr},
    // Relocatable device code needs a device link (nvcc -dlink; nvJitLink
    // with NVRTC): not done here, the reproducer's nvcc recipe does it.
    {"-rdc", "--relocatable-device-code", true, false, Fate::kTranslate, Form::kRdc, nullptr,
     nullptr},
    {"-dc", "--device-c", false, false, Fate::kRefuse, Form::kBare, nullptr,
     "relocatable device code needs a device link, which kerncap-nvrtc does not do (nvcc does)"},
    {"-dlink", "--device-link", false, false, Fate::kRefuse, Form::kBare, nullptr,
     "a device link, which kerncap-nvrtc does not do (nvcc does)"},
};

struct Match {
  const Flag* flag = nullptr;
  std::string value;
  bool missing_value = false;
};

// The table entry `args[*i]` is, consuming its value (the next word when it
// is separate).
Match Find(const std::vector<std::string>& args, size_t* i) {
  const std::string& a = args[*i];
  Match m;
  for (const Flag& f : kFlags) {
    for (const char* name : {f.short_name, f.long_name}) {
      if (name == nullptr) continue;
      const absl::string_view n = name;
      if (a == n) {
        m.flag = &f;
        if (f.takes_value) {
          if (*i + 1 >= args.size()) {
            m.missing_value = true;
          } else {
            m.value = args[++*i];
          }
        }
        return m;
      }
      if (f.takes_value && absl::StartsWith(a, n) && a.size() > n.size() && a[n.size()] == '=') {
        m.flag = &f;
        m.value = a.substr(n.size() + 1);
        return m;
      }
      if (f.joined && name == f.short_name && absl::StartsWith(a, n) && a.size() > n.size()) {
        m.flag = &f;
        m.value = a.substr(n.size());
        return m;
      }
    }
  }
  return m;
}

bool StartsWithDash(const std::string& s) { return !s.empty() && s[0] == '-'; }

ParseResult Fail(int code, std::string msg) {
  ParseResult r;
  r.exit_code = code;
  r.error = std::move(msg);
  return r;
}

}  // namespace

ParseResult ParseCommandLine(const std::vector<std::string>& args) {
  ParseResult r;
  Invocation& inv = r.invocation;
  std::vector<std::string> system_dirs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    // kerncap-nvrtc's own options.
    if (a == "-h" || a == "--help") {
      inv.help = true;
      return r;
    }
    if (absl::StartsWith(a, "--nvcc=")) {
      inv.nvcc = a.substr(7);
      continue;
    }
    if (absl::StartsWith(a, "--nvrtc=")) {
      inv.nvrtc = a.substr(8);
      continue;
    }
    if (a == "-o" || a == "--output-file") {
      if (i + 1 >= args.size()) return Fail(exit_code::kUsage, a + " needs a file");
      inv.output = args[++i];
      continue;
    }
    if (absl::StartsWith(a, "--output-file=")) {
      inv.output = a.substr(14);
      continue;
    }
    // The architecture: one real one, since the output is a CUBIN.
    std::string arch;
    bool is_arch = false;
    for (const char* n : {"-arch", "--gpu-architecture"}) {
      const std::string name = n;
      if (a == name) {
        if (i + 1 >= args.size()) return Fail(exit_code::kUsage, a + " needs an architecture");
        arch = args[++i];
        is_arch = true;
      } else if (absl::StartsWith(a, name + "=")) {
        arch = a.substr(name.size() + 1);
        is_arch = true;
      }
    }
    if (is_arch) {
      if (!absl::StartsWith(arch, "sm_") || arch.size() < 5) {
        return Fail(exit_code::kRefused, absl::StrCat("refused flag ", a,
                                                      ": kerncap-nvrtc writes a CUBIN for one real "
                                                      "architecture (-arch=sm_NN), not ",
                                                      arch));
      }
      inv.arch = arch;
      continue;
    }
    if (!StartsWithDash(a)) {
      if (!inv.source.empty()) {
        return Fail(exit_code::kUsage,
                    absl::StrCat("one source file only (", inv.source, " and ", a, ")"));
      }
      inv.source = a;
      continue;
    }
    const size_t at = i;
    Match m = Find(args, &i);
    if (m.flag == nullptr) {
      return Fail(exit_code::kRefused,
                  absl::StrCat("refused flag ", a,
                               ": not known to kerncap-nvrtc, which translates only the nvcc "
                               "flags it knows to build the same device code (nvcc does)"));
    }
    if (m.missing_value) return Fail(exit_code::kUsage, a + " needs a value");
    const Flag& f = *m.flag;
    const std::string written =
        i == at ? a : absl::StrCat(a, " ", m.value);  // the flag as given, for messages
    if (f.fate == Fate::kRefuse) {
      return Fail(exit_code::kRefused, absl::StrCat("refused flag ", written, ": ", f.why));
    }
    if (f.fate == Fate::kDrop) {
      inv.dropped.push_back(absl::StrCat(written, ": ", f.why));
      continue;
    }
    switch (f.form) {
      case Form::kBare:
        inv.options.push_back(f.nvrtc);
        break;
      case Form::kJoined:
        inv.options.push_back(absl::StrCat(f.nvrtc, m.value));
        break;
      case Form::kEquals:
        inv.options.push_back(absl::StrCat(f.nvrtc, "=", m.value));
        break;
      case Form::kPtxas:
        // NVRTC hands each --ptxas-options value to ptxas as one word
        // ("-v,-O3" is an unknown ptxas option there).
        for (absl::string_view o : absl::StrSplit(m.value, ',', absl::SkipEmpty())) {
          inv.options.push_back(absl::StrCat(f.nvrtc, "=", o));
        }
        break;
      case Form::kIsystem:
        system_dirs.push_back(m.value);
        break;
      case Form::kRdc:
        if (m.value == "true") {
          return Fail(exit_code::kRefused,
                      absl::StrCat("refused flag ", written,
                                   ": relocatable device code needs a device link, which "
                                   "kerncap-nvrtc does not do (nvcc does)"));
        }
        if (m.value != "false") return Fail(exit_code::kUsage, written + ": true or false");
        break;
      case Form::kLanguage:
        if (m.value != "cu") {
          return Fail(exit_code::kRefused, absl::StrCat("refused flag ", written,
                                                        ": kerncap-nvrtc compiles CUDA (-x cu)"));
        }
        break;
    }
  }
  for (const std::string& d : system_dirs) inv.options.push_back("-I" + d);
  if (inv.arch.empty()) return Fail(exit_code::kUsage, "no -arch=sm_NN");
  if (inv.output.empty()) return Fail(exit_code::kUsage, "no -o OUTPUT");
  if (inv.source.empty()) return Fail(exit_code::kUsage, "no source file");
  return r;
}

}  // namespace kerncap::repro::nvrtc
