#include "reproducer/generator/project_manifest.h"

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/version.h"
#include "reproducer/replay/core/capture_source.h"

namespace kerncap::repro {
namespace {

using nlohmann::json;

const char* ArgKindName(v1::ArgumentKind k) {
  switch (k) {
    case v1::ARG_POINTER:
      return "pointer";
    case v1::ARG_BY_VALUE:
      return "value";
    case v1::ARG_HIDDEN:
      return "hidden";
    default:
      return "unknown";
  }
}

json Dims(const google::protobuf::RepeatedField<uint32_t>& d) {
  json a = json::array();
  for (uint32_t v : d) a.push_back(v);
  return a;
}

json StringList(const std::vector<std::string>& v) {
  json a = json::array();
  for (const std::string& s : v) a.push_back(s);
  return a;
}

json SourceJson(const ProjectFacts& f) {
  const SourceLocation* s = f.source;
  if (s == nullptr) return json{{"outcome", "not_searched"}};
  json j = {{"outcome", SourceOutcomeName(s->outcome)},
            {"message", s->message},
            {"line_table_files", StringList(s->lines.files)},
            {"tried", StringList(s->tried)},
            {"databases_tried", StringList(s->databases_tried)}};
  if (s->outcome == SourceOutcome::kFound) {
    j["translation_unit"] = {{"original", s->tu_original}, {"project", f.compile.translation_unit}};
    j["headers"] = StringList(f.headers);
  } else if (!s->tu_original.empty()) {
    j["translation_unit"] = {{"original", s->tu_original}, {"project", nullptr}};
  }
  if (s->remap.has_value()) j["remap"] = {{"from", s->remap->from}, {"to", s->remap->to}};
  if (!s->unit.method.empty()) {
    j["unit_selection"] = {{"method", s->unit.method},
                           {"candidates", StringList(s->unit.candidates)},
                           {"ambiguous", s->unit.ambiguous},
                           {"note", s->unit.note}};
  }
  if (f.closure != nullptr) {
    j["include_closure"] = {{"method", f.closure->method}, {"note", f.closure->note}};
  }
  if (!s->lines.warnings.empty()) j["dwarf_warnings"] = StringList(s->lines.warnings);
  return j;
}

json OptionFilesJson(const ProjectFacts& f) {
  json a = json::array();
  if (f.source == nullptr) return a;
  for (const OptionFileUse& u : f.source->option_files) {
    a.push_back({{"flag", u.flag},
                 {"file", u.path},
                 {"depth", u.depth},
                 {"expanded", u.error.empty()},
                 {"error", u.error}});
  }
  return a;
}

json CompileJson(const CompileSection& c) {
  json j = {{"present", c.origin != CompileOrigin::kNone},
            {"origin", CompileOriginName(c.origin)},
            {"reason", c.reason}};
  if (c.origin == CompileOrigin::kNone) return j;
  j["original_tool"] = c.original_tool;
  j["tool_variable"] = c.tool_variable;
  j["command"] = StringList(c.command);
  j["link_command"] = StringList(c.link_command);
  j["translation_unit"] = c.translation_unit;
  json ext = json::object();
  for (const auto& [k, v] : c.external) ext[k] = v;
  j["external_paths"] = ext;
  json dropped = json::array();
  for (const DroppedFlag& d : c.dropped)
    dropped.push_back({{"flag", d.flag}, {"reason", d.reason}});
  j["dropped_flags"] = dropped;
  return j;
}

json ToolkitJson(const ToolkitSection& t) {
  json j = {{"application", nullptr}, {"reproducer", nullptr}, {"same", nullptr},
            {"note", t.note}};
  const ToolkitInfo& a = t.application;
  if (a.found || a.has_cuinfo) {
    j["application"] = {
        {"tool", a.tool},
        {"version_line", a.version_line},
        {"release", a.version.release},
        {"version", a.version.version},
        {"build", a.build},
        {"tool_options", a.tool_options},
        {"ptx_arch", a.has_cuinfo ? json(absl::StrCat("compute_", a.ptx_arch)) : json(nullptr)},
        {"cuinfo_toolkit",
         a.has_cuinfo && a.cuinfo_toolkit > 0
             ? json(absl::StrCat(a.cuinfo_toolkit / 10, ".", a.cuinfo_toolkit % 10))
             : json(nullptr)}};
    if (!a.problems.empty()) j["application"]["problems"] = StringList(a.problems);
  }
  if (!t.reproducer.empty()) {
    j["reproducer"] = {{"tool", t.reproducer_tool},
                       {"version_line", t.reproducer_version_line},
                       {"release", t.reproducer.release},
                       {"version", t.reproducer.version}};
  }
  if (!a.version.version.empty() && !t.reproducer.version.empty()) {
    j["same"] = a.version.version == t.reproducer.version;
  }
  return j;
}

json ProvenanceJson(const v1::CaptureManifest& m) {
  json tags = json::object();
  for (const auto& [k, v] : m.tags()) tags[k] = v;
  std::vector<std::string> cmdline(m.process().cmdline().begin(), m.process().cmdline().end());
  return {
      {"capture_id", m.capture_id()},
      {"capture_source", v1::CaptureSource_Name(m.source())},
      {"host", m.process().hostname()},
      {"pid", m.process().pid()},
      {"process_name", m.process().process_name()},
      {"command_line", StringList(cmdline)},
      {"captured_unix_ms", m.created_unix_ms()},
      {"captured_at",
       absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(m.created_unix_ms()),
                        absl::UTCTimeZone())},
      {"dispatch_index", m.dispatch_index()},
      {"device",
       {{"name", m.device().name()}, {"arch", m.device().arch()}, {"uuid", m.device().uuid()}}},
      {"driver",
       {{"driver_version", m.driver().driver_version()},
        {"runtime_version", m.driver().runtime_version()},
        {"tool_version", m.driver().tool_version()}}},
      {"tags", tags},
  };
}

}  // namespace

std::string Hex(uint64_t v) { return absl::StrFormat("0x%x", v); }

json ArgumentsJson(const v1::CaptureManifest& m) {
  json args = json::array();
  const std::string& blob = m.argument_blob();
  for (int i = 0; i < m.arguments_size(); ++i) {
    const v1::Argument& a = m.arguments(i);
    json j = {{"index", i},
              {"offset", a.offset()},
              {"size", a.size()},
              {"kind", ArgKindName(a.kind())},
              {"name", a.name()},
              {"type", a.type_name()},
              {"value_kind", a.value_kind()}};
    const bool in_blob = uint64_t{a.offset()} + a.size() <= blob.size();
    if (in_blob && a.size() <= 256) {
      j["value_hex"] = absl::BytesToHexString(blob.substr(a.offset(), a.size()));
    }
    if (in_blob && a.size() == 8 && a.kind() != v1::ARG_HIDDEN) {
      uint64_t v = 0;
      std::memcpy(&v, blob.data() + a.offset(), 8);
      json ptr = {{"value", Hex(v)}, {"region", nullptr}};
      bool found = false;
      for (int r = 0; r < m.pre().regions_size() && v != 0; ++r) {
        const v1::Region& reg = m.pre().regions(r);
        if (v < reg.va() || v - reg.va() >= reg.data().size()) continue;
        ptr["region"] = {{"index", r},
                         {"kind", replay::RegionKindName(reg.kind())},
                         {"base", Hex(reg.va())},
                         {"size", reg.data().size()},
                         {"name", reg.name()}};
        ptr["offset"] = v - reg.va();
        found = true;
        break;
      }
      if (!found) {
        ptr["note"] = v == 0 ? "null pointer" : "points outside every captured region";
      }
      if (found || a.kind() == v1::ARG_POINTER) j["pointer"] = ptr;
    }
    args.push_back(std::move(j));
  }
  return args;
}

json BuildProjectManifest(const ProjectFacts& f) {
  const v1::CaptureManifest& m = *f.capture;
  const v1::LaunchConfig& l = m.launch();
  json attrs = json::object();
  for (const auto& [k, v] : l.attributes()) attrs[k] = v;
  json files = json::array();
  for (const ProjectFile& pf : f.files) {
    files.push_back(
        {{"path", pf.path}, {"bytes", pf.bytes}, {"sha256", pf.sha256}, {"role", pf.role}});
  }
  json code = {
      {"file", f.code.file},
      {"format", f.code.format},
      {"disassembly", f.code.disassembly.empty() ? json(nullptr) : json(f.code.disassembly)},
      {"disassembler", f.code.disassembler},
      {"note", f.code.note}};
  json compile = CompileJson(f.compile);
  if (f.compile.origin == CompileOrigin::kDatabase) compile["option_files"] = OptionFilesJson(f);
  json out = {
      {"schema", "kerncap.reproducer"},
      {"schema_version", kProjectSchemaVersion},
      {"generator", std::string("kerncap ") + ::kerncap::kVersion},
      {"kind", !f.triton.is_null() ? "triton" : f.source_project ? "source" : "binary"},
      {"kernel",
       {{"mangled", m.kernel().mangled_name()},
        {"demangled", m.kernel().demangled_name()},
        {"platform", f.platform},
        {"arch", f.arch}}},
      {"launch",
       {{"grid", Dims(l.grid())},
        {"block", Dims(l.block())},
        {"shared_mem_bytes", l.shared_mem_bytes()},
        {"private_mem_bytes", l.private_mem_bytes()},
        {"cluster", Dims(l.cluster())},
        {"cooperative", l.cooperative()},
        {"attributes", attrs}}},
      {"arguments", ArgumentsJson(m)},
      {"code_object", code},
      {"toolkit", ToolkitJson(f.toolkit)},
      {"compile", compile},
      {"source", SourceJson(f)},
      {"provenance", ProvenanceJson(m)},
      {"files", files},
      {"warnings", StringList(f.warnings)},
  };
  if (!f.triton.is_null()) out["triton"] = f.triton;
  if (!f.edit.is_null()) out["edit"] = f.edit;
  return out;
}

}  // namespace kerncap::repro
