#include "reproducer/generator/build_file.h"

#include <cctype>
#include <string_view>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/status_macros.h"
#include "reproducer/generator/text_template.h"

namespace kerncap::repro {
namespace embedded {
// Generated at build time (common/cmake/embed_files.cmake) from templates/.
extern const char kMakefileIn[];
extern const unsigned long long kMakefileInSize;
extern const char kCudaCompileMkIn[];
extern const unsigned long long kCudaCompileMkInSize;
}  // namespace embedded

namespace {

std::string Words(const std::vector<std::string>& words) {
  std::vector<std::string> q;
  for (const std::string& w : words) q.push_back(MakeWord(w));
  return absl::StrJoin(q, " ");
}

// Text for a recipe's single-quoted echo: no quote that could end it, no
// expansion, one line.
std::string EchoText(const std::string& why) {
  return absl::StrReplaceAll(why, {{"'", ""}, {"$", "$$"}, {"\n", " "}});
}

std::string_view Embedded(const char* bytes, unsigned long long size) {
  return std::string_view(bytes, static_cast<size_t>(size));
}

// Text from the capture for a Makefile comment: nothing that could end the
// comment or continue it (newlines, backslashes) or expand ('$').
std::string CommentText(const std::string& text) {
  std::string out;
  for (char c : text) {
    out.push_back(std::isalnum(static_cast<unsigned char>(c)) ||
                          std::string_view(" .,_-/:()").find(c) != std::string_view::npos
                      ? c
                      : '?');
  }
  return out;
}

// A tool's message for a recipe's single-quoted echo: nothing that could end
// the quote or the line, expand, or start a comment; 300 characters at most.
std::string ReasonText(const std::string& reason, const char* if_empty) {
  std::string why = reason.empty() ? if_empty : reason;
  if (why.size() > 300) why = why.substr(0, 300) + "...";
  return absl::StrReplaceAll(
      why, {{"'", ""}, {"\\", "/"}, {"$", "$$"}, {"\n", " "}, {"\r", " "}, {"#", "\\#"}});
}

}  // namespace

std::string MakeWord(const std::string& word) {
  std::string q = ShellQuote(word);
  std::string out;
  for (size_t i = 0; i < q.size(); ++i) {
    char c = q[i];
    if (c == '$') {
      size_t close = q.find(')', i);
      bool var = i + 1 < q.size() && q[i + 1] == '(' && close != std::string::npos;
      for (size_t k = i + 2; var && k < close; ++k) {
        var = std::isupper(static_cast<unsigned char>(q[k])) || std::isdigit(q[k]) || q[k] == '_';
      }
      out += var ? "$" : "$$";
    } else if (c == '#') {
      out += "\\#";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

absl::StatusOr<std::string> BuildMakefile(const MakefileSpec& s) {
  const std::string_view makefile_in = Embedded(embedded::kMakefileIn, embedded::kMakefileInSize);
  const std::string_view cuda_compile_in =
      Embedded(embedded::kCudaCompileMkIn, embedded::kCudaCompileMkInSize);
  if (makefile_in.empty() || cuda_compile_in.empty()) {
    return absl::InternalError(
        "the Makefile templates (reproducer/generator/templates) were not embedded in this "
        "build: rebuild kerncap");
  }
  // The architecture comes from the capture (an agent, a .kcap file) and
  // stands bare in the Makefile and in its recipes' command lines: only a
  // name is written (sm_90a, gfx90a), anything else is refused.
  if (s.arch.empty() ||
      s.arch.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789_") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the capture's GPU architecture \"", absl::CEscape(s.arch),
        "\" is not an architecture name (letters, digits, '_'): no Makefile is written for it"));
  }
  const bool cuda = s.lang == Language::kCuda;
  const bool minimal = cuda && s.has_source && !s.minimal_unit.empty();
  const bool toolkit_check = cuda && !s.app_cuda_version.empty() &&
                             s.app_cuda_version.find_first_not_of("0123456789.") == std::string::npos;
  TemplateValues v;
  v.flags = {{"CUDA", cuda},
             {"HAS_SOURCE", s.has_source},
             {"MINIMAL", minimal},
             {"NVRTC", minimal && !s.nvrtc.empty() && !s.relocatable_device_code},
             {"TOOLKIT_CHECK", toolkit_check},
             {"RDC", s.relocatable_device_code},
             {"EXTERNAL", !s.external.empty()},
             {"VFS", s.vfs_overlay}};
  std::vector<std::string> external;
  for (const auto& [var, path] : s.external) {
    external.push_back(absl::StrCat(var, " ?= ", MakeWord(path)));
  }
  std::string headers;
  for (const std::string& h : s.headers) absl::StrAppend(&headers, " \\\n  ", MakeWord(h));
  // The title (kernel name, capture id: from the capture) is one comment
  // line: a newline in it would start Makefile text of the capture's making.
  v.text = {{"TITLE", absl::StrReplaceAll(s.title, {{"\n", " "}, {"\r", " "}})},
            {"CLANG_DEFAULT", s.clang_default},
            {"LLVM_OBJDUMP_DEFAULT", s.llvm_objdump_default},
            {"EXTERNAL_VARS", absl::StrJoin(external, "\n")},
            {"CAPTURED_CODE", s.captured_code},
            {"APP_CUDA_VERSION_LINE", CommentText(s.app_cuda_version_line)},
            {"APP_CUDA_VERSION", s.app_cuda_version},
            {"ARCH", s.arch},
            {"BUILT_CODE", cuda ? "$(BUILD)/kernel.cubin" : "$(BUILD)/kernel.hsaco"},
            {"SRC", MakeWord(s.source)},
            {"HEADERS", headers},
            {"FLAGS", Words(s.flags)},
            {"MINIMAL_SRC", MakeWord(s.minimal_unit)},
            {"MINIMAL_UNIT", s.minimal_unit},
            {"KERNEL", MakeWord(s.kernel_symbol)},
            {"NO_SOURCE_REASON", EchoText(s.no_source_reason)},
            {"NO_MINIMAL_REASON", ReasonText(s.minimal_unit_reason, "not generated")},
            {"NVRTC_DEFAULT", MakeWord(s.nvrtc)},
            {"NO_NVRTC_REASON", ReasonText(s.no_nvrtc_reason, "not checked")},
            {"COMPUTE_ARCH", absl::StrReplaceAll(s.arch, {{"sm_", "compute_"}})},
            {"CAPTURED_PTX", s.captured_ptx}};
  // nvcc's compile of one source into one output (cuda_compile.mk.in).
  struct Compile {
    const char* value;  // the Makefile.in value it fills
    const char* src;
    const char* out;
  };
  for (const Compile& k : {Compile{"CUDA_COMPILE_MINIMAL", "$(MINIMAL_SRC)", "$@"},
                           Compile{"CUDA_COMPILE_UNIT", "$(SRC)", "$@"},
                           Compile{"CUDA_COMPILE_FULL", "$(SRC)", "$(BUILT_CODE)"}}) {
    TemplateValues c;
    c.flags = {{"TOOLKIT_CHECK", toolkit_check}, {"RDC", s.relocatable_device_code}};
    c.text = {{"COMPILE_SRC", k.src}, {"COMPILE_OUT", k.out}};
    KC_ASSIGN_OR_RETURN(std::string recipe,
                        RenderTemplate("cuda_compile.mk.in", cuda_compile_in, c));
    // The template's last newline is the one of the line it is inserted on.
    if (!recipe.empty() && recipe.back() == '\n') recipe.pop_back();
    v.text[k.value] = std::move(recipe);
  }
  return RenderTemplate("Makefile.in", makefile_in, v);
}

}  // namespace kerncap::repro
