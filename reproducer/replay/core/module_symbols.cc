#include "reproducer/replay/core/module_symbols.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cuda/cubin_elf.h"
#include "common/cuda/symbol_identity.h"

namespace kerncap::replay {
namespace {

constexpr char kFatbinMagic[] = "\x50\xed\x55\xba";  // 0xBA55ED50, little-endian
constexpr char kElfMagic[] = "\x7f" "ELF";

void AddUnique(std::vector<std::string>* v, std::string s) {
  if (std::find(v->begin(), v->end(), s) == v->end()) v->push_back(std::move(s));
}

void AddCubin(const cubin::CubinInfo& info, ModuleSymbols* out) {
  for (const cubin::CubinVariable& v : info.variables) AddUnique(&out->variables, v.name);
  for (const std::string& k : info.kernels) AddUnique(&out->kernels, k);
}

// PTX text without comments.
std::string StripPtxComments(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "//") == 0) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (text.compare(i, 2, "/*") == 0) {
      const size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 2;
      out.push_back(' ');
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

std::vector<std::string> Tokens(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

// An identifier at the start of `token` (up to '(', '[', '=', ',', ';').
std::string Identifier(std::string_view token) {
  const size_t end = token.find_first_of("([=,;");
  return std::string(token.substr(0, end));
}

// One module-scope PTX statement (its head; brace contents dropped).
void ReadPtxStatement(std::string_view statement, ModuleSymbols* out) {
  const std::vector<std::string> t = Tokens(statement);
  size_t i = 0;
  bool external = false;
  while (i < t.size() && (t[i] == ".visible" || t[i] == ".extern" || t[i] == ".weak" ||
                          t[i] == ".common")) {
    external |= t[i] == ".extern";
    ++i;
  }
  if (i >= t.size()) return;
  if (t[i] == ".entry") {
    if (i + 1 < t.size()) {
      const std::string name = Identifier(t[i + 1]);
      if (!name.empty()) AddUnique(&out->kernels, name);
    }
    return;
  }
  if ((t[i] != ".global" && t[i] != ".const") || external) return;
  for (++i; i < t.size(); ++i) {
    const std::string& tok = t[i];
    if (tok == ".align") {
      ++i;  // its operand
      continue;
    }
    if (tok == ".texref" || tok == ".samplerref" || tok == ".surfref") return;  // not variables
    if (tok.empty() || tok[0] == '.') continue;  // types, vector widths, attributes
    const std::string name = Identifier(tok);
    if (!name.empty()) AddUnique(&out->variables, name);
    return;
  }
}

void ReadPtx(std::string_view text, ModuleSymbols* out) {
  const std::string s = StripPtxComments(text);
  std::string head;  // the statement so far, at brace depth 0
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '{') {
      ++depth;
      continue;
    }
    if (c == '}') {
      if (depth > 0) --depth;
      if (depth == 0) {
        // A function body ends its statement; an initializer is followed by ';'.
        size_t j = i + 1;
        while (j < s.size() && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r')) ++j;
        if (j >= s.size() || (s[j] != ';' && s[j] != ',')) {
          ReadPtxStatement(head, out);
          head.clear();
        }
      }
      continue;
    }
    if (depth > 0) continue;
    if (c == '\n') {
      // .version, .target, .address_size and .file take a line, no ';'.
      const std::vector<std::string> t = Tokens(head);
      if (!t.empty() && (t[0] == ".version" || t[0] == ".target" || t[0] == ".address_size" ||
                         t[0] == ".file")) {
        head.clear();
        continue;
      }
    }
    if (c == ';') {
      ReadPtxStatement(head, out);
      head.clear();
      continue;
    }
    head.push_back(c);
  }
}

bool LooksLikePtx(std::string_view image) {
  return image.find(".version") != std::string_view::npos &&
         image.find(".target") != std::string_view::npos;
}

std::string Quoted(const std::vector<std::string>& names, size_t max) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < names.size() && i < max; ++i) shown.push_back(absl::StrCat("'", names[i], "'"));
  std::string s = absl::StrJoin(shown, ", ");
  if (names.size() > max) absl::StrAppend(&s, " and ", names.size() - max, " more");
  return s;
}

}  // namespace

ModuleSymbols ListModuleSymbols(std::string_view image) {
  ModuleSymbols out;
  if (cubin::IsElf(image)) {
    out.format = "cubin";
    auto info = cubin::ParseCubin(image);
    if (info.ok()) {
      AddCubin(*info, &out);
      out.listed = true;
    }
    return out;
  }
  if (image.size() >= 4 && std::memcmp(image.data(), kFatbinMagic, 4) == 0) {
    // The cubins inside, when stored uncompressed (each a complete ELF: the
    // parser bounds everything by the bytes from its start on).
    out.format = "fatbin";
    for (size_t at = image.find(std::string_view(kElfMagic, 4)); at != std::string_view::npos;
         at = image.find(std::string_view(kElfMagic, 4), at + 4)) {
      auto info = cubin::ParseCubin(image.substr(at));
      if (!info.ok()) continue;
      AddCubin(*info, &out);
      out.listed = true;
    }
    return out;
  }
  if (LooksLikePtx(image)) {
    out.format = "ptx";
    const size_t nul = image.find('\0');
    ReadPtx(image.substr(0, nul), &out);
    out.listed = true;
    return out;
  }
  out.format = "unknown";
  return out;
}

std::vector<VariableMatch> MatchModuleVariables(const std::vector<CapturedVariable>& captured,
                                                const ModuleSymbols& loaded,
                                                const SymbolSizeLookup& size_of) {
  std::vector<VariableMatch> out(captured.size());
  std::vector<bool> decided(captured.size(), false);
  std::set<std::string> taken;
  auto size_problem = [](uint64_t here, uint64_t there) {
    return absl::StrCat("is ", here, " bytes in the loaded code object, ", there, " captured");
  };
  // 1. The exact symbol.
  for (size_t i = 0; i < captured.size(); ++i) {
    const CapturedVariable& c = captured[i];
    out[i].region = c.region;
    out[i].captured = c.name;
    std::optional<uint64_t> size = size_of(c.name);
    if (!size) continue;
    decided[i] = true;
    if (*size != c.size) {
      out[i].problem = size_problem(*size, c.size);
      continue;
    }
    out[i].symbol = c.name;
    out[i].how = "exact";
    taken.insert(c.name);
  }
  // 2./3. By identity, unique on both sides.
  using KeyFn = std::string (*)(const std::string&);
  const std::pair<KeyFn, const char*> steps[] = {
      {[](const std::string& s) { return cubin::StableSymbolName(s); }, "stable name"},
      {[](const std::string& s) { return cubin::RdcIndependentName(cubin::StableSymbolName(s)); },
       "stable name (-rdc independent)"},
  };
  if (loaded.listed) {
    for (const auto& [key, how] : steps) {
      if (std::all_of(decided.begin(), decided.end(), [](bool d) { return d; })) break;
      std::map<std::string, size_t> captured_count;
      for (const CapturedVariable& c : captured) ++captured_count[key(c.name)];
      std::map<std::string, std::vector<std::string>> by_key;
      for (const std::string& v : loaded.variables) by_key[key(v)].push_back(v);
      for (size_t i = 0; i < captured.size(); ++i) {
        if (decided[i]) continue;
        const std::string k = key(captured[i].name);
        auto it = by_key.find(k);
        if (it == by_key.end()) continue;
        std::vector<std::string> candidates;
        for (const std::string& v : it->second) {
          if (!taken.count(v)) candidates.push_back(v);
        }
        if (candidates.empty()) continue;
        if (captured_count[k] > 1) {
          out[i].problem = absl::StrCat("ambiguous: ", captured_count[k],
                                        " captured variables share its stable name '", k, "'");
          continue;
        }
        if (candidates.size() > 1) {
          out[i].problem = absl::StrCat("ambiguous: ", candidates.size(),
                                        " variables of the loaded code object share its stable "
                                        "name '", k, "' (", Quoted(candidates, 4), ")");
          continue;
        }
        std::optional<uint64_t> size = size_of(candidates[0]);
        decided[i] = true;
        out[i].problem.clear();
        if (!size) {
          out[i].problem = absl::StrCat("'", candidates[0], "' (its match by ", how,
                                        ") is listed in the image but the driver does not find it");
          continue;
        }
        if (*size != captured[i].size) {
          out[i].problem = absl::StrCat("its match '", candidates[0], "' (", how, ") ",
                                        size_problem(*size, captured[i].size));
          continue;
        }
        out[i].symbol = candidates[0];
        out[i].how = how;
        taken.insert(candidates[0]);
      }
    }
  }
  for (size_t i = 0; i < captured.size(); ++i) {
    if (out[i].matched() || !out[i].problem.empty()) continue;
    const std::string stable = cubin::StableSymbolName(captured[i].name);
    out[i].problem = absl::StrCat("not in the loaded code object",
                                  stable != captured[i].name
                                      ? absl::StrCat(" (neither by name nor by its stable name '",
                                                     stable, "')")
                                      : "");
    out[i].absent = loaded.listed;
    if (!loaded.listed) {
      absl::StrAppend(&out[i].problem, "; the ", loaded.format,
                      " image's symbols cannot be listed here, so a variable renamed by "
                      "recompiling cannot be matched");
    }
  }
  return out;
}

std::string DescribeRenamedVariables(const std::vector<VariableMatch>& matches,
                                     const std::string& where) {
  std::vector<std::string> shown;
  size_t renamed = 0;
  for (const VariableMatch& v : matches) {
    if (!v.matched() || v.how == "exact") continue;
    if (++renamed <= 3) shown.push_back(absl::StrCat("'", v.captured, "' -> '", v.symbol, "'"));
  }
  if (renamed == 0) return "";
  std::string out = absl::StrCat(renamed, " module variable(s) have other names in ", where,
                                 " (internal linkage: nvcc's per-compile uniquifier) and were "
                                 "matched by their stable names, restored and compared: ",
                                 absl::StrJoin(shown, ", "));
  if (renamed > shown.size()) absl::StrAppend(&out, " and ", renamed - shown.size(), " more");
  return out;
}

absl::StatusOr<std::string> MatchKernel(const std::string& mangled, const ModuleSymbols& loaded) {
  if (!loaded.listed) {
    return absl::NotFoundError(absl::StrCat("no kernel '", mangled, "', and the ", loaded.format,
                                            " image's symbols cannot be listed to look for it "
                                            "under its stable name"));
  }
  using KeyFn = std::string (*)(const std::string&);
  const KeyFn keys[] = {
      [](const std::string& s) { return cubin::StableSymbolName(s); },
      [](const std::string& s) { return cubin::RdcIndependentName(cubin::StableSymbolName(s)); },
  };
  for (KeyFn key : keys) {
    const std::string k = key(mangled);
    std::vector<std::string> candidates;
    for (const std::string& f : loaded.kernels) {
      if (key(f) == k) candidates.push_back(f);
    }
    if (candidates.size() == 1) return candidates[0];
    if (candidates.size() > 1) {
      return absl::NotFoundError(absl::StrCat("no kernel '", mangled, "'; ", candidates.size(),
                                              " kernels share its stable name '", k, "' (",
                                              Quoted(candidates, 4), ")"));
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "no kernel '", mangled, "' (nor one of its stable name '", cubin::StableSymbolName(mangled),
      "'); the code object has ",
      loaded.kernels.empty() ? std::string("no kernels") : Quoted(loaded.kernels, 8)));
}

}  // namespace kerncap::replay
