#include "daemon/agent_link/wire_convert.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kerncap::link {

absl::Status ToAbslStatus(const LinkStatus& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(status.message());
}

v1::Platform PlatformFromWire(absl::string_view p) {
  if (p == kPlatformCuda) return v1::PLATFORM_CUDA;
  if (p == kPlatformHsa) return v1::PLATFORM_HSA;
  if (p == kPlatformSynthetic) return v1::PLATFORM_SYNTHETIC;
  return v1::PLATFORM_UNSPECIFIED;
}

v1::RegionKind RegionKindFromWire(absl::string_view k) {
  if (k == "device") return v1::REGION_DEVICE;
  if (k == "device_vmm") return v1::REGION_DEVICE_VMM;
  if (k == "managed") return v1::REGION_MANAGED;
  if (k == "host_pinned") return v1::REGION_HOST_PINNED;
  if (k == "module_global") return v1::REGION_MODULE_GLOBAL;
  if (k == "constant") return v1::REGION_CONSTANT;
  if (k == "kernarg") return v1::REGION_KERNARG;
  return v1::REGION_KIND_UNSPECIFIED;
}

v1::CodeObjectFormat CodeObjectFormatFromWire(absl::string_view f) {
  if (f == "cubin") return v1::CODE_OBJECT_CUBIN;
  if (f == "fatbin") return v1::CODE_OBJECT_FATBIN;
  if (f == "ptx") return v1::CODE_OBJECT_PTX;
  if (f == "hsaco") return v1::CODE_OBJECT_HSACO;
  return v1::CODE_OBJECT_FORMAT_UNSPECIFIED;
}

v1::ArgumentKind ArgumentKindFromWire(absl::string_view k) {
  if (k == "value") return v1::ARG_BY_VALUE;
  if (k == "pointer") return v1::ARG_POINTER;
  if (k == "hidden") return v1::ARG_HIDDEN;
  return v1::ARGUMENT_KIND_UNSPECIFIED;
}

v1::DeviceIdentity DeviceFromWire(const DeviceInfo& d) {
  v1::DeviceIdentity out;
  out.set_ordinal(d.ordinal);
  out.set_name(d.name);
  out.set_arch(d.arch);
  out.set_uuid(d.uuid);
  out.set_total_memory(d.total_memory);
  out.set_pci_bus_id(d.pci_bus_id);
  return out;
}

v1::AgentInfo AgentInfoFromHello(const HelloMsg& h, const std::string& agent_id,
                                 int64_t connected_unix_ms) {
  v1::AgentInfo info;
  info.set_agent_id(agent_id);
  v1::ProcessIdentity* p = info.mutable_process();
  p->set_pid(h.pid);
  p->set_hostname(h.hostname);
  for (const std::string& arg : h.cmdline) p->add_cmdline(arg);
  p->set_process_name(h.process_name);
  info.set_platform(PlatformFromWire(h.platform));
  for (const DeviceInfo& d : h.devices) *info.add_devices() = DeviceFromWire(d);
  info.mutable_driver()->set_driver_version(h.driver.driver_version);
  info.mutable_driver()->set_runtime_version(h.driver.runtime_version);
  info.mutable_driver()->set_tool_version(h.driver.tool_version);
  info.set_connected_unix_ms(connected_unix_ms);
  info.set_agent_version(h.agent_version);
  return info;
}

Selector SelectorFromProto(const v1::Selector& in, int64_t expires_unix_ms) {
  Selector s;
  s.kernel = in.kernel();
  switch (in.match()) {
    case v1::NAME_GLOB: s.match = NameMatch::kGlob; break;
    case v1::NAME_REGEX: s.match = NameMatch::kRegex; break;
    case v1::NAME_MANGLED: s.match = NameMatch::kMangled; break;
    default: s.match = NameMatch::kSubstring; break;
  }
  s.pid = in.pid();
  s.process_name = in.process_name();
  s.device = in.has_device() ? in.device() : -1;
  s.skip = in.skip();
  s.nth = in.nth();
  s.count = in.count();
  s.expires_unix_ms = expires_unix_ms;
  return s;
}

void FillManifest(const HelloMsg& h, const CaptureBeginMsg& b, const std::string& blob,
                  v1::CaptureManifest* m) {
  m->set_format_version(1);
  m->set_source(v1::SOURCE_AGENT);
  v1::ProcessIdentity* p = m->mutable_process();
  p->set_pid(h.pid);
  p->set_hostname(h.hostname);
  for (const std::string& arg : h.cmdline) p->add_cmdline(arg);
  p->set_process_name(h.process_name);
  for (const DeviceInfo& d : h.devices) {
    if (d.ordinal == b.device) *m->mutable_device() = DeviceFromWire(d);
  }
  if (!m->has_device()) m->mutable_device()->set_ordinal(b.device);
  m->mutable_driver()->set_driver_version(h.driver.driver_version);
  m->mutable_driver()->set_runtime_version(h.driver.runtime_version);
  m->mutable_driver()->set_tool_version(h.driver.tool_version);
  v1::KernelIdentity* k = m->mutable_kernel();
  k->set_mangled_name(b.mangled_name);
  k->set_demangled_name(b.demangled_name);
  k->set_platform(PlatformFromWire(b.platform.empty() ? h.platform : b.platform));
  k->set_arch(b.arch.empty() ? m->device().arch() : b.arch);
  k->set_jit_metadata_json(b.jit_metadata_json);
  v1::LaunchConfig* l = m->mutable_launch();
  for (uint32_t v : b.launch.grid) l->add_grid(v);
  for (uint32_t v : b.launch.block) l->add_block(v);
  l->set_shared_mem_bytes(b.launch.shared_mem_bytes);
  l->set_private_mem_bytes(b.launch.private_mem_bytes);
  for (uint32_t v : b.launch.cluster) l->add_cluster(v);
  l->set_cooperative(b.launch.cooperative);
  l->set_stream(b.launch.stream);
  for (const auto& [name, value] : b.launch.attributes) (*l->mutable_attributes())[name] = value;
  m->set_argument_blob(blob);
  for (const ArgumentInfo& a : b.arguments) {
    v1::Argument* out = m->add_arguments();
    out->set_offset(a.offset);
    out->set_size(a.size);
    out->set_kind(ArgumentKindFromWire(a.kind));
    // HSA runtime-owned arguments are hidden whatever kind string came along.
    if (absl::StartsWith(a.value_kind, "hidden_")) out->set_kind(v1::ARG_HIDDEN);
    out->set_name(a.name);
    out->set_type_name(a.type_name);
    out->set_value_kind(a.value_kind);
  }
  m->set_dispatch_index(b.dispatch_index);
  m->set_arm_id(b.arm_id);
  if (b.graph.present) {
    v1::GraphOrigin* g = m->mutable_graph();
    g->set_graph_exec(b.graph.graph_exec);
    g->set_graph(b.graph.graph);
    g->set_exec_serial(b.graph.exec_serial);
    g->set_graph_launch(b.graph.graph_launch);
    g->set_node_index(b.graph.node_index);
    g->set_node_count(b.graph.node_count);
    g->set_node_path(b.graph.node_path);
    g->set_node(b.graph.node);
    g->set_instantiate_flags(b.graph.instantiate_flags);
  }
}

absl::Status CheckGraphOrigin(const CaptureBeginMsg& b) {
  const GraphOriginInfo& g = b.graph;
  if (!g.present) return absl::OkStatus();
  if (g.node_count == 0 || g.node_index >= g.node_count) {
    return absl::InvalidArgumentError(absl::StrCat("graph origin: node_index ", g.node_index,
                                                   " is not below node_count ", g.node_count));
  }
  if (g.node_path.empty() || g.node_path.size() > kMaxGraphNodePath) {
    return absl::InvalidArgumentError(absl::StrCat("graph origin: node_path of ",
                                                   g.node_path.size(), " characters (1 to ",
                                                   kMaxGraphNodePath, " allowed)"));
  }
  bool digit_before = false;
  for (char ch : g.node_path) {
    if (ch >= '0' && ch <= '9') {
      digit_before = true;
    } else if (ch == '/' && digit_before) {
      digit_before = false;
    } else {
      return absl::InvalidArgumentError("graph origin: node_path is not indices joined by '/'");
    }
  }
  if (!digit_before) {
    return absl::InvalidArgumentError("graph origin: node_path is not indices joined by '/'");
  }
  return absl::OkStatus();
}

}  // namespace kerncap::link
