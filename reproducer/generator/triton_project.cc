#include "reproducer/generator/triton_project.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/digest.h"
#include "common/status_macros.h"
#include "reproducer/generator/path_util.h"
#include "reproducer/generator/project_manifest.h"
#include "reproducer/generator/tool_runner.h"

namespace kerncap::repro {

namespace embedded {
// Generated at build time (common/cmake/embed_files.cmake).
extern const char kSliceKernelPy[];
extern const unsigned long long kSliceKernelPySize;
extern const char kRunPy[];
extern const unsigned long long kRunPySize;
extern const char kReplayBindingPy[];
extern const unsigned long long kReplayBindingPySize;
}  // namespace embedded

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

std::string_view Embedded(const char* data, unsigned long long size) {
  return std::string_view(data, static_cast<size_t>(size));
}

json ToJson(const ordered_json& o) { return json::parse(o.dump()); }

absl::Status NoMetadata(const v1::CaptureManifest& m, const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat(
      "capture ", m.capture_id(), " (kernel ", m.kernel().mangled_name(),
      ") cannot become a Triton reproducer: ", why,
      ". Triton metadata comes from the kerncap Triton shim (python_shim: KERNCAP_TRITON_SHIM=1) "
      "active in the application when the kernel was compiled"));
}

absl::StatusOr<ordered_json> ParseDocument(const v1::CaptureManifest& m) {
  const std::string& text = m.kernel().jit_metadata_json();
  if (text.empty()) return NoMetadata(m, "it carries no JIT metadata (kernel.jit_metadata_json)");
  ordered_json doc = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return NoMetadata(m, "its JIT metadata is not a JSON object");
  if (doc.value("schema", "") != kTritonJitSchema) {
    return NoMetadata(m, absl::StrCat("its JIT metadata has schema \"", doc.value("schema", ""),
                                      "\", not ", kTritonJitSchema));
  }
  if (!doc.contains("variants") || !doc["variants"].is_array() || doc["variants"].empty()) {
    return NoMetadata(m, "its Triton metadata lists no compiled variant");
  }
  return doc;
}

// ---- parameter mapping ------------------------------------------------------

std::optional<uint32_t> ScalarSize(const std::string& t) {
  static const std::pair<const char*, uint32_t> kSizes[] = {
      {"i1", 1},  {"u1", 1},  {"i8", 1},   {"u8", 1},   {"i16", 2},  {"u16", 2},
      {"i32", 4}, {"u32", 4}, {"i64", 8},  {"u64", 8},  {"fp16", 2}, {"bf16", 2},
      {"fp32", 4}, {"f32", 4}, {"fp64", 8}};
  for (const auto& [name, size] : kSizes) {
    if (t == name) return size;
  }
  return std::nullopt;
}

struct Cursor {
  const v1::CaptureManifest& m;
  int next = 0;
  int used = 0;
};

absl::Status Mismatch(const v1::CaptureManifest& m, const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "capture ", m.capture_id(), ": the Triton metadata does not fit the captured kernel's ",
      m.arguments_size(), " parameter(s): ", what));
}

// Takes the next kernel parameter, which must be `size` bytes.
absl::StatusOr<int> Take(Cursor& c, const std::string& param, const std::string& type,
                         uint32_t size) {
  const v1::CaptureManifest& m = c.m;
  if (c.next >= m.arguments_size() || m.arguments(c.next).kind() == v1::ARG_HIDDEN) {
    return Mismatch(m, absl::StrCat("parameter ", param, " (", type, ") needs kernel parameter ",
                                    c.next, " but the kernel has only ", c.next,
                                    " (the metadata describes another kernel or Triton version)"));
  }
  const v1::Argument& a = m.arguments(c.next);
  if (a.size() != size) {
    return Mismatch(m, absl::StrCat("parameter ", param, " (", type, ") maps to kernel parameter ",
                                    c.next, " of ", a.size(), " bytes, but a ", type, " takes ",
                                    size));
  }
  c.used = ++c.next;
  return c.next - 1;
}

// The region of the pre image holding `va`, or -1.
int RegionOf(const v1::CaptureManifest& m, uint64_t va) {
  for (int r = 0; r < m.pre().regions_size() && va != 0; ++r) {
    const v1::Region& reg = m.pre().regions(r);
    if (va >= reg.va() && va - reg.va() < reg.data().size()) return r;
  }
  return -1;
}

uint64_t Word(const std::string& blob, uint64_t off) {
  uint64_t v = 0;
  if (off + 8 <= blob.size()) std::memcpy(&v, blob.data() + off, 8);
  return v;
}

absl::StatusOr<json> MapOne(Cursor& c, const std::string& name, const ordered_json& type,
                            const ordered_json& constexprs, bool declared) {
  const v1::CaptureManifest& m = c.m;
  json p = {{"name", name}, {"type", ToJson(type)}, {"constexpr_declared", declared}};
  if (type.is_array()) {  // a tuple: its members are "name[i]"
    p["kind"] = "tuple";
    json elems = json::array();
    for (size_t i = 0; i < type.size(); ++i) {
      KC_ASSIGN_OR_RETURN(json e, MapOne(c, absl::StrCat(name, "[", i, "]"), type[i], constexprs,
                                         false));
      elems.push_back(std::move(e));
    }
    p["elements"] = std::move(elems);
    return p;
  }
  if (!type.is_string()) {
    return Mismatch(m, absl::StrCat("parameter ", name, " has signature ", type.dump()));
  }
  const std::string t = type.get<std::string>();
  if (t == "constexpr") {
    p["kind"] = "constexpr";
    if (constexprs.is_object() && constexprs.contains(name)) p["value"] = ToJson(constexprs[name]);
    return p;
  }
  if (absl::StartsWith(t, "*")) {
    p["kind"] = "pointer";
    KC_ASSIGN_OR_RETURN(int i, Take(c, name, t, 8));
    p["kernel_args"] = {i};
    return p;
  }
  if (ScalarSize(t).has_value()) {
    p["kind"] = "scalar";
    KC_ASSIGN_OR_RETURN(int i, Take(c, name, t, *ScalarSize(t)));
    p["kernel_args"] = {i};
    return p;
  }
  static const std::regex kDesc(R"(^tensordesc<([^\[>]*)\[([^\]]*)\])");
  std::smatch sm;
  if (std::regex_search(t, sm, kDesc)) {
    p["kind"] = "tensordesc";
    p["dtype"] = sm[1].str();
    json block = json::array();
    for (absl::string_view d : absl::StrSplit(sm[2].str(), ',', absl::SkipWhitespace())) {
      int v = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &v)) {
        return Mismatch(m, absl::StrCat("parameter ", name, ": cannot read the block shape of ", t));
      }
      block.push_back(v);
    }
    const uint32_t nd = static_cast<uint32_t>(block.size());
    p["block_shape"] = block;
    p["ndim"] = nd;
    // Triton passes a host tensor descriptor either as a CUtensorMap (128
    // bytes, when the kernel uses TMA) + shape (i32) + strides (i64), or as
    // base pointer + shape, strides (i64) + padding (i1) + shape (i32) +
    // strides (i64). The captured parameter sizes tell which.
    const bool tma = c.next < m.arguments_size() && m.arguments(c.next).size() == 128;
    json idx = json::array();
    const std::string& blob = m.argument_blob();
    int region = -1;
    if (tma) {
      p["layout"] = "tma";
      KC_ASSIGN_OR_RETURN(int d, Take(c, name, "CUtensorMap", 128));
      idx.push_back(d);
      // The global address is one of the descriptor's 8-byte words; the one
      // pointing into a captured region is taken.
      const uint64_t off = m.arguments(d).offset();
      for (uint64_t w = 0; w < 16 && region < 0; ++w) {
        uint64_t v = Word(blob, off + 8 * w);
        region = RegionOf(m, v);
        if (region >= 0) p["base"] = Hex(v);
      }
      if (region < 0) {
        p["note"] =
            "no 8-byte word of the captured CUtensorMap points into a captured region: the "
            "descriptor's base address is unknown";
      }
    } else {
      p["layout"] = "pointer";
      KC_ASSIGN_OR_RETURN(int b, Take(c, name, "*" + sm[1].str(), 8));
      idx.push_back(b);
      region = RegionOf(m, Word(blob, m.arguments(b).offset()));
      for (uint32_t k = 0; k < 2 * nd; ++k) {
        KC_ASSIGN_OR_RETURN(int i, Take(c, name, "i64", 8));
        idx.push_back(i);
      }
      KC_ASSIGN_OR_RETURN(int pad, Take(c, name, "i1", 1));
      idx.push_back(pad);
    }
    for (uint32_t k = 0; k < nd; ++k) {
      KC_ASSIGN_OR_RETURN(int i, Take(c, name, "i32", 4));
      idx.push_back(i);
    }
    for (uint32_t k = 0; k < nd; ++k) {
      KC_ASSIGN_OR_RETURN(int i, Take(c, name, "i64", 8));
      idx.push_back(i);
    }
    p["kernel_args"] = idx;
    p["region"] = region >= 0 ? json(region) : json(nullptr);
    return p;
  }
  if (t == "nvTmaDesc") {
    p["kind"] = "unsupported";
    KC_ASSIGN_OR_RETURN(int i, Take(c, name, t, 128));
    p["kernel_args"] = {i};
    p["note"] =
        "nvTmaDesc arguments (host-built TMA descriptors of the experimental API) cannot be rebuilt "
        "by run.py; the captured bytes are kernel parameter " + std::to_string(i);
    return p;
  }
  return Mismatch(m, absl::StrCat("parameter ", name, " has the signature type \"", t,
                                  "\", which this generator does not know"));
}

// ---- variant selection --------------------------------------------------------

// A short description of a recorded config for messages: "BLOCK_M=128
// BLOCK_N=64 num_warps=8 num_stages=4".
std::string ConfigText(const ordered_json& v) {
  std::string out;
  const ordered_json& c = v.contains("constexprs") && v["constexprs"].is_object()
                              ? v["constexprs"]
                              : (v.contains("kwargs") ? v["kwargs"] : ordered_json::object());
  if (c.is_object()) {
    for (const auto& [k, val] : c.items()) {
      if (absl::StartsWith(k, "stride") || !val.is_primitive()) continue;
      absl::StrAppend(&out, out.empty() ? "" : " ", k, "=", val.dump());
    }
  }
  for (const char* k : {"num_warps", "num_stages"}) {
    if (v.contains(k) && v[k].is_number()) absl::StrAppend(&out, out.empty() ? "" : " ", k, "=", v[k].dump());
  }
  return out.empty() ? "?" : out;
}

// The recorded variant whose binary IS the captured code object (SHA-256 of
// the image; the kernel's own code object first). Nothing else is a match:
// `current` (the last compiled, or the autotuner's choice) is a guess, and a
// reproducer built on a guess rebuilds another binary and validates it as if
// it were the captured one. So no match is a refusal that says what was
// recorded and why the captured binary may be missing (the shim's table
// evicted older variants; the document was truncated; the kernel was
// compiled before the shim was active).
absl::StatusOr<const ordered_json*> SelectVariant(const ordered_json& doc,
                                                  const v1::CaptureManifest& m,
                                                  const std::string& kernel_sha) {
  std::vector<std::string> digests;
  if (!kernel_sha.empty()) digests.push_back(kernel_sha);
  for (const v1::CodeObject& co : m.code_objects()) {
    digests.push_back(absl::BytesToHexString(co.digest()));
  }
  const ordered_json& vs = doc["variants"];
  for (const std::string& d : digests) {
    for (const ordered_json& v : vs) {
      if (v.is_object() && v.contains("binary") && v["binary"].is_object() &&
          v["binary"].value("sha256", "") == d) {
        return &v;
      }
    }
  }
  std::string recorded;
  for (const ordered_json& v : vs) {
    if (!v.is_object()) continue;
    const std::string sha = v.contains("binary") && v["binary"].is_object()
                                ? v["binary"].value("sha256", "")
                                : "";
    absl::StrAppend(&recorded, "\n  ", sha.empty() ? "(no binary digest)" : sha.substr(0, 16),
                    ": ", ConfigText(v));
  }
  std::string why;
  const int evicted = doc.value("evicted_variants", 0);
  if (evicted > 0) {
    absl::StrAppend(&why, "; the shim's table evicted ", evicted,
                    " older variant(s) of this kernel while others compiled");
  }
  if (doc.contains("truncated") && doc["truncated"].is_array() && !doc["truncated"].empty()) {
    absl::StrAppend(&why, "; the document was truncated (", doc["truncated"].dump(), ")");
  }
  if (doc.contains("autotune") && doc["autotune"].is_object() &&
      doc["autotune"].contains("chosen") && doc["autotune"]["chosen"].is_object()) {
    absl::StrAppend(&why, "; the autotuner chose ", ConfigText(doc["autotune"]["chosen"]));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "capture ", m.capture_id(), " (kernel ", m.kernel().mangled_name(),
      "): none of the ", vs.size(), " variant(s) the Triton shim recorded is the captured binary "
      "(SHA-256 ", kernel_sha.substr(0, 16), "...)", why, ". Recorded:", recorded,
      "\nNo Triton reproducer: it would rebuild another binary and validate it as the captured "
      "one. The capture itself replays (kerncap-replay; kerncapctl repro --binary makes a "
      "binary-only project). Capture again with the shim active from the start "
      "(KERNCAP_TRITON_SHIM=1) so that every compiled variant is recorded"));
}

// The variant's launch geometry must be the capture's: Triton launches
// num_warps * warp_size threads per block (num_ctas CTAs per cluster). A
// document that says otherwise for the captured binary describes another
// launch; refused like a digest mismatch.
absl::Status CheckGeometry(const v1::CaptureManifest& m, const ordered_json& variant) {
  if (m.launch().block_size() < 1 || m.launch().block(0) == 0) return absl::OkStatus();
  if (!variant.contains("num_warps") || !variant["num_warps"].is_number_integer()) {
    return absl::OkStatus();
  }
  uint32_t warp = 32;
  if (variant.contains("target") && variant["target"].is_object() &&
      variant["target"].contains("warp_size") && variant["target"]["warp_size"].is_number_integer()) {
    warp = variant["target"]["warp_size"].get<uint32_t>();
  } else if (variant.contains("warp_size") && variant["warp_size"].is_number_integer()) {
    warp = variant["warp_size"].get<uint32_t>();
  }
  uint64_t threads = 1;
  for (uint32_t b : m.launch().block()) threads *= std::max<uint32_t>(b, 1);
  const uint64_t want = static_cast<uint64_t>(variant["num_warps"].get<int64_t>()) * warp;
  if (threads != want) {
    return absl::FailedPreconditionError(absl::StrCat(
        "capture ", m.capture_id(), ": the Triton variant recorded for the captured binary has "
        "num_warps=", variant["num_warps"].dump(), " (", want, " threads per block) but the "
        "captured launch has ", threads, ": the metadata does not describe this launch; no Triton "
        "reproducer"));
  }
  return absl::OkStatus();
}

// ---- kernel.py ---------------------------------------------------------------------

std::string Commented(const std::string& text, const std::string& indent = "#   ") {
  std::string out;
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    if (l.empty()) continue;
    absl::StrAppend(&out, indent, l, "\n");
  }
  return out;
}

std::string EnsureNewline(std::string s) {
  if (!s.empty() && s.back() != '\n') s.push_back('\n');
  return s;
}

// The recorded source without its decorators: from the "def" line.
std::string DefOnly(const std::string& source) {
  std::vector<std::string> lines = absl::StrSplit(source, '\n');
  size_t start = 0;
  static const std::regex kDef(R"(^\s*def\s+\w+\s*\()");
  for (size_t i = 0; i < lines.size(); ++i) {
    if (std::regex_search(lines[i], kDef)) {
      start = i;
      break;
    }
  }
  std::vector<std::string> kept(lines.begin() + static_cast<long>(start), lines.end());
  return EnsureNewline(absl::StrJoin(kept, "\n"));
}

// @triton.jit with the recorded do_not_specialize flags.
std::string JitDecorator(const ordered_json& function) {
  std::vector<std::string> dns, dnsa;
  if (function.contains("params") && function["params"].is_array()) {
    for (const ordered_json& p : function["params"]) {
      const std::string n = p.value("name", "");
      if (p.value("do_not_specialize", false)) dns.push_back("\"" + n + "\"");
      if (p.value("do_not_specialize_on_alignment", false)) dnsa.push_back("\"" + n + "\"");
    }
  }
  std::vector<std::string> args;
  if (!dns.empty()) args.push_back("do_not_specialize=[" + absl::StrJoin(dns, ", ") + "]");
  if (!dnsa.empty()) {
    args.push_back("do_not_specialize_on_alignment=[" + absl::StrJoin(dnsa, ", ") + "]");
  }
  return args.empty() ? "@triton.jit\n" : "@triton.jit(" + absl::StrJoin(args, ", ") + ")\n";
}

// One Python file of the project besides kernel.py: a helper module copied
// (sliced) from the application into deps/, or an empty package folder.
struct ProjectModule {
  std::string path;  // "deps/some_pkg/ops/utils.py"
  std::string text;
};

struct KernelSource {
  std::string text;
  json info;  // kernel_source
  json inductor_decorator;  // from the slicer (may be null)
  std::vector<ProjectModule> modules;
};

std::string Header(const v1::CaptureManifest& m, const std::string& fn_name,
                   const std::string& origin_line) {
  return absl::StrCat(
      "# kernel.py: the Triton kernel ", fn_name, " of capture ", m.capture_id(),
      " (kerncap reproducer).\n", origin_line,
      "# Edit it freely: run.py imports ", fn_name,
      " from here and launches it with the captured\n"
      "# configuration (autotuning and heuristics decorators are removed: run.py pins\n"
      "# the constexprs and launch options; --config / --candidate choose others).\n"
      "# run.py compiles this file under the application's file name and line numbers\n"
      "# (kerncap.json triton.kernel_source.layout), so that the line table and device\n"
      "# assert messages in the binary are the captured ones.\n");
}

int NewlinesIn(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// Appends one function (or the kernel) to the layout: where its def is in
// the generated file and where it was in the application's. run.py shifts
// the def there when it compiles the file.
void AddLayout(json& layout, const std::string& name, const std::string& kind, int def_line,
               int original_def_line) {
  if (name.empty() || def_line <= 0 || original_def_line <= 0) return;
  layout.push_back({{"name", name},
                    {"kind", kind},
                    {"def_line", def_line},
                    {"original_def_line", original_def_line}});
}

// The recorded def line of the kernel in its application file (the shim's
// functions{}.def_line), or 0.
int RecordedDefLine(const ordered_json& function) {
  if (function.contains("def_line") && function["def_line"].is_number_integer()) {
    return function["def_line"].get<int>();
  }
  return 0;
}

absl::StatusOr<KernelSource> RecordedSource(const v1::CaptureManifest& m, const ordered_json& doc,
                                            const ordered_json& function,
                                            const std::string& fn_name, const std::string& why) {
  const std::string source = function.value("source", "");
  if (source.empty()) {
    return NoMetadata(m, absl::StrCat("the kernel's module file cannot be used (", why,
                                      ") and the metadata holds no source for ", fn_name));
  }
  if (function.value("source_truncated", false)) {
    return NoMetadata(m, absl::StrCat("the kernel's module file cannot be used (", why,
                                      ") and the recorded source of ", fn_name,
                                      " is truncated (KERNCAP_SHIM_MAX_SOURCE)"));
  }
  const bool inductor = doc.contains("inductor") ||
                        (doc.contains("autotune") && doc["autotune"].is_object() &&
                         doc["autotune"].value("kind", "") == "inductor.CachingAutotuner");
  std::string text = Header(m, fn_name,
                            "# From the source recorded at compile time (the module file was not "
                            "usable:\n# " + why + "): helpers it calls from its module, if any, "
                            "are missing.\n");
  absl::StrAppend(&text, "import triton\nimport triton.language as tl\n");
  if (inductor) {
    absl::StrAppend(
        &text,
        "\n# torch.compile (Inductor) runtime helpers, as Inductor's kernel files import them.\n"
        "try:\n"
        "    from torch._inductor.runtime import triton_helpers, triton_heuristics  # noqa: F401\n"
        "    from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math  # noqa\n"
        "    from torch._inductor.runtime.hints import (AutotuneHint, DeviceProperties,  # noqa\n"
        "                                               ReductionHint, TileHint)\n"
        "except ImportError:\n"
        "    pass\n");
  }
  const std::string decorator = JitDecorator(function);
  absl::StrAppend(&text, "\n\n");
  const int def_line = NewlinesIn(text) + 1 + NewlinesIn(decorator);
  absl::StrAppend(&text, decorator, DefOnly(source));
  KernelSource ks;
  ks.text = std::move(text);
  json layout = json::array();
  AddLayout(layout, fn_name, "target", def_line, RecordedDefLine(function));
  ks.info = {{"origin", "recorded_source"}, {"note", why}, {"layout", layout}};
  return ks;
}

// Joins the slicer's pieces (in file order) with blank lines between kinds;
// each function's def line is added to `layout`. `replace_target`, when not
// empty, is the kernel's text to use instead of the target piece's, with its
// original def line.
std::string AssemblePieces(std::string text, const json& pieces, json& layout,
                           const std::string& replace_target = "",
                           int replaced_original_def_line = 0) {
  std::string prev_kind;
  for (const json& piece : pieces) {
    const std::string kind = piece.value("kind", "");
    std::string body = EnsureNewline(piece.value("text", ""));
    const bool block = kind == "function" || kind == "target";
    if (prev_kind.empty()) {
      absl::StrAppend(&text, "\n");
    } else if (block || prev_kind == "function" || prev_kind == "target") {
      absl::StrAppend(&text, "\n\n");
    } else if ((kind == "import") != (prev_kind == "import" || prev_kind == "future")) {
      absl::StrAppend(&text, "\n");
    }
    const int first = NewlinesIn(text) + 1;  // this piece's first line in the file
    const int line = piece.value("line", 0), start = piece.value("start_line", line);
    std::vector<std::string> names = piece.value("names", std::vector<std::string>{});
    const std::string name = names.empty() ? "" : names[0];
    if (kind == "target" && !replace_target.empty()) {
      body = replace_target;
      const size_t def = body.find("def ");
      const int def_offset =
          def == std::string::npos ? 0 : NewlinesIn(body.substr(0, def));
      AddLayout(layout, name, kind, first + def_offset, replaced_original_def_line);
    } else if (block) {
      AddLayout(layout, name, kind, first + (line - start), line);
    }
    absl::StrAppend(&text, body);
    prev_kind = kind;
  }
  return text;
}

bool IsModuleName(const std::string& name) {
  static const std::regex kName(R"(^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$)");
  return std::regex_match(name, kName);
}

// The helper modules the slicer cut out of the application, as files under
// deps/ (package folders get an __init__.py, empty unless the package itself
// was sliced), and their entries for kerncap.json.
void CopiedModules(const json& slicer_out, KernelSource& ks, std::vector<std::string>* warnings) {
  json entries = json::array();
  std::set<std::string> written;
  std::set<std::string> packages;  // "deps/a", "deps/a/b"
  if (slicer_out.contains("modules") && slicer_out["modules"].is_array()) {
    for (const json& mod : slicer_out["modules"]) {
      const std::string name = mod.value("module", "");
      if (!IsModuleName(name)) {
        warnings->push_back(absl::StrCat("kernel.py: a helper module named \"", name,
                                         "\" was not copied (not a module name)"));
        continue;
      }
      const std::string dir = "deps/" + absl::StrReplaceAll(name, {{".", "/"}});
      const bool package = mod.value("package", false);
      const std::string path = package ? dir + "/__init__.py" : dir + ".py";
      const std::string file = mod.value("file", "");
      std::string text = absl::StrCat(
          "# ", name, ": helpers of the kernel copied from the application's\n# ",
          fs::path(file).filename().string(),
          " by kerncap (only what kernel.py uses; compiled by run.py under the\n"
          "# application's file name and line numbers).\n");
      std::vector<std::string> dropped = mod.value("dropped_imports", std::vector<std::string>{});
      if (!dropped.empty()) {
        absl::StrAppend(&text, "# Imports of the module left out (nothing here uses them):\n");
        for (const std::string& d : dropped) absl::StrAppend(&text, Commented(d));
      }
      json layout = json::array();
      text = AssemblePieces(text, mod.value("pieces", json::array()), layout);
      ks.modules.push_back({path, text});
      written.insert(path);
      entries.push_back({{"module", name},
                         {"path", path},
                         {"original_file", file},
                         {"package", package},
                         {"names", mod.value("names", json::array())},
                         {"layout", layout},
                         {"sha256", Sha256(text).ToHex()}});
      std::vector<std::string> parts = absl::StrSplit(name, '.');
      std::string parent = "deps";
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        parent += "/" + parts[i];
        packages.insert(parent);
      }
      if (package) packages.erase(dir);
    }
  }
  json empty_packages = json::array();
  for (const std::string& dir : packages) {
    const std::string path = dir + "/__init__.py";
    if (written.count(path) > 0) continue;
    ks.modules.push_back({path, "# A package folder of the helpers copied by kerncap (empty).\n"});
    empty_packages.push_back(path);
  }
  ks.info["modules"] = entries;
  ks.info["packages"] = empty_packages;
  json not_copied = slicer_out.value("not_copied", json::array());
  ks.info["not_copied"] = not_copied;
  for (const json& n : not_copied) {
    warnings->push_back(absl::StrCat(
        "kernel.py: ", n.value("names", json::array()).dump(), " from ",
        n.contains("module") && n["module"].is_string() ? n["module"].get<std::string>() : "?",
        " not copied (", n.value("why", "?"),
        "): kernel.py keeps the import, so that package must be installed where run.py runs"));
  }
}

absl::StatusOr<KernelSource> SlicedSource(const v1::CaptureManifest& m, const ordered_json& doc,
                                          const ordered_json& function,
                                          const std::string& fn_name,
                                          const std::string& module_file,
                                          const std::string& python3,
                                          std::vector<std::string>* warnings) {
  if (python3.empty()) {
    return RecordedSource(m, doc, function, fn_name,
                          "python3 was not found where the reproducer was generated");
  }
  if (module_file.empty()) {
    return RecordedSource(m, doc, function, fn_name, "the metadata names no module file");
  }
  if (!FileExists(module_file)) {
    return RecordedSource(m, doc, function, fn_name,
                          absl::StrCat(fs::path(module_file).filename().string(),
                                       " is not readable where the reproducer was generated"));
  }
  // The kernel module's import name and the application's sys.path resolve
  // the imports of helpers from its other modules.
  json options = json::object();
  if (function.contains("module") && function["module"].is_string()) {
    options["module"] = function["module"].get<std::string>();
  }
  if (doc.contains("producer") && doc["producer"].is_object() &&
      doc["producer"].contains("sys_path") && doc["producer"]["sys_path"].is_array()) {
    options["roots"] = ToJson(doc["producer"]["sys_path"]);
  }
  auto r = RunTool({python3, "-I", "-c",
                    std::string(Embedded(embedded::kSliceKernelPy, embedded::kSliceKernelPySize)),
                    module_file, fn_name, options.dump()},
                   "", 60);
  json out;
  if (r.ok() && r->exit_code == 0) out = json::parse(r->out, nullptr, false);
  if (!out.is_object() || !out.value("ok", false)) {
    std::string why = !r.ok()             ? std::string(r.status().message())
                      : out.is_object()   ? out.value("error", "slice_kernel.py failed")
                                          : "slice_kernel.py failed: " + r->err.substr(0, 300);
    return RecordedSource(m, doc, function, fn_name,
                          absl::StrCat("slicing ", fs::path(module_file).filename().string(),
                                       " failed: ", why));
  }
  const json& target = out["target"];
  const std::string recorded = function.value("source", "");
  const bool recorded_usable = !recorded.empty() && !function.value("source_truncated", false);
  const std::string recorded_sha = function.value("source_sha256", "");
  std::optional<bool> matches;
  if (!recorded_sha.empty()) matches = target.value("def_sha256", "") == recorded_sha;
  std::string text =
      Header(m, fn_name,
             absl::StrCat("# From ", fs::path(module_file).filename().string(), " (", fn_name,
                          " at line ", target.value("line", 0),
                          ") with the helpers, constants and imports it uses.\n"));
  std::vector<std::string> removed = target.value("decorators_removed", std::vector<std::string>{});
  if (!removed.empty()) {
    absl::StrAppend(&text, "# Decorators removed from ", fn_name, ":\n");
    for (const std::string& d : removed) absl::StrAppend(&text, Commented(d));
  }
  std::vector<std::string> dropped = out.value("dropped_imports", std::vector<std::string>{});
  if (!dropped.empty()) {
    absl::StrAppend(&text, "# Imports of the module left out (nothing here uses them):\n");
    for (const std::string& d : dropped) absl::StrAppend(&text, Commented(d));
  }
  std::string note, replacement;
  int replaced_def_line = 0;
  if (matches.has_value() && !*matches && recorded_usable) {
    // The file changed since the capture: what was compiled is the recorded
    // source; the rest of the module is taken as it is now.
    std::string decs;
    for (const std::string& d : target.value("decorators_kept", std::vector<std::string>{})) {
      absl::StrAppend(&decs, d, "\n");
    }
    replacement = (decs.empty() ? JitDecorator(function) : decs) + DefOnly(recorded);
    replaced_def_line = RecordedDefLine(function);
    note = absl::StrCat(fn_name, " in ", fs::path(module_file).filename().string(),
                        " differs from the source compiled at capture time: the recorded "
                        "source is used for it; helpers and constants come from the file as "
                        "it is now");
  }
  json layout = json::array();
  text = AssemblePieces(std::move(text), out["pieces"], layout, replacement, replaced_def_line);
  KernelSource ks;
  ks.text = std::move(text);
  ks.info = {{"origin", "module"},
             {"module_matches_capture", matches.has_value() ? json(*matches) : json(nullptr)},
             {"decorators_removed", removed},
             {"dropped_imports", dropped},
             {"slicer_python", out.value("python", "")},
             {"layout", layout},
             {"note", note}};
  CopiedModules(out, ks, warnings);
  if (out.contains("inductor")) ks.inductor_decorator = out["inductor"];
  return ks;
}

// ---- options -----------------------------------------------------------------

// Recorded compile options that are derived, not chosen: never pinned.
bool DerivedOption(const std::string& k) {
  static const std::set<std::string> kDerived = {
      "arch",          "backend_name",        "instrumentation_mode", "tmem_size",
      "global_scratch_size", "global_scratch_align", "profile_scratch_size",
      "profile_scratch_align", "warp_size",  "shared",               "cluster_dims",
      "name",          "hash",                "target"};
  return kDerived.count(k) > 0;
}

// ---- project files ---------------------------------------------------------------

std::string TritonMakefile(const std::string& title) {
  return absl::StrCat(
      "# ", title, "\n",
      "# Generated by kerncap (Triton reproducer). Every path here is relative.\n"
      "# run.py restores capture.kcap through kerncap_replay.py, which loads\n"
      "# libkerncap_replay.so: set KERNCAP_REPLAY_LIB=/path/to/libkerncap_replay.so or\n"
      "# put the folder holding kerncap-replay on PATH (the library is in ../lib).\n"
      "PYTHON ?= python3\n"
      "KERNCAP_REPLAY ?= kerncap-replay\n"
      "RUN_FLAGS ?=\n"
      "VALIDATE_FLAGS ?=\n"
      "BENCH_FLAGS ?=\n"
      "ITERATIONS ?= 100\n"
      "\n"
      ".PHONY: help run validate bench plan configs replay clean\n"
      "\n"
      "help:\n"
      "\t@echo 'make run        launch kernel.py once with the captured config; same binary?'\n"
      "\t@echo 'make validate   ... and compare every buffer with the captured result'\n"
      "\t@echo '                (VALIDATE_FLAGS=\"--rtol 1e-3\": tolerances per buffer dtype)'\n"
      "\t@echo 'make bench      validate, then time $(ITERATIONS) launches vs the captured binary'\n"
      "\t@echo 'make plan       the call run.py makes (decoded arguments, constexprs, options)'\n"
      "\t@echo 'make configs    the autotuner configs recorded at capture time'\n"
      "\t@echo 'make replay     the captured binary itself through kerncap-replay validate'\n"
      "\t@echo 'make clean      remove __pycache__'\n"
      "\t@echo 'Other configs:  $(PYTHON) run.py --config '\\''{\"num_warps\": 8}'\\'' [--grid X,Y,Z]'\n"
      "\t@echo '                $(PYTHON) run.py --candidate N'\n"
      "\n"
      "run:\n"
      "\t$(PYTHON) run.py --no-validate $(RUN_FLAGS)\n"
      "\n"
      "validate:\n"
      "\t$(PYTHON) run.py $(VALIDATE_FLAGS)\n"
      "\n"
      "bench:\n"
      "\t$(PYTHON) run.py --bench $(ITERATIONS) $(BENCH_FLAGS)\n"
      "\n"
      "plan:\n"
      "\t$(PYTHON) run.py --dry-run\n"
      "\n"
      "configs:\n"
      "\t$(PYTHON) run.py --list-configs\n"
      "\n"
      "replay:\n"
      "\t$(KERNCAP_REPLAY) validate capture.kcap\n"
      "\n"
      "clean:\n"
      "\trm -rf __pycache__\n");
}

std::string TritonReadme(const v1::CaptureManifest& m, const std::string& fn_name,
                         const json& section) {
  const json& v = section["variant"];
  std::string cfg;
  for (const auto& [k, val] : section["constexprs"].items()) {
    absl::StrAppend(&cfg, cfg.empty() ? "" : ", ", k, "=", val.dump());
  }
  for (const auto& [k, val] : section["launch_options"].items()) {
    absl::StrAppend(&cfg, cfg.empty() ? "" : ", ", k, "=", val.dump());
  }
  return absl::StrCat(
      "# Triton reproducer: ", fn_name, "\n\n",
      "Capture ", m.capture_id(), " of the Triton kernel `", fn_name, "` (",
      section["captured_binary"].value("format", "cubin"), ", ",
      v.value("triton_version", "Triton ?"), "), generated by `kerncapctl repro`.\n",
      "Configuration pinned from the captured variant (selected by ",
      v.value("selected_by", "?"), "): ", cfg, "; grid ", section["grid"].dump(), ".\n\n",
      "| file | what |\n|---|---|\n"
      "| `kernel.py` | the kernel's source: edit it, then rerun |\n"
      "| `deps/` | helpers kernel.py imports from the application's other modules (if any) |\n"
      "| `run.py` | restores the capture, launches `kernel.py` with the captured configuration, "
      "validates, times (`python3 run.py --help`) |\n"
      "| `kerncap.json` | the capture, the variant, the parameter mapping (`triton` section) |\n"
      "| `capture.kcap` | the captured memory, arguments and code object |\n"
      "| `code/` | the captured binary and its disassembly |\n"
      "| `kerncap_replay.py` | Python binding of the replay library |\n\n"
      "Needs: Python 3 with torch and triton, a GPU of the captured architecture, and\n"
      "`libkerncap_replay.so`: `export KERNCAP_REPLAY_LIB=/path/to/libkerncap_replay.so`, or put\n"
      "the folder holding `kerncap-replay` on `PATH` (the library is in `../lib` next to it).\n\n"
      "```\n"
      "python3 run.py                 # launch, same binary?, validate every buffer (exact)\n"
      "python3 run.py --rtol 1e-3     # tolerances, per buffer dtype from the signature\n"
      "python3 run.py --bench 100     # kernel.py's binary vs the captured one (replay library)\n"
      "python3 run.py --config '{\"num_warps\": 8}'        # another configuration\n"
      "python3 run.py --config '{\"BLOCK_M\": 64}' --grid 32,12,1\n"
      "python3 run.py --candidate 1   # one of the autotuner's recorded configs (make configs)\n"
      "python3 run.py --dry-run       # the call, decoded (no GPU)\n"
      "make help\n"
      "```\n\n"
      "A different block size usually needs a different grid: pass `--grid`, or edit\n"
      "`grid(captured_grid, config)` at the top of `run.py`. Exit status: 0 pass,\n"
      "1 validation failed (the differing buffers are named), 2 usage, 3 replay error,\n"
      "4 refused: the unchanged kernel.py did not rebuild the captured binary (the causes are\n"
      "named; `--allow-other-binary` validates it anyway). `deps/` holds what kernel.py imports\n"
      "from the application's other modules; run.py uses it, not an installed package.\n");
}

// Triton's global and profile scratch: on CUDA the two parameters after the
// function's own (Triton 3.x; an older Triton passes only the global one).
// The captured pointers are what run.py hands Triton's allocators, so that
// the kernel writes its workspace (device-side TMA descriptors...) where the
// captured launch did; size_per_program from the variant's options.
json ScratchOf(const v1::CaptureManifest& m, const ordered_json& variant, int first) {
  json out = json::object();
  if (m.kernel().platform() != v1::PLATFORM_CUDA) return out;
  const ordered_json empty = ordered_json::object();
  const ordered_json& opts =
      variant.contains("options") && variant["options"].is_object() ? variant["options"] : empty;
  const std::string& blob = m.argument_blob();
  const char* kinds[] = {"global", "profile"};
  for (int k = 0; k < 2 && first + k < m.arguments_size(); ++k) {
    const v1::Argument& a = m.arguments(first + k);
    if (a.size() != 8 || a.kind() == v1::ARG_HIDDEN) break;
    const uint64_t va = Word(blob, a.offset());
    const int region = RegionOf(m, va);
    json e = {{"kernel_arg", first + k},
              {"captured", Hex(va)},
              {"region", region >= 0 ? json(region) : json(nullptr)}};
    const std::string size_key = absl::StrCat(kinds[k], "_scratch_size");
    const std::string align_key = absl::StrCat(kinds[k], "_scratch_align");
    if (opts.contains(size_key) && opts[size_key].is_number_integer()) {
      e["size_per_program"] = opts[size_key].get<int64_t>();
    }
    if (opts.contains(align_key) && opts[align_key].is_number_integer()) {
      e["align"] = opts[align_key].get<int64_t>();
    }
    out[kinds[k]] = std::move(e);
  }
  return out;
}

}  // namespace

bool HasTritonMetadata(const v1::CaptureManifest& m) {
  const std::string& text = m.kernel().jit_metadata_json();
  if (text.empty() || !absl::StrContains(text, kTritonJitSchema)) return false;
  json doc = json::parse(text, nullptr, false);
  return doc.is_object() && doc.value("schema", "") == kTritonJitSchema;
}

absl::StatusOr<TritonParameterMap> MapTritonParameters(const v1::CaptureManifest& m,
                                                       const ordered_json& variant,
                                                       const ordered_json& function) {
  if (!variant.contains("signature") || !variant["signature"].is_object()) {
    return NoMetadata(m, "the variant records no signature");
  }
  const ordered_json& sig = variant["signature"];
  const ordered_json empty = ordered_json::object();
  const ordered_json& constexprs =
      variant.contains("constexprs") && variant["constexprs"].is_object() ? variant["constexprs"]
                                                                          : empty;
  // Parameter order and which are declared tl.constexpr: the function's
  // params when recorded, else the signature's order.
  std::vector<std::pair<std::string, bool>> order;
  if (function.is_object() && function.contains("params") && function["params"].is_array()) {
    for (const ordered_json& p : function["params"]) {
      order.emplace_back(p.value("name", ""), p.value("constexpr", false));
    }
  } else {
    for (const auto& [k, t] : sig.items()) {
      order.emplace_back(k, t.is_string() && t.get<std::string>() == "constexpr" &&
                                constexprs.contains(k));
    }
  }
  Cursor c{m};
  TritonParameterMap out;
  out.parameters = json::array();
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& [name, declared] = order[i];
    if (!sig.contains(name)) {
      if (declared) {  // a constexpr the signature left out
        json p = {{"name", name}, {"index", i}, {"type", "constexpr"}, {"kind", "constexpr"},
                  {"constexpr_declared", true}};
        if (constexprs.contains(name)) p["value"] = ToJson(constexprs[name]);
        out.parameters.push_back(std::move(p));
        continue;
      }
      return Mismatch(m, absl::StrCat("the signature has no entry for parameter ", name));
    }
    KC_ASSIGN_OR_RETURN(json p, MapOne(c, name, sig[name], constexprs, declared));
    p["index"] = i;
    out.parameters.push_back(std::move(p));
  }
  const int extra = m.arguments_size() - c.used;
  out.kernel_params = {{"captured", m.arguments_size()},
                       {"used", c.used},
                       {"trailing_extra", extra}};
  if (extra > 0) {
    out.kernel_params["note"] = absl::StrCat(
        "the kernel's last ", extra,
        " parameter(s) are not arguments of the Python function (Triton's global/profile scratch "
        "pointers, HSA hidden arguments): the JIT passes them itself");
  }
  return out;
}

absl::StatusOr<TritonProjectFiles> WriteTritonProject(const TritonInputs& in,
                                                      ProjectStage& stage) {
  const v1::CaptureManifest& m = *in.capture;
  KC_ASSIGN_OR_RETURN(ordered_json doc, ParseDocument(m));
  KC_ASSIGN_OR_RETURN(const ordered_json* selected, SelectVariant(doc, m, in.code_sha256));
  const ordered_json& variant = *selected;
  KC_RETURN_IF_ERROR(CheckGeometry(m, variant));
  TritonProjectFiles out;
  const ordered_json empty = ordered_json::object();
  const std::string fkey = variant.value("function", "");
  const ordered_json& function =
      doc.contains("functions") && doc["functions"].is_object() &&
              doc["functions"].contains(fkey)
          ? doc["functions"][fkey]
          : empty;
  std::string fn_name = function.value("name", "");
  if (fn_name.empty()) fn_name = variant.value("name", doc.value("kernel_name", ""));
  static const std::regex kIdent(R"(^[A-Za-z_][A-Za-z0-9_]*$)");
  if (!std::regex_match(fn_name, kIdent)) {
    return NoMetadata(m, absl::StrCat("the kernel's function name \"", fn_name,
                                      "\" is not a Python identifier"));
  }
  KC_ASSIGN_OR_RETURN(TritonParameterMap params, MapTritonParameters(m, variant, function));

  // kernel.py
  std::string module_file = function.value("file", "");
  if (module_file.empty() || !FileExists(module_file)) {
    std::string alt = function.value("inductor_file", "");
    if (alt.empty() && doc.contains("inductor") && doc["inductor"].is_object()) {
      alt = doc["inductor"].value("file", "");
    }
    if (!alt.empty()) module_file = alt;
  }
  KC_ASSIGN_OR_RETURN(KernelSource ks, SlicedSource(m, doc, function, fn_name, module_file,
                                                    in.python3, &out.warnings));
  ks.info["file"] = "kernel.py";
  ks.info["module_file"] = module_file;
  // run.py tells an edited kernel.py (a different binary is expected) from
  // the generated one (the captured binary is expected) by this digest.
  ks.info["sha256"] = Sha256(ks.text).ToHex();
  if (ks.info["origin"] == "recorded_source") {
    out.warnings.push_back("kernel.py: " + ks.info["note"].get<std::string>());
  } else if (!ks.info.value("note", "").empty()) {
    out.warnings.push_back("kernel.py: " + ks.info["note"].get<std::string>());
  }
  KC_RETURN_IF_ERROR(stage.WriteFile("kernel.py", ks.text));
  for (const ProjectModule& pm : ks.modules) {
    KC_RETURN_IF_ERROR(stage.WriteFile(pm.path, pm.text));
  }

  // Options.
  json launch_options = json::object();
  for (const char* k : {"num_warps", "num_stages", "num_ctas", "maxnreg"}) {
    if (variant.contains(k) && !variant[k].is_null()) launch_options[k] = ToJson(variant[k]);
  }
  json compile_options = json::object();
  if (variant.contains("options") && variant["options"].is_object()) {
    for (const auto& [k, v] : variant["options"].items()) {
      if (v.is_null() || DerivedOption(k) || launch_options.contains(k)) continue;
      compile_options[k] = ToJson(v);
    }
  }
  json from_inductor = json::array();
  const json& dec = ks.inductor_decorator;
  if (dec.is_object()) {
    // What Inductor passes to triton.compile besides the config (torch's
    // CachingAutotuner._create_compile_options): debug from inductor_meta,
    // sanitize_overflow off, the fusion/launch flags of triton_meta.
    const json im = dec.value("inductor_meta", json::object());
    const json tm = dec.value("triton_meta", json::object());
    json derived = json::object();
    derived["debug"] =
        im.value("assert_indirect_indexing", true) && !im.value("is_hip", false);
    derived["sanitize_overflow"] = false;
    for (const char* k : {"enable_fp_fusion", "launch_pdl", "launch_cooperative_grid"}) {
      if (tm.contains(k)) derived[k] = tm[k];
    }
    for (const auto& [k, v] : derived.items()) {
      if (compile_options.contains(k)) continue;
      compile_options[k] = v;
      from_inductor.push_back(k);
    }
  }

  json section;
  section["schema"] = kTritonJitSchema;
  section["kernel_name"] = doc.value("kernel_name", "");
  if (doc.contains("producer")) section["producer"] = ToJson(doc["producer"]);
  json v = {{"id", variant.value("id", "")}, {"selected_by", "code_object_digest"}};
  for (const char* k : {"binary", "triton_version", "triton_hash", "target", "num_warps",
                        "num_stages", "num_ctas", "maxnreg", "shared", "config", "config_index",
                        "via", "compiled_during", "cache_hit"}) {
    if (variant.contains(k)) v[k] = ToJson(variant[k]);
  }
  section["variant"] = v;
  section["captured_binary"] = {
      {"file", in.code_file}, {"format", in.code_format}, {"sha256", in.code_sha256}};
  if (!in.ptxas_release.empty()) {
    // What built it, from its own ELF note: run.py rebuilds with a ptxas of
    // this release even when the recorded one differs (a warm-cache binary).
    section["captured_binary"]["ptxas"] = {{"release", in.ptxas_release},
                                           {"version_line", in.ptxas_version_line}};
  }
  json fn = {{"name", fn_name}};
  for (const char* k : {"qualname", "module", "file", "inductor_file", "first_line",
                        "starting_line", "source_sha256", "source_bytes", "source_truncated",
                        "params"}) {
    if (function.contains(k)) fn[k] = ToJson(function[k]);
  }
  section["function"] = fn;
  for (const char* k : {"signature", "constexprs", "specialization"}) {
    section[k] = variant.contains(k) ? ToJson(variant[k]) : json::object();
  }
  // What the application's compiler used besides source and options (the
  // ptxas, the environment in Triton's cache key): run.py rebuilds with it.
  section["build"] = variant.contains("build") && variant["build"].is_object()
                         ? ToJson(variant["build"])
                         : json(nullptr);
  section["launch_options"] = launch_options;
  section["compile_options"] = compile_options;
  section["options_from_inductor"] = from_inductor;
  section["config"] = variant.contains("config") ? ToJson(variant["config"]) : json(nullptr);
  if (doc.contains("autotune") && doc["autotune"].is_object()) {
    json at;
    for (const char* k : {"kind", "key_args", "configs", "chosen", "chosen_index",
                          "chosen_for_key", "heuristics", "reset_to_zero", "restore_value",
                          "pruned"}) {
      if (doc["autotune"].contains(k)) at[k] = ToJson(doc["autotune"][k]);
    }
    section["autotune"] = at;
  } else {
    section["autotune"] = nullptr;
  }
  section["inductor"] = doc.contains("inductor") ? ToJson(doc["inductor"]) : json(nullptr);
  if (dec.is_object()) section["inductor_decorator"] = dec;
  section["parameters"] = params.parameters;
  section["kernel_params"] = params.kernel_params;
  section["scratch"] = ScratchOf(m, variant, params.kernel_params.value("used", 0));
  // The tensors' shapes and the scalars of the launch that compiled the
  // variant: run.py's buffer extents when the captured scalars are these.
  section["compile_args"] = variant.contains("compile_args") && variant["compile_args"].is_object()
                                ? ToJson(variant["compile_args"])
                                : json(nullptr);
  section["kernel_source"] = ks.info;
  const bool have_binding = embedded::kReplayBindingPySize > 0;
  section["binding"] = {{"file", "kerncap_replay.py"}, {"embedded", have_binding}};
  json grid = json::array();
  for (uint32_t g : m.launch().grid()) grid.push_back(g);
  section["grid"] = grid;
  section["device_ordinal"] = m.device().ordinal();
  if (doc.contains("truncated")) section["metadata_truncated"] = ToJson(doc["truncated"]);

  // The other files.
  KC_RETURN_IF_ERROR(
      stage.WriteFile("run.py", Embedded(embedded::kRunPy, embedded::kRunPySize), 0755));
  if (have_binding) {
    KC_RETURN_IF_ERROR(stage.WriteFile(
        "kerncap_replay.py",
        Embedded(embedded::kReplayBindingPy, embedded::kReplayBindingPySize)));
  } else {
    out.warnings.push_back(
        "this kerncap was built without the replay library's Python binding "
        "(reproducer/replay/capi/kerncap_replay.py): copy it into the project before running "
        "run.py");
  }
  std::string arch = m.device().arch();
  if (v.contains("target") && v["target"].is_object()) arch = v["target"].value("name", arch);
  const std::string title =
      absl::StrCat("Triton reproducer of ", fn_name, " (capture ", m.capture_id(), ", ", arch, ")");
  KC_RETURN_IF_ERROR(stage.WriteFile("Makefile", TritonMakefile(title)));
  KC_RETURN_IF_ERROR(stage.WriteFile("README.md", TritonReadme(m, fn_name, section)));
  out.section = std::move(section);
  return out;
}

}  // namespace kerncap::repro
