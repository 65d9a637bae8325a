#include "reproducer/generator/amdgpu_asm.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kerncap::repro {
namespace {

constexpr absl::string_view kBegin = ";;kerncap-begin ";
constexpr absl::string_view kEnd = ";;kerncap-end ";
constexpr absl::string_view kModuleHash = "; kerncap-module: fnv1a64=";

// The statement of an assembly line: comment (`;`, `//`) cut, trimmed.
absl::string_view Statement(absl::string_view line) {
  size_t cut = line.find(';');
  size_t slash = line.find("//");
  if (slash != absl::string_view::npos && slash < cut) cut = slash;
  if (cut != absl::string_view::npos) line = line.substr(0, cut);
  return absl::StripAsciiWhitespace(line);
}

struct Directive {
  absl::string_view name;  // ".size"; empty when the line is not a directive
  absl::string_view rest;  // operands, trimmed
};

Directive DirectiveOf(absl::string_view line) {
  absl::string_view s = Statement(line);
  Directive d;
  if (s.empty() || s[0] != '.') return d;
  size_t sp = s.find_first_of(" \t");
  d.name = s.substr(0, sp);
  if (sp != absl::string_view::npos) d.rest = absl::StripAsciiWhitespace(s.substr(sp));
  return d;
}

absl::string_view FirstOperand(absl::string_view rest) {
  return absl::StripAsciiWhitespace(rest.substr(0, rest.find(',')));
}

// `<symbol>:` in column 0, then nothing but blanks or a comment.
bool IsLabelOf(absl::string_view line, absl::string_view symbol) {
  if (!absl::StartsWith(line, symbol)) return false;
  absl::string_view after = line.substr(symbol.size());
  if (!absl::ConsumePrefix(&after, ":")) return false;
  return after.empty() || after[0] == ' ' || after[0] == '\t' || after[0] == ';';
}

bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$' ||
         c == '@';
}

size_t Indent(absl::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  return i;
}

bool IsBlank(absl::string_view line) { return absl::StripAsciiWhitespace(line).empty(); }

// The kernel's item of the `.amdgpu_metadata` YAML, [begin, end); nullopt
// when the module has none.
std::optional<AsmPart> MetadataItem(const std::vector<std::string>& lines,
                                    const std::string& symbol) {
  size_t m0 = lines.size(), m1 = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view name = DirectiveOf(lines[i]).name;
    if (name == ".amdgpu_metadata") m0 = i;
    if (name == ".end_amdgpu_metadata" && m0 < lines.size()) {
      m1 = i;
      break;
    }
  }
  if (m1 == lines.size()) return std::nullopt;
  for (size_t i = m0 + 1; i < m1; ++i) {
    absl::string_view key = absl::StripLeadingAsciiWhitespace(lines[i]);
    const bool dash = absl::ConsumePrefix(&key, "- ");
    key = absl::StripLeadingAsciiWhitespace(key);
    if (!absl::ConsumePrefix(&key, ".symbol:")) continue;
    std::string value(absl::StripAsciiWhitespace(key));
    if (value.size() >= 2 && (value[0] == '\'' || value[0] == '"') && value.back() == value[0]) {
      value = value.substr(1, value.size() - 2);
    }
    if (value != symbol + ".kd") continue;
    // The item's `- ` line: this one, or the nearest one above indented two
    // less than the keys.
    size_t start = i;
    if (!dash) {
      const size_t key_indent = Indent(lines[i]);
      if (key_indent < 2) return std::nullopt;
      start = m0;
      for (size_t k = i; k-- > m0 + 1;) {
        absl::string_view l = lines[k];
        if (Indent(l) == key_indent - 2 && absl::StartsWith(l.substr(key_indent - 2), "- ")) {
          start = k;
          break;
        }
        if (!IsBlank(l) && Indent(l) < key_indent) break;
      }
      if (start == m0) return std::nullopt;
    }
    const size_t item_indent = Indent(lines[start]);
    size_t end = start + 1;
    while (end < m1 && (IsBlank(lines[end]) || Indent(lines[end]) > item_indent)) ++end;
    return AsmPart{"metadata", start, end};
  }
  return std::nullopt;
}

struct Block {
  std::string kind;
  std::string symbol;
  size_t first_line = 0;  // 1-based line of the first content line
  std::vector<std::string> lines;
};

struct Edited {
  std::vector<Block> blocks;
  std::string module_hash;  // 16 hex digits, or empty
};

absl::Status EditError(const std::string& file, size_t line, const std::string& what) {
  return absl::InvalidArgumentError(
      line == 0 ? absl::StrCat(file, ": ", what) : absl::StrCat(file, ":", line, ": ", what));
}

// Marker line -> (kind, symbol); false when `line` is not one of `prefix`.
bool ParseMarker(absl::string_view line, absl::string_view prefix, std::string* kind,
                 std::string* symbol) {
  if (!absl::ConsumePrefix(&line, prefix)) return false;
  std::vector<absl::string_view> words =
      absl::StrSplit(absl::StripAsciiWhitespace(line), absl::ByAnyChar(" \t"), absl::SkipEmpty());
  *kind = words.size() > 0 ? std::string(words[0]) : "";
  *symbol = words.size() > 1 ? std::string(words[1]) : "";
  return true;
}

absl::StatusOr<Edited> ParseEdited(absl::string_view text, const std::string& file) {
  Edited e;
  std::vector<std::string> lines = SplitLines(text);
  std::optional<Block> open;
  size_t open_line = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    std::string kind, symbol;
    if (ParseMarker(line, kBegin, &kind, &symbol)) {
      if (open.has_value()) {
        return EditError(file, i + 1,
                         absl::StrCat(absl::StripTrailingAsciiWhitespace(line), " inside the ",
                                      open->kind, " block opened at line ", open_line,
                                      ": its ;;kerncap-end ", open->kind, " ", open->symbol,
                                      " marker is missing"));
      }
      if (kind.empty() || symbol.empty()) {
        return EditError(file, i + 1, "marker needs a kind and a symbol: ;;kerncap-begin <kind> <symbol>");
      }
      open = Block{kind, symbol, i + 2, {}};
      open_line = i + 1;
      continue;
    }
    if (ParseMarker(line, kEnd, &kind, &symbol)) {
      if (!open.has_value()) {
        return EditError(file, i + 1,
                         absl::StrCat(absl::StripTrailingAsciiWhitespace(line),
                                      " without a ;;kerncap-begin ", kind, " ", symbol,
                                      " above it"));
      }
      if (kind != open->kind || symbol != open->symbol) {
        return EditError(file, i + 1,
                         absl::StrCat(absl::StripTrailingAsciiWhitespace(line), " closes the ",
                                      open->kind, " ", open->symbol, " block opened at line ",
                                      open_line, " (expected ;;kerncap-end ", open->kind, " ",
                                      open->symbol, ")"));
      }
      e.blocks.push_back(std::move(*open));
      open.reset();
      continue;
    }
    if (open.has_value()) {
      open->lines.push_back(line);
    } else if (absl::StartsWith(line, kModuleHash)) {
      e.module_hash = std::string(absl::StripAsciiWhitespace(line.substr(kModuleHash.size())));
    }
  }
  if (open.has_value()) {
    return EditError(file, open_line,
                     absl::StrCat(";;kerncap-begin ", open->kind, " ", open->symbol,
                                  " has no ;;kerncap-end ", open->kind, " ", open->symbol,
                                  " marker after it"));
  }
  return e;
}

std::string Hex64(uint64_t v) { return absl::StrFormat("%016x", v); }

// `.amdhsa_<name> <integer>` in `lines`: its index and value.
struct IntField {
  size_t line = 0;
  int64_t value = 0;
  bool found = false;
};

IntField FindDescriptorField(const std::vector<std::string>& lines, absl::string_view name) {
  IntField f;
  for (size_t i = 0; i < lines.size(); ++i) {
    Directive d = DirectiveOf(lines[i]);
    if (d.name != name) continue;
    int64_t v;
    if (!absl::SimpleAtoi(d.rest, &v)) return f;  // an expression: the user's
    f.line = i;
    f.value = v;
    f.found = true;
    return f;
  }
  return f;
}

void SetDescriptorField(std::vector<std::string>& lines, const IntField& f, absl::string_view name,
                        int64_t value) {
  std::string& l = lines[f.line];
  size_t at = l.find(name.data(), 0, name.size());
  l = absl::StrCat(l.substr(0, at), name, " ", value);
}

// Item-level `<key>: <integer>` of a metadata block (the item's own keys,
// not those of its `.args`).
IntField FindMetadataField(const std::vector<std::string>& lines, absl::string_view key) {
  IntField f;
  if (lines.empty()) return f;
  const size_t key_indent = Indent(lines[0]) + 2;
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view l = lines[i];
    size_t ind = Indent(l);
    absl::string_view rest = l.substr(ind);
    if (absl::ConsumePrefix(&rest, "- ")) ind += 2;
    if (ind != key_indent || !absl::ConsumePrefix(&rest, key)) continue;
    if (!absl::ConsumePrefix(&rest, ":")) continue;
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &v)) return f;
    f.line = i;
    f.value = v;
    f.found = true;
    return f;
  }
  return f;
}

void SetMetadataField(std::vector<std::string>& lines, const IntField& f, int64_t value) {
  std::string& l = lines[f.line];
  size_t colon = l.find(':');
  size_t v = l.find_first_not_of(" \t", colon + 1);
  l = absl::StrCat(l.substr(0, v == std::string::npos ? colon + 2 : v), value);
}

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

// Raises the register counts of the edited blocks to what the function
// block uses; notes say what changed.
void FixRegisterCounts(std::map<std::string, Block*>& blocks, const std::string& symbol,
                       std::vector<std::string>* notes) {
  Block* fn = blocks["function"];
  Block* desc = blocks.count("descriptor") ? blocks["descriptor"] : fn;
  Block* md = blocks.count("metadata") ? blocks["metadata"] : nullptr;
  const RegisterUse use = ScanRegisters(fn->lines);
  const int64_t v = use.vgpr + 1, s = use.sgpr + 1, a = use.agpr + 1;
  auto used = [&]() {
    std::vector<std::string> u;
    if (use.vgpr >= 0) u.push_back(absl::StrCat("v", use.vgpr));
    if (use.agpr >= 0) u.push_back(absl::StrCat("a", use.agpr));
    if (use.sgpr >= 0) u.push_back(absl::StrCat("s", use.sgpr));
    return absl::StrJoin(u, ", ");
  };
  std::vector<std::string> changed;
  auto note = [&changed](absl::string_view what, int64_t from, int64_t to) {
    changed.push_back(absl::StrCat(what, " ", from, " -> ", to));
  };

  IntField nfv = FindDescriptorField(desc->lines, ".amdhsa_next_free_vgpr");
  IntField nfs = FindDescriptorField(desc->lines, ".amdhsa_next_free_sgpr");
  IntField acc = FindDescriptorField(desc->lines, ".amdhsa_accum_offset");
  int64_t new_nfv = nfv.value, new_nfs = nfs.value;
  if (nfv.found) {
    if (acc.found) {
      // gfx90a/gfx940: AGPRs follow the VGPRs at accum_offset (a multiple of 4).
      const int64_t agprs = std::max<int64_t>(0, nfv.value - acc.value);
      const int64_t new_acc = std::max(acc.value, AlignUp(v, 4));
      const int64_t new_agprs = std::max(agprs, a);
      new_nfv = new_agprs > 0 ? new_acc + new_agprs : std::max(nfv.value, v);
      new_nfv = std::max(new_nfv, nfv.value);
      if (new_acc != acc.value) {
        SetDescriptorField(desc->lines, acc, ".amdhsa_accum_offset", new_acc);
        note(".amdhsa_accum_offset", acc.value, new_acc);
      }
    } else {
      // Separate AGPR file (gfx908) or none: the larger of the two counts.
      new_nfv = std::max({nfv.value, v, a});
    }
    if (new_nfv != nfv.value) {
      SetDescriptorField(desc->lines, nfv, ".amdhsa_next_free_vgpr", new_nfv);
      note(".amdhsa_next_free_vgpr", nfv.value, new_nfv);
    }
  }
  if (nfs.found) {
    new_nfs = std::max(nfs.value, s);
    if (new_nfs != nfs.value) {
      SetDescriptorField(desc->lines, nfs, ".amdhsa_next_free_sgpr", new_nfs);
      note(".amdhsa_next_free_sgpr", nfs.value, new_nfs);
    }
  }
  if (md != nullptr) {
    IntField mv = FindMetadataField(md->lines, ".vgpr_count");
    IntField ms = FindMetadataField(md->lines, ".sgpr_count");
    IntField ma = FindMetadataField(md->lines, ".agpr_count");
    if (mv.found) {
      const int64_t want = std::max(mv.value, nfv.found ? new_nfv : std::max(v, a));
      if (want != mv.value) {
        SetMetadataField(md->lines, mv, want);
        note("metadata .vgpr_count", mv.value, want);
      }
    }
    if (ma.found && a > ma.value) {
      SetMetadataField(md->lines, ma, a);
      note("metadata .agpr_count", ma.value, a);
    }
    if (ms.found) {
      // The metadata's count includes VCC, FLAT_SCRATCH and XNACK_MASK:
      // raised by as much as the descriptor's.
      const int64_t want =
          std::max(ms.value, nfs.found ? ms.value + (new_nfs - nfs.value) : s);
      if (want != ms.value) {
        SetMetadataField(md->lines, ms, want);
        note("metadata .sgpr_count", ms.value, want);
      }
    }
  }
  if (!changed.empty()) {
    notes->push_back(absl::StrCat("the code of ", symbol, " names registers up to ", used(),
                                  ": raised ",
                                  absl::StrJoin(changed, ", ")));
  }
}

}  // namespace

std::vector<std::string> SplitLines(absl::string_view text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

uint64_t Fnv1a64(absl::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::vector<std::string> ListKernels(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& l : lines) {
    Directive d = DirectiveOf(l);
    if (d.name == ".amdhsa_kernel") out.emplace_back(FirstOperand(d.rest));
  }
  return out;
}

absl::StatusOr<std::vector<AsmPart>> LocateKernel(const std::vector<std::string>& lines,
                                                  const std::string& symbol) {
  std::vector<size_t> labels;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (IsLabelOf(lines[i], symbol)) labels.push_back(i);
  }
  const std::vector<std::string> kernels = ListKernels(lines);
  const bool is_kernel = std::find(kernels.begin(), kernels.end(), symbol) != kernels.end();
  if (labels.empty() || !is_kernel) {
    return absl::NotFoundError(absl::StrCat(
        "kernel ", symbol, " is not ", labels.empty() ? "defined" : "a kernel (no .amdhsa_kernel)",
        " in this module; its kernels: ",
        kernels.empty() ? "none" : absl::StrJoin(kernels, ", ")));
  }
  if (labels.size() > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("the label ", symbol, ": appears ", labels.size(), " times (lines ",
                     labels[0] + 1, " and ", labels[1] + 1, ")"));
  }
  const size_t label = labels[0];

  // Opening directives directly above the label, up to the section switch.
  size_t begin = label;
  for (size_t i = label; i-- > 0;) {
    Directive d = DirectiveOf(lines[i]);
    const absl::string_view op = FirstOperand(d.rest);
    if (d.name == ".text" || (d.name == ".section" && absl::StartsWith(d.rest, ".text"))) {
      begin = i;
      break;
    }
    if (d.name == ".p2align" || d.name == ".align" || d.name == ".balign" ||
        ((d.name == ".globl" || d.name == ".global" || d.name == ".protected" ||
          d.name == ".hidden" || d.name == ".weak" || d.name == ".type" || d.name == ".local" ||
          d.name == ".internal") &&
         op == symbol)) {
      begin = i;
      continue;
    }
    break;
  }

  size_t size_line = lines.size();
  for (size_t i = label + 1; i < lines.size(); ++i) {
    Directive d = DirectiveOf(lines[i]);
    if (d.name == ".size" && FirstOperand(d.rest) == symbol) {
      size_line = i;
      break;
    }
  }
  if (size_line == lines.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no `.size ", symbol, ", ...` after the label ", symbol, ": (line ",
                     label + 1, "): not clang -S output?"));
  }
  size_t end = size_line + 1;
  while (end < lines.size()) {
    absl::string_view t = absl::StripAsciiWhitespace(lines[end]);
    if (DirectiveOf(lines[end]).name == ".cfi_endproc" ||
        (absl::StartsWith(t, ";") && absl::StrContains(t, "End function"))) {
      ++end;
      continue;
    }
    break;
  }
  std::vector<AsmPart> parts = {{"function", begin, end}};

  size_t d0 = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    Directive d = DirectiveOf(lines[i]);
    if (d.name == ".amdhsa_kernel" && FirstOperand(d.rest) == symbol) {
      d0 = i;
      break;
    }
  }
  if (d0 < begin || d0 >= end) {
    size_t d1 = d0 + 1;
    while (d1 < lines.size() && DirectiveOf(lines[d1]).name != ".end_amdhsa_kernel") ++d1;
    if (d1 == lines.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat(".amdhsa_kernel ", symbol, " (line ", d0 + 1, ") has no .end_amdhsa_kernel"));
    }
    parts.push_back({"descriptor", d0, d1 + 1});
  }
  if (std::optional<AsmPart> md = MetadataItem(lines, symbol)) parts.push_back(*md);
  std::sort(parts.begin(), parts.end(),
            [](const AsmPart& x, const AsmPart& y) { return x.begin < y.begin; });
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].begin < parts[i - 1].end) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the ", parts[i - 1].kind, " and ", parts[i].kind, " parts of ", symbol, " overlap"));
    }
  }
  return parts;
}

RegisterUse ScanRegisters(const std::vector<std::string>& lines) {
  RegisterUse use;
  for (const std::string& line : lines) {
    absl::string_view s = Statement(line);
    // A label first (`name:`), then the instruction.
    size_t colon = s.find(':');
    if (colon != absl::string_view::npos) {
      bool label = colon > 0;
      for (size_t k = 0; k < colon && label; ++k) label = IsIdentChar(s[k]);
      if (label) s = absl::StripLeadingAsciiWhitespace(s.substr(colon + 1));
    }
    if (s.empty() || s[0] == '.' || s[0] == '#') continue;
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if ((c != 'v' && c != 's' && c != 'a') || (i > 0 && IsIdentChar(s[i - 1]))) continue;
      size_t j = i + 1;
      int hi = -1;
      auto digits = [&](int* out) {
        size_t k = j;
        int n = 0;
        while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])) && n < 100000) {
          n = n * 10 + (s[k] - '0');
          ++k;
        }
        if (k == j) return false;
        *out = n;
        j = k;
        return true;
      };
      auto skip_blanks = [&]() {
        while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      };
      if (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
        if (!digits(&hi) || (j < s.size() && IsIdentChar(s[j]))) continue;
      } else if (j < s.size() && s[j] == '[') {
        ++j;
        skip_blanks();
        int lo;
        if (!digits(&lo)) continue;
        skip_blanks();
        hi = lo;
        if (j < s.size() && s[j] == ':') {
          ++j;
          skip_blanks();
          if (!digits(&hi)) continue;
          skip_blanks();
        }
        if (j >= s.size() || s[j] != ']') continue;
      } else {
        continue;
      }
      int& slot = c == 'v' ? use.vgpr : c == 's' ? use.sgpr : use.agpr;
      slot = std::max(slot, hi);
      i = j;
    }
  }
  return use;
}

absl::StatusOr<std::string> ExtractKernel(absl::string_view module, const std::string& symbol,
                                          const std::string& module_name) {
  const std::vector<std::string> lines = SplitLines(module);
  absl::StatusOr<std::vector<AsmPart>> parts = LocateKernel(lines, symbol);
  if (!parts.ok()) {
    return absl::Status(parts.status().code(),
                        absl::StrCat(module_name, ": ", parts.status().message()));
  }
  std::string target = "?";
  for (const std::string& l : lines) {
    Directive d = DirectiveOf(l);
    if (d.name == ".amdgcn_target") {
      target = std::string(absl::StripPrefix(absl::StripSuffix(d.rest, "\""), "\""));
      break;
    }
  }
  std::string out = absl::StrCat(
      "; AMDGPU assembly of the kernel ", symbol, " (", target, "), cut from ", module_name,
      "\n"
      "; (clang -S of the kernel's translation unit; the module's other kernels,\n"
      "; functions and data stay there, unchanged).\n"
      ";\n"
      "; Edit it, then `make asm-build`: the lines between each ;;kerncap-begin and\n"
      "; ;;kerncap-end marker replace the kernel's original lines in ",
      module_name,
      "\n"
      "; (-> build/module.edited.s), which clang assembles and ld.lld links into\n"
      "; build/kernel.hsaco, the code object make run/validate/bench then use.\n"
      "; Keep the marker lines. Blocks:\n"
      ";   function    the kernel's code, with its descriptor (.amdhsa_kernel ...\n"
      ";               .end_amdhsa_kernel: register counts, LDS and scratch sizes, modes)\n"
      ";   descriptor  that descriptor, when clang put it outside the function\n"
      ";   metadata    the kernel's entry of the module's .amdgpu_metadata (YAML)\n"
      "; Registers: asm-build raises .amdhsa_next_free_vgpr / _sgpr, .amdhsa_accum_offset\n"
      "; and the metadata's .vgpr_count / .sgpr_count / .agpr_count to cover every v, s\n"
      "; and a register the function block names (never lowers them; they also count\n"
      "; the callees' registers). make asm-build SPLICE_FLAGS=--keep-register-counts\n"
      "; keeps yours. LDS (.amdhsa_group_segment_fixed_size), scratch and the other\n"
      "; fields are yours to keep consistent with the code.\n"
      "; Built with -g: keep the .Ltmp* / .Lfunc_* labels (the debug info refers to them).\n",
      kModuleHash, Hex64(Fnv1a64(module)), "\n");
  for (const AsmPart& p : *parts) {
    absl::StrAppend(&out, "\n", kBegin, p.kind, " ", symbol, "\n");
    for (size_t i = p.begin; i < p.end; ++i) absl::StrAppend(&out, lines[i], "\n");
    absl::StrAppend(&out, kEnd, p.kind, " ", symbol, "\n");
  }
  return out;
}

absl::StatusOr<SpliceResult> SpliceKernel(absl::string_view module, absl::string_view edited,
                                          const std::string& symbol,
                                          const SpliceOptions& options) {
  const std::string& ef = options.edited_name;
  const std::vector<std::string> lines = SplitLines(module);
  absl::StatusOr<std::vector<AsmPart>> parts = LocateKernel(lines, symbol);
  if (!parts.ok()) {
    return absl::Status(parts.status().code(),
                        absl::StrCat(options.module_name, ": ", parts.status().message()));
  }
  absl::StatusOr<Edited> e = ParseEdited(edited, ef);
  if (!e.ok()) return e.status();
  std::vector<std::string> kinds;
  for (const AsmPart& p : *parts) kinds.push_back(p.kind);
  const std::string expected = absl::StrJoin(kinds, ", ");
  if (e->blocks.empty()) {
    return EditError(ef, 0,
                     absl::StrCat("no ;;kerncap-begin / ;;kerncap-end markers (make asm writes "
                                  "them around the kernel's ",
                                  expected,
                                  " lines: keep them when editing, or start over with rm ", ef,
                                  " && make asm)"));
  }
  std::map<std::string, Block*> by_kind;
  for (Block& b : e->blocks) {
    if (b.symbol != symbol) {
      return EditError(ef, b.first_line - 1,
                       absl::StrCat("block for kernel ", b.symbol, ", but this project's kernel is ",
                                    symbol));
    }
    if (std::find(kinds.begin(), kinds.end(), b.kind) == kinds.end()) {
      return EditError(ef, b.first_line - 1,
                       absl::StrCat("unknown block kind ", b.kind, " (", options.module_name,
                                    " has these parts of ", symbol, ": ", expected, ")"));
    }
    if (by_kind.count(b.kind)) {
      return EditError(ef, b.first_line - 1, absl::StrCat("a second ", b.kind, " block"));
    }
    by_kind[b.kind] = &b;
  }
  for (const std::string& k : kinds) {
    if (!by_kind.count(k)) {
      return EditError(ef, 0,
                       absl::StrCat("the ;;kerncap-begin ", k, " ", symbol, " ... ;;kerncap-end ",
                                    k, " ", symbol, " block is missing (", options.module_name,
                                    " has these parts of ", symbol, ": ", expected, ")"));
    }
  }
  // What must survive the edit for the result to still define the kernel.
  Block* fn = by_kind["function"];
  if (std::none_of(fn->lines.begin(), fn->lines.end(),
                   [&](const std::string& l) { return IsLabelOf(l, symbol); })) {
    return EditError(ef, fn->first_line - 1,
                     absl::StrCat("the function block no longer defines the label ", symbol,
                                  ": (column 0)"));
  }
  Block* desc = by_kind.count("descriptor") ? by_kind["descriptor"] : fn;
  if (std::none_of(desc->lines.begin(), desc->lines.end(), [&](const std::string& l) {
        Directive d = DirectiveOf(l);
        return d.name == ".amdhsa_kernel" && FirstOperand(d.rest) == symbol;
      })) {
    return EditError(ef, desc->first_line - 1,
                     absl::StrCat("the ", desc->kind, " block no longer has .amdhsa_kernel ",
                                  symbol, " ... .end_amdhsa_kernel (the kernel descriptor)"));
  }

  SpliceResult r;
  const std::string hash = Hex64(Fnv1a64(module));
  if (!e->module_hash.empty() && e->module_hash != hash) {
    r.warnings.push_back(absl::StrCat(
        ef, " was cut from a different ", options.module_name,
        " (sources or flags changed and make asm rebuilt it since): its labels may not match; "
        "if assembling fails, redo the edit on a fresh copy (mv ",
        ef, " ", ef, ".old && make asm)"));
  }
  if (!options.keep_register_counts) FixRegisterCounts(by_kind, symbol, &r.notes);

  auto marker = [](size_t line, const std::string& file) {
    return absl::StrCat("# ", line, " \"", file, "\"\n");
  };
  std::string& out = r.text;
  out = marker(1, options.module_name);
  size_t next = 0;
  for (const AsmPart& p : *parts) {
    for (size_t i = next; i < p.begin; ++i) absl::StrAppend(&out, lines[i], "\n");
    const Block& b = *by_kind[p.kind];
    absl::StrAppend(&out, marker(b.first_line, ef));
    for (const std::string& l : b.lines) absl::StrAppend(&out, l, "\n");
    absl::StrAppend(&out, marker(p.end + 1, options.module_name));
    next = p.end;
  }
  for (size_t i = next; i < lines.size(); ++i) absl::StrAppend(&out, lines[i], "\n");
  return r;
}

absl::StatusOr<std::vector<std::string>> AssemblerFlags(absl::string_view module,
                                                        const std::string& fallback_arch) {
  const std::vector<std::string> lines = SplitLines(module);
  std::string cpu, version;
  for (size_t i = 0; i < lines.size(); ++i) {
    Directive d = DirectiveOf(lines[i]);
    if (d.name == ".amdgcn_target" && cpu.empty()) {
      absl::string_view id = absl::StripPrefix(absl::StripSuffix(d.rest, "\""), "\"");
      size_t dd = id.find("--");
      if (dd != absl::string_view::npos) cpu = std::string(id.substr(dd + 2));
    } else if (d.name == ".amdhsa_code_object_version") {
      version = std::string(d.rest);
    } else if (version.empty() && absl::StripAsciiWhitespace(lines[i]) == "amdhsa.version:" &&
               i + 2 < lines.size()) {
      // amdhsa.version: [1, minor] as a block list: 1.0 -> v3, 1.1 -> v4, 1.2 -> v5.
      absl::string_view major = absl::StripAsciiWhitespace(lines[i + 1]);
      absl::string_view minor = absl::StripAsciiWhitespace(lines[i + 2]);
      int mn;
      if (major == "- 1" && absl::ConsumePrefix(&minor, "- ") && absl::SimpleAtoi(minor, &mn) &&
          mn >= 0 && mn <= 2) {
        version = absl::StrCat(mn + 3);
      }
    }
  }
  if (cpu.empty()) cpu = fallback_arch;
  if (cpu.empty()) {
    return absl::FailedPreconditionError(
        "no .amdgcn_target directive in the module and no --arch: the processor is unknown");
  }
  std::vector<std::string> flags = {"-mcpu=" + cpu};
  if (!version.empty()) flags.push_back("-mcode-object-version=" + version);
  return flags;
}

}  // namespace kerncap::repro
