#include "reproducer/generator/source_locator.h"

#include <cctype>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "reproducer/generator/path_util.h"
#include "reproducer/generator/response_files.h"

namespace kerncap::repro {
namespace {

bool IsCompilable(const std::string& path) {
  static const char* const kExt[] = {".cu", ".hip", ".cpp", ".cc", ".cxx", ".c", ".C"};
  for (const char* e : kExt) {
    if (absl::EndsWith(path, e)) return true;
  }
  return false;
}

// Longest suffix of `original` (by whole components) that exists under
// `hint`; appends every candidate to *tried. Returns the remap it implies.
std::optional<PathRemap> RemapBySuffix(const std::string& original, const std::string& hint,
                                       std::vector<std::string>* tried) {
  std::vector<std::string> parts;
  for (const auto& c : std::filesystem::path(original)) {
    std::string s = c.string();
    if (s != "/" && !s.empty()) parts.push_back(s);
  }
  for (size_t start = 0; start < parts.size(); ++start) {
    std::string suffix;
    for (size_t i = start; i < parts.size(); ++i) {
      suffix += (suffix.empty() ? "" : "/") + parts[i];
    }
    std::string candidate = Normalize(suffix, hint);
    tried->push_back(candidate);
    if (FileExists(candidate)) {
      // original = FROM/suffix, candidate = hint/suffix.
      std::string from = original.substr(0, original.size() - suffix.size());
      if (from.size() > 1 && from.back() == '/') from.pop_back();
      return PathRemap{from.empty() ? "/" : from, hint};
    }
  }
  return std::nullopt;
}

void FindDatabase(const SourceLocation& loc, const LocateOptions& options,
                  std::vector<std::string>* candidates) {
  if (!options.compile_commands.empty()) {
    candidates->push_back(
        Normalize(options.compile_commands, std::filesystem::current_path().string()));
    return;
  }
  if (!options.source_dir.empty()) {
    candidates->push_back(options.source_dir + "/compile_commands.json");
    candidates->push_back(options.source_dir + "/build/compile_commands.json");
  }
  std::string dir = DirName(loc.tu);
  for (int depth = 0; depth < 12 && dir.size() > 1; ++depth) {
    candidates->push_back(dir + "/compile_commands.json");
    candidates->push_back(dir + "/build/compile_commands.json");
    dir = DirName(dir);
  }
}

}  // namespace

const char* SourceOutcomeName(SourceOutcome o) {
  switch (o) {
    case SourceOutcome::kFound:
      return "found";
    case SourceOutcome::kNoLineInfo:
      return "no_line_info";
    case SourceOutcome::kSourcesNotFound:
      return "sources_not_found";
    case SourceOutcome::kNoDwarfReader:
      return "no_dwarf_reader";
    case SourceOutcome::kNotAnObjectFile:
      return "not_an_object_file";
  }
  return "unknown";
}

const char* CompileOriginName(CompileOrigin o) {
  switch (o) {
    case CompileOrigin::kNone:
      return "none";
    case CompileOrigin::kDatabase:
      return "compile_commands";
    case CompileOrigin::kDefault:
      return "default";
  }
  return "unknown";
}

std::string PathRemap::Apply(const std::string& path) const {
  if (!IsUnder(path, from)) return path;
  std::string rel = RelativeTo(path, from);
  return rel == "." ? to : Normalize(rel, to);
}

std::vector<std::string> RemapArgv(const std::vector<std::string>& argv, const PathRemap& remap) {
  std::vector<std::string> out;
  out.reserve(argv.size());
  for (const std::string& a : argv) {
    // The absolute path inside the word starts at its first '/' that follows
    // nothing, '=' or an option prefix ("-I/x", "--inc=/x", "/x").
    size_t slash = a.find('/');
    if (slash == std::string::npos || (slash > 0 && a[0] != '-')) {
      out.push_back(a);
      continue;
    }
    std::string head = a.substr(0, slash);
    std::string path = a.substr(slash);
    out.push_back(head + remap.Apply(Normalize(path)));
  }
  return out;
}

std::string KernelIdentifier(std::string_view demangled) {
  std::string_view s = demangled;
  // The parameter list: the "(...)" that ends the name (scope names such as
  // "(anonymous namespace)" contain parentheses too).
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  size_t end = s.size();
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        end = i;
        break;
      }
    }
  }
  s = s.substr(0, end);
  // Trailing template arguments.
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (!s.empty() && s.back() == '>') {
    int d = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == '>') ++d;
      if (s[i] == '<' && --d == 0) {
        s = s.substr(0, i);
        break;
      }
    }
  }
  // The last identifier (after "::" or the return type).
  size_t start = s.size();
  while (start > 0 && (std::isalnum(static_cast<unsigned char>(s[start - 1])) || s[start - 1] == '_')) {
    --start;
  }
  return std::string(s.substr(start));
}

bool SourceDefinesKernel(std::string_view text, std::string_view identifier) {
  if (identifier.empty()) return false;
  auto is_ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t pos = text.find(identifier); pos != std::string_view::npos;
       pos = text.find(identifier, pos + 1)) {
    if (pos > 0 && is_ident(text[pos - 1])) continue;
    size_t after = pos + identifier.size();
    if (after < text.size() && is_ident(text[after])) continue;
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t')) ++after;
    if (after >= text.size() || (text[after] != '(' && text[after] != '<')) continue;
    // "kernel<<<grid, block>>>(...)" launches it.
    if (text.substr(after, 3) == "<<<") continue;
    // A definition, not a call: "__global__" appears before it in the file.
    if (text.rfind("__global__", pos) != std::string_view::npos) return true;
  }
  return false;
}

namespace {

// The file of the line table that defines the kernel, read here or through
// the hint: a compilable one when one does, else a header (a kernel
// defined in a .cuh); empty when none does (or the name is unknown).
std::string FileDefiningKernel(const LineTableInfo& lines, const LocateOptions& options) {
  const std::string id = KernelIdentifier(options.kernel_name);
  if (id.empty()) return "";
  std::string header;
  for (const std::string& f : lines.files) {
    const bool compilable = IsCompilable(f);
    if (!compilable && !header.empty()) continue;
    std::string local = FileExists(f) ? f : "";
    if (local.empty() && !options.source_dir.empty()) {
      std::vector<std::string> ignored;
      if (auto remap = RemapBySuffix(f, options.source_dir, &ignored)) local = remap->Apply(f);
    }
    if (local.empty() || IsSystemPath(local)) continue;
    auto text = ReadFile(local);
    if (!text.ok() || !SourceDefinesKernel(*text, id)) continue;
    if (compilable) return f;
    header = f;
  }
  return header;
}

// A database entry with this host's paths (a tree moved since the build:
// `remap`) and its option files expanded.
CompileCommand Localize(const CompileCommand& in, const std::optional<PathRemap>& remap,
                        std::vector<OptionFileUse>* option_files) {
  CompileCommand c = in;
  const bool moved = remap.has_value() && remap->from != remap->to && IsUnder(c.file, remap->from);
  if (moved) {
    c.file = remap->Apply(c.file);
    c.directory = remap->Apply(c.directory);
  }
  ExpandedCommand e = ExpandOptionFiles(
      c, moved ? std::function<std::string(const std::string&)>(
                     [&remap](const std::string& p) { return remap->Apply(p); })
               : nullptr);
  if (option_files != nullptr) *option_files = std::move(e.files);
  c = std::move(e.command);
  if (moved) c.argv = RemapArgv(c.argv, *remap);
  return c;
}

}  // namespace

SourceLocation LocateSources(std::string_view code_object, const LocateOptions& in_options) {
  SourceLocation loc;
  LocateOptions options = in_options;
  const std::string cwd = std::filesystem::current_path().string();
  if (!options.source_dir.empty()) options.source_dir = Normalize(options.source_dir, cwd);

  if (!HaveDwarfReader()) {
    loc.outcome = SourceOutcome::kNoDwarfReader;
    loc.message = "this kerncap was built without LLVM 15's DWARF library; sources cannot be found";
    return loc;
  }
  auto lines = ReadLineTable(code_object);
  if (!lines.ok()) {
    loc.outcome = SourceOutcome::kNotAnObjectFile;
    loc.message =
        absl::StrCat("the captured code object is not an ELF file (", lines.status().message(),
                     "): PTX or fatbin text carries no line table");
    return loc;
  }
  loc.lines = std::move(*lines);
  if (!loc.lines.has_line_table || loc.lines.files.empty()) {
    loc.outcome = SourceOutcome::kNoLineInfo;
    loc.message =
        "the code object has no DWARF line table: a JIT-compiled or binary-only kernel (cuBLAS, "
        "PTX JIT, Triton, Tensile), or one built without line information (nvcc -lineinfo or "
        "-G; clang -g). Rebuild the application with line information to get sources.";
    return loc;
  }

  // Where the search starts: the compile unit (HIP -g names it), else the
  // file that defines the kernel (a unit, else a header), else the first
  // unit of the table. With a database, the unit is chosen among its
  // entries below.
  if (!loc.lines.compile_unit.empty()) {
    loc.tu_original = loc.lines.compile_unit;
  } else if (std::string def = FileDefiningKernel(loc.lines, options); !def.empty()) {
    loc.tu_original = std::move(def);
  } else {
    for (const std::string& f : loc.lines.files) {
      if (IsCompilable(f)) {
        loc.tu_original = f;
        break;
      }
    }
    if (loc.tu_original.empty()) loc.tu_original = loc.lines.files.front();
  }
  const bool defines_kernel =
      !loc.lines.compile_unit.empty() ||
      (!options.kernel_name.empty() && loc.tu_original == FileDefiningKernel(loc.lines, options));

  // Here, or in the hint.
  // A hint that does not hold the recorded path wins over it: the user
  // named the tree to use (a checkout next to the original, say).
  loc.tried.push_back(loc.tu_original);
  const bool here = FileExists(loc.tu_original);
  if (here && (options.source_dir.empty() || IsUnder(loc.tu_original, options.source_dir))) {
    loc.tu = loc.tu_original;
  } else if (!options.source_dir.empty()) {
    loc.remap = RemapBySuffix(loc.tu_original, options.source_dir, &loc.tried);
    if (loc.remap.has_value()) {
      loc.tu = loc.remap->Apply(loc.tu_original);
    } else if (here) {
      loc.tu = loc.tu_original;
    }
  }
  if (loc.tu.empty()) {
    loc.outcome = SourceOutcome::kSourcesNotFound;
    loc.message = absl::StrCat(
        "the code object was built from ", loc.tu_original,
        " but it was found neither there nor under the --source-dir hint; tried: ",
        absl::StrJoin(loc.tried, ", "),
        options.source_dir.empty()
            ? ". Pass --source-dir=DIR naming the application's source tree on this host."
            : ". The --source-dir hint seems to name the wrong folder.");
    return loc;
  }
  const std::string anchor = loc.tu;

  // The line table's files here (those that contributed device code).
  UnitQuery query;
  for (const std::string& f : loc.lines.files) {
    std::string local = loc.remap.has_value() ? loc.remap->Apply(f) : f;
    if (!IsSystemPath(local) && FileExists(local)) query.line_files.push_back(local);
  }
  if (defines_kernel) query.defining_file = anchor;
  query.kernel_symbol = options.kernel_symbol;
  query.code_object = code_object;
  query.lang = options.lang;
  query.arch = options.arch;
  query.compiler = options.compiler;

  // The compile command: the database entry that compiles the kernel.
  std::vector<std::string> candidates;
  FindDatabase(loc, options, &candidates);
  std::string no_entry;
  for (const std::string& path : candidates) {
    if (!FileExists(path)) continue;
    loc.databases_tried.push_back(path);
    auto parsed = LoadCompileDatabase(path);
    if (!parsed.ok()) {
      no_entry = std::string(parsed.status().message());
      continue;
    }
    std::vector<CompileCommand> db;
    db.reserve(parsed->size());
    for (const CompileCommand& c : *parsed) db.push_back(Localize(c, loc.remap, nullptr));
    UnitChoice choice = ChooseUnit(db, query);
    if (choice.entry < 0) {
      no_entry = absl::StrCat(path, ": ", choice.note);
      continue;
    }
    loc.command = Localize((*parsed)[choice.entry], loc.remap, &loc.option_files);
    loc.tu = loc.command->file;
    loc.unit = std::move(choice);
    break;
  }
  if (loc.command.has_value()) {
    loc.compile_origin = CompileOrigin::kDatabase;
    if (loc.tu != anchor) loc.tu_original = loc.tu;  // the unit is the entry's file
  } else {
    loc.compile_origin = CompileOrigin::kDefault;
    loc.compile_note =
        loc.databases_tried.empty()
            ? absl::StrCat("no compile_commands.json was found (looked next to the sources",
                           options.source_dir.empty() ? "" : " and in the --source-dir hint",
                           "; pass --compile-commands=FILE): the default command is used")
            : absl::StrCat("no entry for ", loc.tu, " in ",
                           absl::StrJoin(loc.databases_tried, ", "),
                           no_entry.empty() ? "" : absl::StrCat(" (", no_entry, ")"),
                           ": the default command is used");
    if (!IsCompilable(loc.tu)) {
      absl::StrAppend(&loc.compile_note, "; ", loc.tu,
                      " is a header: without a database entry the file that includes it is "
                      "unknown");
    }
  }

  // The application's source root.
  if (!options.source_dir.empty() && IsUnder(loc.tu, options.source_dir)) {
    loc.root = options.source_dir;
  } else {
    std::vector<std::string> anchors = {DirName(loc.tu)};
    if (loc.command.has_value()) {
      anchors.push_back(loc.command->directory);
      anchors.push_back(DirName(loc.command->database));
    } else {
      // Without a database, the line table's own (non-system) files anchor it.
      for (const std::string& f : loc.lines.files) {
        std::string local = loc.remap.has_value() ? loc.remap->Apply(f) : f;
        if (!IsSystemPath(local) && FileExists(local)) anchors.push_back(DirName(local));
      }
    }
    loc.root = CommonAncestor(anchors);
    if (loc.root == "/" || IsSystemPath(loc.root)) loc.root = DirName(loc.tu);
  }
  loc.root_original = loc.remap.has_value() && IsUnder(loc.root, loc.remap->to)
                          ? Normalize(RelativeTo(loc.root, loc.remap->to), loc.remap->from)
                          : loc.root;

  loc.files.push_back(loc.tu);
  for (const std::string& f : loc.lines.files) {
    std::string local = loc.remap.has_value() ? loc.remap->Apply(f) : f;
    if (local == loc.tu || !IsUnder(local, loc.root) || IsSystemPath(local)) continue;
    if (FileExists(local)) loc.files.push_back(local);
  }
  loc.outcome = SourceOutcome::kFound;
  if (loc.compile_origin == CompileOrigin::kDefault) loc.message = loc.compile_note;
  return loc;
}

}  // namespace kerncap::repro
