#include "reproducer/generator/generator.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/digest.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "reproducer/generator/build_file.h"
#include "reproducer/generator/command_rewriter.h"
#include "reproducer/generator/include_closure.h"
#include "reproducer/generator/minimal_unit.h"
#include "reproducer/generator/path_util.h"
#include "reproducer/generator/project_manifest.h"
#include "reproducer/generator/project_writer.h"
#include "reproducer/generator/source_locator.h"
#include "reproducer/generator/toolkit_notes.h"
#include "reproducer/generator/triton_project.h"
#include "reproducer/generator/vfs_overlay.h"
#include "reproducer/replay/core/capture_source.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;

struct KernelCode {
  const v1::CodeObject* object = nullptr;
  std::string bytes;
  std::string file;    // "code/kernel.cubin"
  std::string format;  // "cubin"
};

absl::StatusOr<Language> LanguageOf(const v1::CaptureManifest& m) {
  switch (m.kernel().platform()) {
    case v1::PLATFORM_CUDA:
      return Language::kCuda;
    case v1::PLATFORM_HSA:
      return Language::kHip;
    default:
      break;
  }
  // Synthetic captures and imports: the code object says.
  for (const v1::CodeObject& c : m.code_objects()) {
    if (c.format() == v1::CODE_OBJECT_HSACO) return Language::kHip;
    if (c.format() != v1::CODE_OBJECT_FORMAT_UNSPECIFIED) return Language::kCuda;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "capture ", m.capture_id(), ": cannot tell CUDA from HIP (no platform, no code object)"));
}

std::string ArchOf(const v1::CaptureManifest& m) {
  std::string arch = m.kernel().arch().empty() ? m.device().arch() : m.kernel().arch();
  // "gfx90a:sramecc+:xnack-" -> "gfx90a" (the target features follow the
  // compile flags, not the arch name).
  return arch.substr(0, arch.find(':'));
}

absl::StatusOr<KernelCode> KernelCodeOf(const CaptureAccess& c) {
  const v1::CaptureManifest& m = c.manifest;
  if (m.code_objects_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("capture ", m.capture_id(), " holds no code object"));
  }
  KernelCode k;
  k.object = &m.code_objects(0);
  for (const v1::CodeObject& co : m.code_objects()) {
    if (!m.kernel().code_object_digest().empty() &&
        co.digest() == m.kernel().code_object_digest()) {
      k.object = &co;
    }
  }
  KC_ASSIGN_OR_RETURN(k.bytes, c.read_bytes(k.object->data()));
  switch (k.object->format()) {
    case v1::CODE_OBJECT_PTX:
      k.format = "ptx";
      break;
    case v1::CODE_OBJECT_FATBIN:
      k.format = "fatbin";
      break;
    case v1::CODE_OBJECT_HSACO:
      k.format = "hsaco";
      break;
    default:
      k.format = "cubin";
      break;
  }
  k.file = "code/kernel." + k.format;
  return k;
}

// Disassembles the captured code object into the project (best effort).
void Disassemble(const KernelCode& code, Language lang, const std::string& arch,
                 const ToolPaths& tools, ProjectStage& stage, CodeObjectSection* out,
                 std::vector<std::string>* warnings) {
  std::vector<std::string> argv;
  std::string target;
  const std::string path = stage.PathOf(code.file);
  if (lang == Language::kHip) {
    if (!tools.llvm_objdump.empty()) argv = {tools.llvm_objdump, "-d", "--mcpu=" + arch, path};
    target = "code/kernel.s";
  } else if (code.format == "ptx") {
    out->note = "PTX is its own assembly; see code/kernel.ptx";
    return;
  } else {
    if (!tools.nvdisasm.empty() && code.format == "cubin") {
      argv = {tools.nvdisasm, "-c", path};
    } else if (!tools.cuobjdump.empty()) {
      argv = {tools.cuobjdump, "-sass", path};
    }
    target = "code/kernel.sass";
  }
  if (argv.empty()) {
    out->note = lang == Language::kHip ? "llvm-objdump not found: no disassembly"
                                       : "neither nvdisasm nor cuobjdump found: no disassembly "
                                         "(make asm produces it where they exist)";
    warnings->push_back(out->note);
    return;
  }
  auto r = RunTool(argv);
  if (!r.ok() || r->exit_code != 0) {
    out->note = absl::StrCat(fs::path(argv[0]).filename().string(), " failed: ",
                             r.ok() ? r->err.substr(0, 300) : std::string(r.status().message()));
    warnings->push_back(out->note);
    return;
  }
  // The tools print the file's path; a generated file must not name the
  // temp folder.
  std::string text = r->out;
  for (size_t pos; (pos = text.find(stage.dir())) != std::string::npos;) {
    text.replace(pos, stage.dir().size(), ".");
  }
  if (!stage.WriteFile(target, text).ok()) return;
  out->disassembly = target;
  out->disassembler = fs::path(argv[0]).filename().string();
}

// The application's toolkit (the cubin's notes) against the nvcc this
// project is generated with (its --version now; make recompile checks the
// one it runs).
ToolkitSection DescribeToolkit(const KernelCode& code, Language lang, const ToolPaths& tools) {
  ToolkitSection t;
  if (lang != Language::kCuda || code.format != "cubin") {
    t.note = lang == Language::kCuda
                 ? absl::StrCat("the captured code object is ", code.format,
                                ": it carries no toolkit notes")
                 : "HIP code objects carry no toolkit notes";
    return t;
  }
  t.applies = true;
  auto info = ReadToolkitNotes(code.bytes);
  if (info.ok()) {
    t.application = std::move(*info);
  } else {
    t.application.problems.push_back(std::string(info.status().message()));
  }
  if (!tools.nvcc.empty()) {
    auto r = RunTool({tools.nvcc, "--version"}, "", 30);
    if (r.ok() && r->exit_code == 0) {
      t.reproducer_tool = "nvcc";
      t.reproducer = ParseCudaVersion(r->out);
      const size_t at = r->out.find("Cuda compilation tools");
      if (at != std::string::npos) {
        t.reproducer_version_line = r->out.substr(at, r->out.find('\n', at) - at);
      }
    }
  }
  const CudaVersion& app = t.application.version;
  if (app.version.empty()) {
    t.note = t.application.problems.empty()
                 ? "the cubin has no .note.nv.tkinfo: the application's toolkit is not recorded"
                 : absl::StrCat("the application's toolkit could not be read: ",
                                t.application.problems.front());
  } else if (t.reproducer.version.empty()) {
    t.note = absl::StrCat("the application was built with CUDA ", app.version,
                          "; no nvcc was found here to compare (make recompile compares the "
                          "one it runs)");
  } else if (app.version != t.reproducer.version) {
    t.note = absl::StrCat("the application was built with CUDA ", app.version, " (", t.application.tool,
                          "), this reproducer's nvcc is CUDA ", t.reproducer.version,
                          ": the rebuilt code may differ from the captured one for that reason "
                          "alone (make recompile NVCC=<a ", app.release, " nvcc> avoids it)");
  } else {
    t.note = absl::StrCat("the application and this reproducer's nvcc are both CUDA ", app.version);
  }
  return t;
}

std::string RoleOf(const std::string& rel, bool triton) {
  if (rel == "capture.kcap") return "capture";
  if (triton) {
    if (rel == "kernel.py") return "source";
    if (rel == "run.py") return "script";
    if (rel == "kerncap_replay.py") return "binding";
    if (rel == "README.md") return "doc";
  }
  if (rel == "Makefile") return "build";
  if (rel == kMinimalUnitFile) return "minimal_unit";
  if (rel == "vfs.yaml") return "overlay";
  if (absl::StartsWith(rel, "code/")) {
    return absl::EndsWith(rel, ".sass") || absl::EndsWith(rel, ".s") ? "disassembly" : "code";
  }
  return "source";
}

// The file list, kerncap.json (which describes every other file), commit.
absl::StatusOr<GenerateResult> Finish(ProjectStage& stage, ProjectFacts& facts, bool triton) {
  ProjectStage* const s = &stage;  // NOLINT: reads like the code it came from
  GenerateResult result;
  std::vector<std::string> rels;
  for (const auto& e : fs::recursive_directory_iterator(s->dir())) {
    if (!e.is_regular_file()) continue;
    rels.push_back(fs::relative(e.path(), s->dir()).string());
  }
  std::sort(rels.begin(), rels.end());
  for (const std::string& rel : rels) {
    ProjectFile pf;
    pf.path = rel;
    pf.role = RoleOf(rel, triton);
    pf.bytes = fs::file_size(s->PathOf(rel));
    // The capture can be many GiB and checks itself (per-record XXH3,
    // per-chunk SHA-256): no whole-file digest for it.
    if (rel != "capture.kcap") {
      KC_ASSIGN_OR_RETURN(std::string data, ReadFile(s->PathOf(rel)));
      pf.sha256 = Sha256(data).ToHex();
    }
    if (!triton && pf.role == "source" && rel != facts.compile.translation_unit) {
      pf.role = "header";
    }
    facts.files.push_back(pf);
  }
  result.project = BuildProjectManifest(facts);
  KC_RETURN_IF_ERROR(s->WriteFile("kerncap.json", result.project.dump(2) + "\n"));
  rels.push_back("kerncap.json");
  std::sort(rels.begin(), rels.end());
  KC_RETURN_IF_ERROR(s->Commit());
  result.out_dir = s->out_dir();
  result.files = std::move(rels);
  return result;
}

// A code object whose line table's unit is a Python file was JIT-compiled
// from Python (Triton, Inductor): there is no translation unit nvcc or clang
// could rebuild, and a project that runs nvcc on the .py would fail or, worse,
// look like a native project. It becomes binary-only and says why (the Triton
// reproducer needs the shim's metadata).
void RefusePythonUnit(SourceLocation& loc, std::vector<std::string>* warnings) {
  std::string unit;
  for (const std::string* p : {&loc.tu, &loc.tu_original}) {
    if (absl::EndsWith(*p, ".py")) unit = *p;
  }
  if (unit.empty()) return;
  loc.outcome = SourceOutcome::kSourcesNotFound;
  loc.tu.clear();
  loc.files.clear();
  loc.command.reset();
  loc.compile_origin = CompileOrigin::kNone;
  loc.message = absl::StrCat(
      "the kernel was compiled from Python source (", fs::path(unit).filename().string(),
      ": a Triton/JIT kernel): nvcc cannot rebuild a .py, so this is a binary-only project. "
      "For an editable reproducer, capture with the kerncap Triton shim active "
      "(KERNCAP_TRITON_SHIM=1): kerncapctl repro then writes kernel.py and run.py");
  warnings->push_back(loc.message);
}

}  // namespace

absl::StatusOr<GenerateResult> GenerateProject(const CaptureAccess& capture,
                                               const GenerateOptions& options) {
  const v1::CaptureManifest& m = capture.manifest;
  KC_ASSIGN_OR_RETURN(Language lang, LanguageOf(m));
  const std::string arch = ArchOf(m);
  if (arch.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("capture ", m.capture_id(), " records no GPU architecture"));
  }
  bool triton = false;
  if (options.kind == ProjectKind::kTriton) {
    if (options.binary_only) {
      return absl::InvalidArgumentError("a Triton reproducer and a binary-only one exclude each other");
    }
    if (!HasTritonMetadata(m)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "capture ", m.capture_id(), " (kernel ", m.kernel().mangled_name(),
          ") carries no Triton metadata (", kTritonJitSchema,
          " in kernel.jit_metadata_json): no Triton reproducer. The kerncap Triton shim "
          "(python_shim, KERNCAP_TRITON_SHIM=1) must be active in the application when the kernel "
          "is compiled"));
    }
    triton = true;
  } else if (options.kind == ProjectKind::kAuto && !options.binary_only) {
    triton = HasTritonMetadata(m);
  }
  const ToolPaths tools = ResolveTools(options.tools);
  KC_ASSIGN_OR_RETURN(std::unique_ptr<ProjectStage> stage,
                      ProjectStage::Begin(options.out_dir, options.force));

  ProjectFacts facts;
  facts.capture = &m;
  facts.platform = lang == Language::kCuda ? "cuda" : "hip";
  facts.arch = arch;

  // The capture and its code.
  KC_RETURN_IF_ERROR(capture.write_kcap(stage->PathOf("capture.kcap")));
  KC_ASSIGN_OR_RETURN(KernelCode code, KernelCodeOf(capture));
  KC_RETURN_IF_ERROR(stage->WriteFile(code.file, code.bytes));
  facts.code.file = code.file;
  facts.code.format = code.format;
  Disassemble(code, lang, arch, tools, *stage, &facts.code, &facts.warnings);
  facts.toolkit = DescribeToolkit(code, lang, tools);
  if (facts.toolkit.applies && !facts.toolkit.application.version.version.empty() &&
      !facts.toolkit.reproducer.version.empty() &&
      facts.toolkit.application.version.version != facts.toolkit.reproducer.version) {
    facts.warnings.push_back("toolkit: " + facts.toolkit.note);
  }

  if (triton) {
    // No `make asm` in a Triton project.
    for (std::string* note : {&facts.code.note, facts.warnings.empty() ? nullptr
                                                                       : &facts.warnings.back()}) {
      if (note != nullptr && absl::StrContains(*note, " (make asm")) {
        note->erase(note->find(" (make asm"));
      }
    }
    TritonInputs ti;
    ti.capture = &m;
    ti.code_sha256 = Sha256(code.bytes).ToHex();
    ti.code_format = code.format;
    ti.code_file = code.file;
    if (code.format == "cubin") {
      auto notes = ReadToolkitNotes(code.bytes);
      if (notes.ok() && notes->found) {
        ti.ptxas_release = notes->version.release;
        ti.ptxas_version_line = notes->version_line;
      }
    }
    ti.python3 = FindTool(tools.python3);
    KC_ASSIGN_OR_RETURN(TritonProjectFiles tp, WriteTritonProject(ti, *stage));
    facts.triton = std::move(tp.section);
    facts.warnings.insert(facts.warnings.end(), tp.warnings.begin(), tp.warnings.end());
    facts.compile.origin = CompileOrigin::kNone;
    facts.compile.reason =
        "Triton kernel: kernel.py is compiled by Triton's JIT when run.py calls it";
    return Finish(*stage, facts, /*triton=*/true);
  }

  // Sources.
  SourceLocation loc;
  IncludeClosure closure;
  MakefileSpec mk;
  mk.lang = lang;
  mk.arch = arch;
  mk.captured_code = code.file;
  // The kernel's symbol in the code object (HIP: what make asm cuts out).
  mk.kernel_symbol = std::string(absl::StripSuffix(
      m.kernel().mangled_name().empty() ? m.kernel().demangled_name() : m.kernel().mangled_name(),
      ".kd"));
  if (code.format == "ptx") mk.captured_ptx = code.file;
  mk.app_cuda_version = facts.toolkit.application.version.version;
  mk.app_cuda_version_line = facts.toolkit.application.version_line;
  mk.title = absl::StrCat(
      "Reproducer of ",
      m.kernel().demangled_name().empty() ? m.kernel().mangled_name() : m.kernel().demangled_name(),
      " (capture ", m.capture_id(), ", ", arch, ")");
  if (!tools.clang.empty()) mk.clang_default = fs::path(tools.clang).filename().string();
  if (!tools.llvm_objdump.empty()) {
    mk.llvm_objdump_default = fs::path(tools.llvm_objdump).filename().string();
  }
  std::vector<std::pair<std::string, std::string>> overlay;
  if (options.binary_only) {
    loc.outcome = SourceOutcome::kNoLineInfo;
    loc.message = "binary-only reproducer requested: sources were not looked for";
    mk.no_source_reason = loc.message;
  } else {
    LocateOptions lo;
    lo.source_dir = options.source_dir;
    lo.compile_commands = options.compile_commands;
    lo.kernel_name = m.kernel().demangled_name().empty() ? m.kernel().mangled_name()
                                                         : m.kernel().demangled_name();
    lo.kernel_symbol = mk.kernel_symbol;
    lo.lang = lang;
    lo.arch = arch;
    lo.compiler = lang == Language::kCuda ? tools.nvcc : tools.clang;
    loc = LocateSources(code.bytes, lo);
    RefusePythonUnit(loc, &facts.warnings);
    for (const OptionFileUse& u : loc.option_files) {
      if (u.error.empty()) continue;
      facts.warnings.push_back(absl::StrCat(
          "options file ", u.path, " (", u.flag, ") ", u.error,
          ": the include folders and macros it holds are missing from the recompile command"));
    }
    if (loc.unit.ambiguous) facts.warnings.push_back("translation unit: " + loc.unit.note);
    mk.no_source_reason = loc.message;
  }
  facts.source = &loc;
  if (loc.outcome == SourceOutcome::kFound) {
    closure = CollectIncludeClosure(loc, lang, tools, arch);
    facts.closure = &closure;
    if (!closure.note.empty()) facts.warnings.push_back("include closure: " + closure.note);
    std::set<std::string> copied_dirs;  // relative to root, with every ancestor
    std::vector<std::string> header_dirs;
    for (const std::string& f : closure.files) {
      const std::string rel = RelativeTo(f, loc.root);
      const std::string project_path = "src/" + rel;
      KC_RETURN_IF_ERROR(stage->CopyFile(f, project_path));
      overlay.emplace_back(Normalize(rel, loc.root_original), project_path);
      for (std::string d = DirName(rel); d != "." && d != "/"; d = DirName(d)) {
        copied_dirs.insert(d);
      }
      copied_dirs.insert(".");
      if (f == loc.tu) continue;
      facts.headers.push_back(project_path);
      header_dirs.push_back(DirName(rel));
    }
    const std::string tu_project = "src/" + RelativeTo(loc.tu, loc.root);
    std::vector<std::string> flags;
    CompileSection& cs = facts.compile;
    cs.origin = loc.compile_origin;
    cs.reason = loc.compile_note;
    if (loc.command.has_value()) {
      CoreFlags core = ExtractCoreFlags(*loc.command, loc.tu, lang);
      RelativeFlags rel = MakeFlagsRelative(
          core.flags, loc.command->directory, loc.root,
          [&copied_dirs](const std::string& d) { return copied_dirs.count(d) > 0; });
      flags = rel.flags;
      cs.original_tool = core.tool;
      mk.relocatable_device_code = lang == Language::kCuda && core.relocatable_device_code;
      cs.external = rel.external;
      cs.dropped = core.dropped;
      cs.dropped.insert(cs.dropped.end(), rel.dropped.begin(), rel.dropped.end());
    } else {
      flags = DefaultFlags(lang, header_dirs);
      cs.reason = absl::StrCat(loc.compile_note, " (", absl::StrJoin(flags, " "), ")");
      facts.warnings.push_back(cs.reason);
    }
    cs.tool_variable = lang == Language::kCuda ? "NVCC" : "CLANG";
    cs.translation_unit = tu_project;
    cs.command = {absl::StrCat("$(", cs.tool_variable, ")")};
    for (const std::string& f : DeviceCompileMode(lang, arch)) cs.command.push_back(f);
    cs.command.insert(cs.command.end(), flags.begin(), flags.end());
    if (lang == Language::kHip) {
      cs.command.push_back("-ivfsoverlay");
      cs.command.push_back("vfs.yaml");
    }
    if (mk.relocatable_device_code) cs.command.push_back("-rdc=true");
    cs.command.push_back("-o");
    cs.command.push_back(lang == Language::kCuda
                             ? (mk.relocatable_device_code ? "build/kernel.rdc.cubin"
                                                           : "build/kernel.cubin")
                             : "build/kernel.hsaco");
    cs.command.push_back(tu_project);
    if (mk.relocatable_device_code) {
      cs.link_command = {"$(NVCC)", "-dlink", "-cubin", "-arch=" + arch, "-o",
                         "build/kernel.cubin", "build/kernel.rdc.cubin"};
    }

    // The fast recompile path: the kernel's minimal unit, used only when it
    // builds the captured code (minimal_unit.h).
    nlohmann::json edit = {{"recompile_full", tu_project}};
    if (lang == Language::kCuda && code.format == "cubin") {
      MinimalUnitQuery mq;
      mq.project_dir = stage->dir();
      mq.unit = tu_project;
      mq.source_root = "src";
      mq.flags = flags;
      mq.external = cs.external;
      mq.arch = arch;
      mq.relocatable_device_code = mk.relocatable_device_code;
      mq.kernel_symbol = mk.kernel_symbol;
      mq.captured_code = code.bytes;
      mq.nvcc = tools.nvcc;
      mq.slicer = tools.slicer;
      mq.nvrtc = tools.nvrtc;
      MinimalUnit mu = BuildMinimalUnit(mq);
      nlohmann::json mj = {{"outcome", mu.outcome},
                           {"reason", mu.reason},
                           {"slice", mu.slice},
                           {"seconds",
                            {{"slice", mu.slice_seconds},
                             {"compile", mu.compile_seconds},
                             {"compile_whole", mu.whole_compile_seconds}}}};
      if (mu.verified()) {
        KC_RETURN_IF_ERROR(stage->WriteFile(kMinimalUnitFile, mu.text));
        mk.minimal_unit = kMinimalUnitFile;
        mj["verified_against"] = mu.verified_against;
        edit["file"] = kMinimalUnitFile;
        edit["unit"] = "minimal";
        const UnitCompiler& uc = mu.compiler;
        edit["note"] = absl::StrCat(
            "edit ", kMinimalUnitFile, ": make recompile compiles it alone with ",
            uc.tool == "nvrtc" ? "kerncap-nvrtc" : "nvcc", " (verified at generation: it builds ",
            mk.kernel_symbol, " exactly as ",
            mu.verified_against == "captured" ? "the captured code"
                                              : "the whole unit does with this nvcc",
            uc.tool == "nvrtc" ? "; so does kerncap-nvrtc, COMPILER=nvcc uses nvcc" : "",
            "); make recompile-full compiles ", tu_project, " and its headers");
        // The NVRTC path (minimal_unit.h): which compiler make recompile
        // runs, whether NVRTC's build was compared, why not NVRTC.
        edit["compiler"] = {
            {"tool", uc.tool},
            {"verified", uc.verified},
            {"reason", uc.reason},
            {"seconds", {{"nvrtc", uc.nvrtc_seconds}, {"nvcc", mu.compile_seconds}}}};
        if (uc.tool == "nvrtc") {
          mk.nvrtc = tools.nvrtc;
        } else {
          mk.no_nvrtc_reason = uc.reason;
        }
      } else {
        mk.minimal_unit_reason = absl::StrCat(mu.outcome, ": ", mu.reason);
        edit["file"] = tu_project;
        edit["unit"] = "whole";
        edit["note"] = absl::StrCat("edit ", tu_project,
                                    ": make recompile compiles the whole unit (no minimal unit: ",
                                    mk.minimal_unit_reason, ")");
        facts.warnings.push_back(absl::StrCat("minimal unit: ", mk.minimal_unit_reason,
                                              "; make recompile compiles the whole unit"));
      }
      edit["minimal_unit"] = mj;
    } else {
      edit["file"] = tu_project;
      edit["unit"] = "whole";
      edit["note"] = lang == Language::kCuda
                         ? absl::StrCat("the captured code object is ", code.format,
                                        ": no minimal unit (it is verified against a cubin)")
                         : "HIP: no minimal unit (CUDA only)";
    }
    facts.edit = edit;

    mk.has_source = true;
    mk.source = tu_project;
    mk.headers = facts.headers;
    mk.flags = flags;
    mk.external = cs.external;
    if (lang == Language::kHip) {
      auto yaml = WriteVfsOverlay(overlay);
      if (yaml.ok()) {
        KC_RETURN_IF_ERROR(stage->WriteFile("vfs.yaml", *yaml));
        mk.vfs_overlay = true;
      } else {
        facts.warnings.push_back(absl::StrCat("no VFS overlay: ", yaml.status().message()));
      }
    }
    facts.source_project = true;
  } else {
    facts.compile.origin = CompileOrigin::kNone;
    facts.compile.reason = loc.message;
  }
  KC_ASSIGN_OR_RETURN(std::string makefile, BuildMakefile(mk));
  KC_RETURN_IF_ERROR(stage->WriteFile("Makefile", makefile));
  return Finish(*stage, facts, /*triton=*/false);
}

absl::StatusOr<GenerateResult> GenerateProjectFromKcap(const std::string& kcap_path,
                                                       const GenerateOptions& options) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<replay::CaptureSource> source,
                      replay::CaptureSource::OpenKcap(kcap_path));
  CaptureAccess access;
  access.manifest = source->manifest();
  const replay::CaptureSource* src = source.get();
  access.read_bytes = [src](const v1::ChunkList& list) -> absl::StatusOr<std::string> {
    std::string out, chunk;
    out.reserve(list.size());
    for (uint64_t i = 0; i < replay::ChunkCount(list); ++i) {
      KC_RETURN_IF_ERROR(src->ReadChunk(list.chunk_digests(static_cast<int>(i)),
                                        replay::ChunkLength(list, i), &chunk));
      out += chunk;
    }
    return out;
  };
  access.write_kcap = [kcap_path](const std::string& path) -> absl::Status {
    std::error_code ec;
    fs::copy_file(kcap_path, path, ec);
    if (ec) return absl::InternalError(absl::StrCat("copy ", kcap_path, ": ", ec.message()));
    return absl::OkStatus();
  };
  return GenerateProject(access, options);
}

std::string SummarizeProject(const GenerateResult& r) {
  const nlohmann::json& p = r.project;
  std::string s =
      absl::StrCat("reproducer written to ", r.out_dir, " (", p["kind"].get<std::string>(), ", ",
                   p["kernel"]["platform"].get<std::string>(), " ",
                   p["kernel"]["arch"].get<std::string>(), ", ", r.files.size(), " files)\n");
  if (p.contains("triton") && p["triton"].is_object()) {
    const nlohmann::json& t = p["triton"];
    const nlohmann::json& ks = t["kernel_source"];
    absl::StrAppend(&s, "  kernel:  kernel.py (", t["function"].value("name", ""), ", from ",
                    ks.value("origin", "") == "module" ? "its module file" : "the recorded source",
                    "); variant selected by ", t["variant"].value("selected_by", ""), "\n");
    for (const auto& w : p["warnings"]) {
      absl::StrAppend(&s, "  warning: ", w.get<std::string>(), "\n");
    }
    absl::StrAppend(
        &s,
        "  needs:   torch + triton, and libkerncap_replay.so: export "
        "KERNCAP_REPLAY_LIB=/path/to/libkerncap_replay.so\n"
        "           (or put the folder holding kerncap-replay on PATH)\n",
        "  run:     cd ", r.out_dir, " && python3 run.py            # launch, same binary?, validate\n",
        "           python3 run.py --bench 100                         # vs the captured binary\n",
        "           python3 run.py --config '{\"num_warps\": 8}' [--grid X,Y,Z]   # another config\n",
        "           python3 run.py --dry-run                           # the call (no GPU); make help\n");
    return s;
  }
  const nlohmann::json& src = p["source"];
  const std::string outcome = src.value("outcome", "");
  if (outcome == "found") {
    absl::StrAppend(&s, "  source:  ", src["translation_unit"]["project"].get<std::string>(), " + ",
                    src["headers"].size(), " header(s); compile command from ",
                    p["compile"]["origin"].get<std::string>(), "\n");
    if (p["compile"]["origin"] == "default") {
      absl::StrAppend(&s, "  note:    ", p["compile"]["reason"].get<std::string>(), "\n");
    }
    if (p.contains("edit") && p["edit"].is_object()) {
      const nlohmann::json& e = p["edit"];
      std::string with;  // the minimal unit's compiler
      if (e.contains("compiler") && e["compiler"].is_object()) {
        const nlohmann::json& c = e["compiler"];
        with = c.value("tool", "") == "nvrtc"
                   ? " with kerncap-nvrtc"
                   : absl::StrCat(" with nvcc (not NVRTC: ", c.value("reason", ""), ")");
      }
      absl::StrAppend(&s, "  edit:    ", e.value("file", ""),
                      e.value("unit", "") == "minimal"
                          ? absl::StrCat(" (the minimal unit, verified: make recompile compiles it "
                                         "alone",
                                         with, "; make recompile-full the whole unit)")
                          : " (make recompile compiles the whole unit)",
                      "\n");
    }
  } else {
    absl::StrAppend(&s, "  source:  none (", outcome, "): ", src.value("message", ""), "\n");
  }
  for (const auto& w : p["warnings"]) {
    if (p["compile"]["origin"] == "default" && w == p["compile"]["reason"]) continue;
    absl::StrAppend(&s, "  warning: ", w.get<std::string>(), "\n");
  }
  absl::StrAppend(&s, "  next:    cd ", r.out_dir, " && make help\n");
  return s;
}

}  // namespace kerncap::repro
