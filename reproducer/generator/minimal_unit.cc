#include "reproducer/generator/minimal_unit.h"

#include <stdlib.h>

#include <chrono>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "reproducer/generator/tool_runner.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The first line of `text` that holds `needle`, else its last non-empty line.
std::string LineWith(const std::string& text, absl::string_view needle) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    if (absl::StrContains(line, needle)) return std::string(line.substr(0, 400));
    last = std::string(line.substr(0, 400));
  }
  return last;
}

std::string LastLineWith(const std::string& text, absl::string_view prefix) {
  std::string found;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    if (absl::StartsWith(line, prefix)) found = std::string(line.substr(prefix.size(), 600));
  }
  return found;
}

std::vector<std::string> Expand(const std::vector<std::string>& flags,
                                const std::vector<std::pair<std::string, std::string>>& ext) {
  std::vector<std::pair<std::string, std::string>> subs;
  for (const auto& [var, path] : ext) subs.emplace_back(absl::StrCat("$(", var, ")"), path);
  std::vector<std::string> out;
  for (const std::string& f : flags) out.push_back(absl::StrReplaceAll(f, subs));
  return out;
}

// nvcc's compile of `src` (relative to the project folder) as make recompile
// runs it (templates/cuda_compile.mk.in) into <out_stem>.cubin; relocatable
// device code is compiled to <out_stem>.rdc.cubin and device-linked. The
// result of the last step that ran.
absl::StatusOr<ToolResult> CompileCubin(const MinimalUnitQuery& q,
                                        const std::vector<std::string>& flags,
                                        const std::string& src, const std::string& out_stem) {
  const std::string cubin = out_stem + ".cubin";
  const std::string rdc = out_stem + ".rdc.cubin";
  std::vector<std::string> cc = {q.nvcc, "-cubin", "-arch=" + q.arch};
  if (q.relocatable_device_code) cc.push_back("-rdc=true");
  cc.insert(cc.end(), flags.begin(), flags.end());
  cc.insert(cc.end(), {"-o", q.relocatable_device_code ? rdc : cubin, src});
  auto r = RunTool(cc, q.project_dir, q.timeout_s);
  if (r.ok() && r->exit_code == 0 && q.relocatable_device_code) {
    r = RunTool({q.nvcc, "-dlink", "-cubin", "-arch=" + q.arch, "-o", cubin, rdc}, q.project_dir,
                q.timeout_s);
  }
  return r;
}

// The one line of kerncap-nvrtc's stderr that says why it failed (its own
// "kerncap-nvrtc: " line, else NVRTC's first error).
std::string NvrtcWhy(const std::string& err) {
  std::string own = LastLineWith(err, "kerncap-nvrtc: ");
  const std::string first_error = LineWith(err, "error");
  if (own.empty()) return first_error;
  if (absl::StrContains(first_error, "error") && !absl::StrContains(own, first_error)) {
    absl::StrAppend(&own, " (", first_error, ")");
  }
  return own;
}

// kerncap-nvrtc's compile of the minimal unit as make recompile runs it
// (templates/Makefile.in), compared with `nvcc_print`, the kernel nvcc's
// build of the same unit verified with.
UnitCompiler CheckNvrtc(const MinimalUnitQuery& q, const std::vector<std::string>& flags,
                        const KernelPrint& nvcc_print, const std::string& out) {
  UnitCompiler c;
  if (q.relocatable_device_code) {
    c.reason = "relocatable device code: kerncap-nvrtc does not device-link (nvcc does)";
    return c;
  }
  if (q.nvrtc.empty()) {
    c.reason = "kerncap-nvrtc is not installed beside kerncap";
    return c;
  }
  std::vector<std::string> argv = {q.nvrtc, "--nvcc=" + q.nvcc, "-arch=" + q.arch};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", out, kMinimalUnitFile});
  const auto t0 = std::chrono::steady_clock::now();
  auto r = RunTool(argv, q.project_dir, q.timeout_s);
  c.nvrtc_seconds = SecondsSince(t0);
  if (!r.ok()) {
    c.reason = absl::StrCat("kerncap-nvrtc could not run: ", r.status().message());
    return c;
  }
  if (r->timed_out) {
    c.reason = absl::StrCat("kerncap-nvrtc ran past ", q.timeout_s, " s");
    return c;
  }
  // Its exit codes: nvrtc_main.cc.
  switch (r->exit_code) {
    case exit_code::kOk:
      break;
    case exit_code::kRefused:
      c.reason = absl::StrCat("kerncap-nvrtc refused the flags: ", NvrtcWhy(r->err));
      return c;
    case exit_code::kNotFound:
      c.reason = absl::StrCat("kerncap-nvrtc found no NVRTC: ", NvrtcWhy(r->err));
      return c;
    case exit_code::kError:
      c.reason = absl::StrCat("NVRTC rejected the minimal unit: ", NvrtcWhy(r->err));
      return c;
    default:
      c.reason = absl::StrCat("kerncap-nvrtc failed (exit ", r->exit_code, "): ", NvrtcWhy(r->err));
      return c;
  }
  auto bytes = ReadFile(out);
  absl::StatusOr<KernelPrint> fp = bytes.ok() ? KernelFingerprint(*bytes, q.kernel_symbol)
                                              : absl::StatusOr<KernelPrint>(bytes.status());
  if (!fp.ok()) {
    c.reason = absl::StrCat("kerncap-nvrtc's cubin lacks the kernel: ", fp.status().message());
    return c;
  }
  c.verified = *fp == nvcc_print;
  if (!c.verified) {
    c.reason = absl::StrCat("NVRTC builds ", q.kernel_symbol, " differently from nvcc (",
                            DescribeDifference(nvcc_print, *fp), ")");
    return c;
  }
  c.tool = "nvrtc";
  return c;
}

}  // namespace

std::string CudaArchMacro(const std::string& arch) {
  if (!absl::StartsWith(arch, "sm_")) return "";
  std::string digits;
  for (char c : arch.substr(3)) {
    if (c < '0' || c > '9') break;
    digits.push_back(c);
  }
  if (digits.size() < 2) return "";
  return digits + "0";
}

std::vector<std::string> SlicerArgs(const std::vector<std::string>& flags) {
  // Flags that take a value, in nvcc's spellings, and clang's flag for them.
  struct Spelling {
    const char* nvcc;
    const char* clang;
  };
  static const Spelling kWithValue[] = {
      {"-D", "-D"},        {"--define-macro", "-D"}, {"-U", "-U"},
      {"--undefine-macro", "-U"}, {"-I", "-I"},      {"--include-path", "-I"},
      {"-isystem", "-isystem"}, {"--system-include", "-isystem"},
      {"-include", "-include"}, {"--pre-include", "-include"},
      {"-std", "-std="},   {"--std", "-std="},
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < flags.size(); ++i) {
    const std::string& f = flags[i];
    bool matched = false;
    for (const Spelling& s : kWithValue) {
      const std::string n = s.nvcc;
      std::string value;
      if (f == n) {
        if (i + 1 >= flags.size()) break;
        value = flags[++i];
      } else if (absl::StartsWith(f, n + "=")) {
        value = f.substr(n.size() + 1);
      } else if (n.size() == 2 && absl::StartsWith(f, n) && f.size() > 2) {
        value = f.substr(2);  // -DX, -Idir
      } else {
        continue;
      }
      matched = true;
      const std::string c = s.clang;
      if (absl::EndsWith(c, "=")) {
        out.push_back(c + value);
      } else if (c.size() == 2) {
        out.push_back(c + value);
      } else {
        out.push_back(c);
        out.push_back(value);
      }
      break;
    }
    if (matched) continue;
    // Flags whose value is a separate word, skipped with it.
    static const char* kSkipNext[] = {"-Xcompiler", "-Xptxas", "-Xcicc", "-Xnvlink",
                                      "--compiler-options", "--ptxas-options", "-ccbin",
                                      "--compiler-bindir", "-x", "-maxrregcount", "-o"};
    for (const char* k : kSkipNext) {
      if (f == k) {
        ++i;
        break;
      }
    }
  }
  return out;
}

MinimalUnit BuildMinimalUnit(const MinimalUnitQuery& q) {
  MinimalUnit mu;
  if (q.slicer.empty()) {
    mu.reason =
        "kerncap-cuda-slice is not installed beside kerncap (it is built when libclang-15-dev is "
        "present)";
    return mu;
  }
  if (q.nvcc.empty()) {
    mu.reason = "no nvcc to verify a minimal unit with";
    return mu;
  }
  auto captured = KernelFingerprint(q.captured_code, q.kernel_symbol);
  if (!captured.ok()) {
    mu.reason = absl::StrCat("the captured code cannot be compared: ", captured.status().message());
    return mu;
  }
  ScratchDir tmp("kerncap-minimal-");
  if (tmp.path().empty()) {
    mu.reason = "cannot create a temporary folder";
    return mu;
  }
  const std::vector<std::string> flags = Expand(q.flags, q.external);
  // 1. The slice, from the project's copy of the sources.
  std::vector<std::string> argv = {
      q.slicer,
      "--symbol=" + q.kernel_symbol,
      "--root=" + q.project_dir + "/" + q.source_root,
      "--out=" + tmp.path() + "/kernel.cu",
      "--report=" + tmp.path() + "/slice.json",
      "--cuda-path=" + fs::path(q.nvcc).parent_path().parent_path().string()};
  if (const std::string m = CudaArchMacro(q.arch); !m.empty()) {
    argv.push_back("--cuda-arch-macro=" + m);
  }
  argv.push_back("--");
  for (const std::string& a : SlicerArgs(flags)) argv.push_back(a);
  argv.push_back(q.unit);
  auto t0 = std::chrono::steady_clock::now();
  auto sliced = RunTool(argv, q.project_dir, q.timeout_s);
  mu.slice_seconds = SecondsSince(t0);
  if (!sliced.ok() || sliced->exit_code != 0) {
    mu.outcome = "slice_failed";
    if (!sliced.ok()) {
      mu.reason = absl::StrCat("kerncap-cuda-slice could not run: ", sliced.status().message());
    } else if (sliced->timed_out) {
      mu.reason = absl::StrCat("kerncap-cuda-slice ran past ", q.timeout_s, " s");
    } else {
      std::string why = LastLineWith(sliced->err, "kerncap-cuda-slice: ");
      if (why.empty()) why = LineWith(sliced->err, "error");
      mu.reason = absl::StrCat("kerncap-cuda-slice failed (exit ", sliced->exit_code, "): ", why);
      const std::string first_error = LineWith(sliced->err, "error:");
      if (absl::StrContains(first_error, "error:") && !absl::StrContains(why, first_error)) {
        absl::StrAppend(&mu.reason, " (clang: ", first_error, ")");
      }
    }
    return mu;
  }
  auto text = ReadFile(tmp.path() + "/kernel.cu");
  auto report = ReadFile(tmp.path() + "/slice.json");
  if (!text.ok()) {
    mu.outcome = "slice_failed";
    mu.reason = "kerncap-cuda-slice wrote no unit";
    return mu;
  }
  if (report.ok()) {
    mu.slice = nlohmann::json::parse(*report, nullptr, /*allow_exceptions=*/false);
    if (mu.slice.is_discarded()) mu.slice = nullptr;
  }
  if (mu.slice.is_object() && mu.slice.value("parse_errors", 0) > 0) {
    mu.slice["first_parse_error"] = LineWith(sliced->err, "error:");
  }
  // 2. The compile make recompile will run, at the same place.
  const std::string unit_path = q.project_dir + "/" + kMinimalUnitFile;
  if (auto w = WriteFileAtomic(unit_path, *text); !w.ok()) {
    mu.outcome = "compile_failed";
    mu.reason = absl::StrCat("cannot write ", kMinimalUnitFile, ": ", w.message());
    return mu;
  }
  t0 = std::chrono::steady_clock::now();
  auto compiled = CompileCubin(q, flags, kMinimalUnitFile, tmp.path() + "/kernel");
  mu.compile_seconds = SecondsSince(t0);
  std::error_code ec;
  if (!compiled.ok() || compiled->exit_code != 0) {
    fs::remove(unit_path, ec);
    mu.outcome = "compile_failed";
    mu.reason = compiled.ok() ? absl::StrCat("nvcc rejected the minimal unit: ",
                                             LineWith(compiled->err + compiled->out, "error"))
                              : absl::StrCat("nvcc could not run: ", compiled.status().message());
    return mu;
  }
  // 3. The comparison: with the captured code; when that differs (another
  // toolkit than the application's builds even the whole unit differently),
  // with the whole unit compiled here, which is what the minimal unit
  // replaces.
  auto built = ReadFile(tmp.path() + "/kernel.cubin");
  absl::StatusOr<KernelPrint> fp = built.ok() ? KernelFingerprint(*built, q.kernel_symbol)
                                              : absl::StatusOr<KernelPrint>(built.status());
  // The caller writes kernel.cu into the project when verified; until then
  // it stays for the NVRTC check, which compiles it where make recompile will.
  struct RemoveUnit {
    std::string path;
    ~RemoveUnit() {
      std::error_code e;
      fs::remove(path, e);
    }
  } remove_unit{unit_path};
  if (!fp.ok()) {
    mu.outcome = "differs";
    mu.reason = absl::StrCat("the minimal unit's cubin lacks the kernel: ", fp.status().message());
    return mu;
  }
  if (*fp == *captured) {
    mu.outcome = "verified";
    mu.verified_against = "captured";
    mu.text = std::move(*text);
    mu.compiler = CheckNvrtc(q, flags, *fp, tmp.path() + "/kernel.nvrtc.cubin");
    return mu;
  }
  t0 = std::chrono::steady_clock::now();
  auto w = CompileCubin(q, flags, q.unit, tmp.path() + "/whole");
  mu.whole_compile_seconds = SecondsSince(t0);
  auto whole_bytes = ReadFile(tmp.path() + "/whole.cubin");
  absl::StatusOr<KernelPrint> whole_fp =
      w.ok() && w->exit_code == 0 && whole_bytes.ok()
          ? KernelFingerprint(*whole_bytes, q.kernel_symbol)
          : absl::StatusOr<KernelPrint>(absl::UnknownError("the whole unit did not compile"));
  if (whole_fp.ok() && *whole_fp == *fp) {
    mu.outcome = "verified";
    mu.verified_against = "whole_unit";
    mu.text = std::move(*text);
    mu.compiler = CheckNvrtc(q, flags, *fp, tmp.path() + "/kernel.nvrtc.cubin");
    return mu;
  }
  mu.outcome = "differs";
  mu.reason = absl::StrCat(
      "the minimal unit builds ", q.kernel_symbol, " differently from the captured code (",
      DescribeDifference(*captured, *fp), ")",
      whole_fp.ok() ? absl::StrCat(" and from the whole unit compiled here (",
                                   DescribeDifference(*whole_fp, *fp), ")")
                    : absl::StrCat("; the whole unit could not be compared: ",
                                   whole_fp.status().message()));
  return mu;
}

}  // namespace kerncap::repro
