#include "reproducer/generator/command_rewriter.h"

#include <cctype>
#include <filesystem>
#include <set>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "reproducer/generator/path_util.h"

namespace kerncap::repro {
namespace {

constexpr char kRdcReason[] =
    "relocatable device code: recompile uses -rdc=true and device-links the unit alone "
    "(nvcc -dlink -cubin)";

struct OptionSpec {
  const char* name;
  bool takes_value;  // "-o FILE" (also "-oFILE" / "--opt=FILE" joined)
  const char* reason;
};

// Flags the reproducer sets itself (or that make no sense for one kernel).
const OptionSpec kDropCommon[] = {
    {"-c", false, "the reproducer compiles device code only"},
    {"-o", true, "the reproducer names its own output"},
    {"-MD", false, "dependency output"},
    {"-MMD", false, "dependency output"},
    {"-MP", false, "dependency output"},
    {"-M", false, "dependency output"},
    {"-MM", false, "dependency output"},
    {"-MF", true, "dependency output"},
    {"-MT", true, "dependency output"},
    {"-MQ", true, "dependency output"},
};
const OptionSpec kDropCuda[] = {
    {"-arch", true, "the captured architecture is used"},
    {"--gpu-architecture", true, "the captured architecture is used"},
    {"-code", true, "the captured architecture is used"},
    {"--gpu-code", true, "the captured architecture is used"},
    {"-gencode", true, "the captured architecture is used"},
    {"--generate-code", true, "the captured architecture is used"},
    {"-ccbin", true, "host compiler path of the capture host"},
    {"--compiler-bindir", true, "host compiler path of the capture host"},
    // Readable option files were expanded into the command before
    // (response_files.h); what is left could not be read.
    {"--options-file", true, "options file could not be expanded (see compile.option_files)"},
    {"-optf", true, "options file could not be expanded (see compile.option_files)"},
    // Relocatable device code (CMake's CUDA_SEPARABLE_COMPILATION): the
    // Makefile compiles with -rdc=true and device-links the unit itself.
    {"-dc", false, kRdcReason},
    {"--device-c", false, kRdcReason},
    {"-rdc", true, kRdcReason},
    {"--relocatable-device-code", true, kRdcReason},
    {"-cubin", false, "set by the reproducer"},
    {"-ptx", false, "set by the reproducer"},
    {"--dependency-output", true, "dependency output"},
    {"--generate-dependencies-with-compile", false, "dependency output"},
};
const OptionSpec kDropHip[] = {
    // CUDA keeps "-x cu": a .cpp compiled as CUDA needs it.
    {"-x", true, "the reproducer sets the language"},
    {"--offload-arch", true, "the captured architecture is used"},
    {"--cuda-gpu-arch", true, "the captured architecture is used"},
    {"--no-offload-arch", true, "the captured architecture is used"},
    {"--cuda-device-only", false, "set by the reproducer"},
    {"--cuda-host-only", false, "the reproducer compiles device code"},
    {"--offload-device-only", false, "set by the reproducer"},
    {"--no-gpu-bundle-output", false, "set by the reproducer"},
    {"--gpu-bundle-output", false, "the reproducer writes a plain code object"},
    {"-ivfsoverlay", true, "the reproducer has its own overlay"},
    {"-fgpu-rdc", false, "relocatable device code is not linked by the reproducer"},
};

// Options whose value is a path (joined "-I/x", "--rocm-path=/x", or the next word).
const char* const kPathOptions[] = {"-I",
                                    "-isystem",
                                    "-iquote",
                                    "-idirafter",
                                    "-include",
                                    "-imacros",
                                    "-B",
                                    "-L",
                                    "-isysroot",
                                    "--sysroot",
                                    "--include-path",
                                    "--rocm-path",
                                    "--rocm-device-lib-path",
                                    "--hip-path",
                                    "--cuda-path",
                                    "--hip-device-lib-path",
                                    "-include-pch"};
const char* const kIncludeDirOptions[] = {"-I", "-isystem", "-iquote", "-idirafter",
                                          "--include-path"};

// Matches `arg` against `spec`: 0 no, 1 the option alone (value in the next
// word when it takes one), 2 joined value.
int Match(const std::string& arg, const OptionSpec& spec) {
  const std::string name = spec.name;
  if (arg == name) return 1;
  if (!spec.takes_value) return 0;
  if (absl::StartsWith(arg, name + "=")) return 2;
  // Short joined forms only for one-dash names ("-oFILE", "-MFdeps").
  if (name.size() == 2 && name[0] == '-' && absl::StartsWith(arg, name)) return 2;
  return 0;
}

bool IsIncludeDirOption(const std::string& opt) {
  for (const char* o : kIncludeDirOptions) {
    if (opt == o) return true;
  }
  return false;
}

}  // namespace

CoreFlags ExtractCoreFlags(const CompileCommand& command, const std::string& tu, Language lang) {
  CoreFlags core;
  if (command.argv.empty()) return core;
  core.tool = std::filesystem::path(command.argv[0]).filename().string();
  std::vector<const OptionSpec*> specs;
  for (const OptionSpec& s : kDropCommon) specs.push_back(&s);
  if (lang == Language::kCuda) {
    for (const OptionSpec& s : kDropCuda) specs.push_back(&s);
  } else {
    for (const OptionSpec& s : kDropHip) specs.push_back(&s);
  }
  for (size_t i = 1; i < command.argv.size(); ++i) {
    const std::string& a = command.argv[i];
    if (a.empty()) continue;
    if (a[0] != '-') {
      if (Normalize(a, command.directory) == tu) {
        core.dropped.push_back({a, "the translation unit (the reproducer's SRC)"});
        continue;
      }
    }
    bool dropped = false;
    for (const OptionSpec* s : specs) {
      int m = Match(a, *s);
      if (m == 0) continue;
      std::string flag = a;
      if (m == 1 && s->takes_value && i + 1 < command.argv.size()) {
        flag += " " + command.argv[++i];
      }
      core.dropped.push_back({flag, s->reason});
      if (s->reason == kRdcReason) {
        // "-dc", "-rdc=true", "-rdc true"; "=false" is the default.
        core.relocatable_device_code = !absl::EndsWith(flag, "false");
      }
      dropped = true;
      break;
    }
    if (!dropped) core.flags.push_back(a);
  }
  return core;
}

RelativeFlags MakeFlagsRelative(const std::vector<std::string>& core, const std::string& directory,
                                const std::string& root,
                                const std::function<bool(const std::string&)>& project_has_dir) {
  RelativeFlags out;
  std::vector<std::string> ext_paths;
  auto external = [&](const std::string& path) {
    for (size_t i = 0; i < ext_paths.size(); ++i) {
      if (ext_paths[i] == path) return absl::StrCat("$(EXT_", i + 1, ")");
    }
    ext_paths.push_back(path);
    out.external.emplace_back(absl::StrCat("EXT_", ext_paths.size()), path);
    return absl::StrCat("$(EXT_", ext_paths.size(), ")");
  };
  // Rewrites one path value of option `opt` ("" for a bare word). Returns
  // false when the flag is to be dropped (reason in *why).
  auto rewrite = [&](const std::string& opt, const std::string& value, std::string* result,
                     std::string* why) {
    const std::string abs = Normalize(value, directory);
    if (IsUnder(abs, root)) {
      const std::string rel = RelativeTo(abs, root);
      if (IsIncludeDirOption(opt) && !project_has_dir(rel)) {
        *why = "include folder with no file of the kernel's include closure";
        return false;
      }
      *result = rel == "." ? "src" : "src/" + rel;
      return true;
    }
    if (IsSystemPath(abs)) {
      if (IsIncludeDirOption(opt)) {
        *why = "toolkit/system include folder (the compiler finds its own)";
        return false;
      }
      if (opt == "-include" || opt == "-imacros") {
        std::string rel = SystemIncludeRelative(abs);
        if (!rel.empty()) {
          *result = rel;
          return true;
        }
      }
    }
    if (value.empty() || (value[0] != '/' && opt.empty())) {
      *result = value;  // not a path after all
      return true;
    }
    *result = external(abs);
    return true;
  };

  for (size_t i = 0; i < core.size(); ++i) {
    const std::string& a = core[i];
    std::string opt, value;
    bool separate = false;
    for (const char* o : kPathOptions) {
      const std::string name = o;
      if (a == name && i + 1 < core.size()) {
        opt = name;
        value = core[i + 1];
        separate = true;
        break;
      }
      if (absl::StartsWith(a, name + "=")) {
        opt = name + "=";
        value = a.substr(name.size() + 1);
        break;
      }
      if (name.size() == 2 && absl::StartsWith(a, name) && a.size() > 2) {
        opt = name;
        value = a.substr(2);
        break;
      }
      if (name[1] != '-' && name.size() > 2 && absl::StartsWith(a, name) &&
          a.size() > name.size() && a[name.size()] == '/') {
        opt = name;  // "-isystem/usr/x"
        value = a.substr(name.size());
        break;
      }
    }
    if (opt.empty()) {
      // Any other word holding an absolute path ("--foo=/x", "/x").
      size_t eq = a.find("=/");
      if (a[0] == '/') {
        value = a;
      } else if (a[0] == '-' && eq != std::string::npos) {
        opt = a.substr(0, eq + 1);
        value = a.substr(eq + 1);
      } else {
        out.flags.push_back(a);
        continue;
      }
    }
    std::string bare_opt = opt;
    if (!bare_opt.empty() && bare_opt.back() == '=') bare_opt.pop_back();
    std::string result, why;
    if (!rewrite(bare_opt, value, &result, &why)) {
      out.dropped.push_back({separate ? a + " " + value : a, why});
      if (separate) ++i;
      continue;
    }
    if (separate) {
      out.flags.push_back(opt);
      out.flags.push_back(result);
      ++i;
    } else {
      out.flags.push_back(opt + result);
    }
  }
  return out;
}

std::vector<std::string> DefaultFlags(Language lang, const std::vector<std::string>& header_dirs) {
  std::vector<std::string> f = {"-O3", lang == Language::kCuda ? "-lineinfo" : "-g", "-std=c++17"};
  std::set<std::string> seen;
  for (const std::string& d : header_dirs) {
    if (!seen.insert(d).second) continue;
    f.push_back(d == "." ? "-Isrc" : "-Isrc/" + d);
  }
  return f;
}

std::vector<std::string> DeviceCompileMode(Language lang, const std::string& arch) {
  if (lang == Language::kCuda) return {"-cubin", "-arch=" + arch};
  return {"-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output", "--offload-arch=" + arch};
}

std::string ShellQuote(const std::string& w) {
  if (w.empty()) return "''";
  // "$(" starts a Makefile variable reference ($(EXT_1)), kept unquoted; any
  // other '$' is literal text and needs quoting from the shell.
  bool plain = true;
  for (size_t i = 0; i < w.size() && plain; ++i) {
    const char c = w[i];
    if (c == '$') {
      plain = i + 1 < w.size() && w[i + 1] == '(';
      continue;
    }
    plain = std::isalnum(static_cast<unsigned char>(c)) ||
            std::string_view("-_./=+:,@%()").find(c) != std::string_view::npos;
  }
  if (plain) return w;
  std::string q = "'";
  for (char c : w) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q.push_back(c);
    }
  }
  return q + "'";
}

}  // namespace kerncap::repro
