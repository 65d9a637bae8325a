#include "reproducer/generator/minimal_unit.h"

#include <stdlib.h>

#include <chrono>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "reproducer/generator/tool_runner.h"

#ifdef KERNCAP_GENERATOR_HAVE_LLVM
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"
#endif

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    std::string t = (fs::temp_directory_path() / "kerncap-minimal-XXXXXX").string();
    if (::mkdtemp(t.data()) != nullptr) path = t;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
  std::string path;
};

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

#ifdef KERNCAP_GENERATOR_HAVE_LLVM
absl::StatusOr<KernelPrint> KernelFingerprint(std::string_view elf, const std::string& symbol) {
  using namespace llvm::object;  // NOLINT: local to this function
  auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(elf.data(), elf.size()),
                                                 "code-object", /*RequiresNullTerminator=*/false);
  auto obj = ObjectFile::createObjectFile(buffer->getMemBufferRef());
  if (!obj) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an object file: ", llvm::toString(obj.takeError())));
  }
  const auto* elf64 = llvm::dyn_cast<ELF64LEObjectFile>(obj->get());
  if (elf64 == nullptr) return absl::InvalidArgumentError("not a 64-bit little-endian ELF file");
  KernelPrint fp;
  bool found = false;
  for (const ELFSymbolRef sym : elf64->symbols()) {
    auto name = sym.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name != symbol) continue;
    auto section = sym.getSection();
    auto value = sym.getValue();
    if (!section || !value || *section == elf64->section_end()) {
      if (!section) llvm::consumeError(section.takeError());
      if (!value) llvm::consumeError(value.takeError());
      continue;
    }
    auto contents = (*section)->getContents();
    if (!contents) {
      llvm::consumeError(contents.takeError());
      continue;
    }
    const uint64_t base = (*section)->getAddress(), size = sym.getSize();
    if (*value < base || *value - base > contents->size() ||
        size > contents->size() - (*value - base)) {
      return absl::InvalidArgumentError(absl::StrCat("symbol ", symbol, " lies outside its section"));
    }
    const auto* shdr = elf64->getSection((*section)->getRawDataRefImpl());
    // sh_info of a cubin's .text.<kernel>: the register count in its top
    // byte, above the index of the kernel's symbol (which depends on what
    // else the unit defines, so it is not compared).
    fp.code = contents->substr(*value - base, size).str();
    fp.flags = shdr->sh_flags;
    fp.registers = static_cast<uint64_t>(shdr->sh_info) >> 24;
    found = true;
    break;
  }
  if (!found) return absl::NotFoundError(absl::StrCat("no symbol ", symbol));
  for (const SectionRef s : elf64->sections()) {
    auto name = s.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name == ".nv.shared." + symbol) fp.shared_bytes = static_cast<int64_t>(s.getSize());
    if (*name == ".nv.constant0." + symbol) {
      fp.constant0_bytes = static_cast<int64_t>(s.getSize());
    }
    if (*name != ".rel.text." + symbol && *name != ".rela.text." + symbol) continue;
    for (const RelocationRef r : s.relocations()) {
      std::string target;
      auto sym = r.getSymbol();
      if (sym != elf64->symbol_end()) {
        auto n = sym->getName();
        if (n) {
          target = n->str();
        } else {
          llvm::consumeError(n.takeError());
        }
      }
      fp.relocations.push_back(absl::StrCat(r.getOffset(), ":", r.getType(), ":", target));
    }
  }
  return fp;
}
#else
absl::StatusOr<KernelPrint> KernelFingerprint(std::string_view, const std::string&) {
  return absl::UnimplementedError("this build has no ELF reader (LLVM 15 missing at build time)");
}
#endif

std::string DescribeDifference(const KernelPrint& a, const KernelPrint& b) {
  std::vector<std::string> parts;
  auto bytes = [](int64_t n) { return n < 0 ? std::string("none") : absl::StrCat(n, " bytes"); };
  if (a.code != b.code) {
    parts.push_back(a.code.size() == b.code.size()
                        ? absl::StrCat("the code (", a.code.size(), " bytes each, different)")
                        : absl::StrCat("the code (", a.code.size(), " vs ", b.code.size(),
                                       " bytes)"));
  }
  if (a.registers != b.registers) {
    parts.push_back(absl::StrCat("the register count (", a.registers, " vs ", b.registers, ")"));
  }
  if (a.flags != b.flags) parts.push_back("the code section's flags");
  if (a.shared_bytes != b.shared_bytes) {
    parts.push_back(absl::StrCat("the kernel's static shared memory (", bytes(a.shared_bytes),
                                 " vs ", bytes(b.shared_bytes), ")"));
  }
  if (a.constant0_bytes != b.constant0_bytes) {
    parts.push_back(absl::StrCat("its constant bank 0 (", bytes(a.constant0_bytes), " vs ",
                                 bytes(b.constant0_bytes), ")"));
  }
  if (a.relocations != b.relocations) {
    parts.push_back(absl::StrCat("its relocations (", a.relocations.size(), " vs ",
                                 b.relocations.size(), ")"));
  }
  return parts.empty() ? "nothing" : absl::StrJoin(parts, ", ");
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
  TempDir tmp;
  if (tmp.path.empty()) {
    mu.reason = "cannot create a temporary folder";
    return mu;
  }
  const std::vector<std::string> flags = Expand(q.flags, q.external);
  // 1. The slice, from the project's copy of the sources.
  std::vector<std::string> argv = {
      q.slicer, "--symbol=" + q.kernel_symbol, "--root=" + q.project_dir + "/" + q.source_root,
      "--out=" + tmp.path + "/kernel.cu", "--report=" + tmp.path + "/slice.json",
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
  auto text = ReadFile(tmp.path + "/kernel.cu");
  auto report = ReadFile(tmp.path + "/slice.json");
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
  const std::string out = tmp.path + (q.relocatable_device_code ? "/kernel.rdc.cubin" : "/kernel.cubin");
  std::vector<std::string> cc = {q.nvcc, "-cubin", "-arch=" + q.arch};
  if (q.relocatable_device_code) cc.push_back("-rdc=true");
  cc.insert(cc.end(), flags.begin(), flags.end());
  cc.insert(cc.end(), {"-o", out, kMinimalUnitFile});
  t0 = std::chrono::steady_clock::now();
  auto compiled = RunTool(cc, q.project_dir, q.timeout_s);
  if (compiled.ok() && compiled->exit_code == 0 && q.relocatable_device_code) {
    compiled = RunTool({q.nvcc, "-dlink", "-cubin", "-arch=" + q.arch, "-o",
                        tmp.path + "/kernel.cubin", out},
                       q.project_dir, q.timeout_s);
  }
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
  auto built = ReadFile(tmp.path + "/kernel.cubin");
  absl::StatusOr<KernelPrint> fp = built.ok() ? KernelFingerprint(*built, q.kernel_symbol)
                                              : absl::StatusOr<KernelPrint>(built.status());
  fs::remove(unit_path, ec);  // the caller writes it into the project when verified
  if (!fp.ok()) {
    mu.outcome = "differs";
    mu.reason = absl::StrCat("the minimal unit's cubin lacks the kernel: ", fp.status().message());
    return mu;
  }
  if (*fp == *captured) {
    mu.outcome = "verified";
    mu.verified_against = "captured";
    mu.text = std::move(*text);
    return mu;
  }
  std::vector<std::string> whole = {q.nvcc, "-cubin", "-arch=" + q.arch};
  if (q.relocatable_device_code) whole.push_back("-rdc=true");
  whole.insert(whole.end(), flags.begin(), flags.end());
  whole.insert(whole.end(), {"-o", tmp.path + "/whole.o", q.unit});
  t0 = std::chrono::steady_clock::now();
  auto w = RunTool(whole, q.project_dir, q.timeout_s);
  if (w.ok() && w->exit_code == 0 && q.relocatable_device_code) {
    w = RunTool({q.nvcc, "-dlink", "-cubin", "-arch=" + q.arch, "-o", tmp.path + "/whole.cubin",
                 tmp.path + "/whole.o"},
                q.project_dir, q.timeout_s);
  } else if (w.ok() && w->exit_code == 0) {
    fs::rename(tmp.path + "/whole.o", tmp.path + "/whole.cubin", ec);
  }
  mu.whole_compile_seconds = SecondsSince(t0);
  auto whole_bytes = ReadFile(tmp.path + "/whole.cubin");
  absl::StatusOr<KernelPrint> whole_fp =
      w.ok() && w->exit_code == 0 && whole_bytes.ok()
          ? KernelFingerprint(*whole_bytes, q.kernel_symbol)
          : absl::StatusOr<KernelPrint>(absl::UnknownError("the whole unit did not compile"));
  if (whole_fp.ok() && *whole_fp == *fp) {
    mu.outcome = "verified";
    mu.verified_against = "whole_unit";
    mu.text = std::move(*text);
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
