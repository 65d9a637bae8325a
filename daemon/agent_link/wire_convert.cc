#include "daemon/agent_link/wire_convert.h"

#include <bit>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kerncap::link {

absl::Status ToAbslStatus(const LinkStatus& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(status.message());
}

v1::Platform PlatformFromWire(Platform p) {
  switch (p) {
    case Platform::kUnspecified: return v1::PLATFORM_UNSPECIFIED;
    case Platform::kCuda: return v1::PLATFORM_CUDA;
    case Platform::kHsa: return v1::PLATFORM_HSA;
    case Platform::kSynthetic: return v1::PLATFORM_SYNTHETIC;
  }
  return v1::PLATFORM_UNSPECIFIED;
}

v1::RegionKind RegionKindFromWire(RegionKind k) {
  switch (k) {
    case RegionKind::kDevice: return v1::REGION_DEVICE;
    case RegionKind::kDeviceVmm: return v1::REGION_DEVICE_VMM;
    case RegionKind::kManaged: return v1::REGION_MANAGED;
    case RegionKind::kHostPinned: return v1::REGION_HOST_PINNED;
    case RegionKind::kModuleGlobal: return v1::REGION_MODULE_GLOBAL;
    case RegionKind::kConstant: return v1::REGION_CONSTANT;
    case RegionKind::kKernarg: return v1::REGION_KERNARG;
  }
  return v1::REGION_KIND_UNSPECIFIED;
}

v1::CodeObjectFormat CodeObjectFormatFromWire(CodeObjectFormat f) {
  switch (f) {
    case CodeObjectFormat::kUnspecified: return v1::CODE_OBJECT_FORMAT_UNSPECIFIED;
    case CodeObjectFormat::kCubin: return v1::CODE_OBJECT_CUBIN;
    case CodeObjectFormat::kFatbin: return v1::CODE_OBJECT_FATBIN;
    case CodeObjectFormat::kPtx: return v1::CODE_OBJECT_PTX;
    case CodeObjectFormat::kHsaco: return v1::CODE_OBJECT_HSACO;
  }
  return v1::CODE_OBJECT_FORMAT_UNSPECIFIED;
}

v1::ArgumentKind ArgumentKindFromWire(ArgumentKind k) {
  switch (k) {
    case ArgumentKind::kUnspecified: return v1::ARGUMENT_KIND_UNSPECIFIED;
    case ArgumentKind::kValue: return v1::ARG_BY_VALUE;
    case ArgumentKind::kPointer: return v1::ARG_POINTER;
    case ArgumentKind::kHidden: return v1::ARG_HIDDEN;
  }
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
  info.set_rank(h.rank.rank);
  info.set_local_rank(h.rank.local_rank);
  info.set_world_size(h.rank.world_size);
  info.set_rank_source(h.rank.source.substr(0, 64));
  return info;
}

namespace {

v1::TextureObject::Type TextureTypeFromWire(TextureObjectType t) {
  switch (t) {
    case TextureObjectType::kTexture: return v1::TextureObject::TEXTURE_OBJECT;
    case TextureObjectType::kSurface: return v1::TextureObject::SURFACE_OBJECT;
  }
  return v1::TextureObject::TEXTURE_OBJECT_TYPE_UNSPECIFIED;
}

v1::TextureResource::Type ResourceTypeFromWire(TextureResourceType t) {
  switch (t) {
    case TextureResourceType::kArray: return v1::TextureResource::RESOURCE_ARRAY;
    case TextureResourceType::kMipmappedArray: return v1::TextureResource::RESOURCE_MIPMAPPED_ARRAY;
    case TextureResourceType::kLinear: return v1::TextureResource::RESOURCE_LINEAR;
    case TextureResourceType::kPitch2D: return v1::TextureResource::RESOURCE_PITCH2D;
  }
  return v1::TextureResource::RESOURCE_TYPE_UNSPECIFIED;
}

void TextureObjectFromWire(const TextureObjectInfo& in, v1::TextureObject* out) {
  out->set_type(TextureTypeFromWire(in.type));
  out->set_handle(in.handle);
  for (uint32_t off : in.argument_offsets) out->add_argument_offsets(off);
  v1::TextureResource* r = out->mutable_resource();
  r->set_type(ResourceTypeFromWire(in.resource.type));
  r->set_device_ptr(in.resource.device_ptr);
  r->set_format(in.resource.format);
  r->set_num_channels(in.resource.num_channels);
  r->set_size_bytes(in.resource.size_bytes);
  r->set_width(in.resource.width);
  r->set_height(in.resource.height);
  r->set_pitch_bytes(in.resource.pitch_bytes);
  r->set_flags(in.resource.flags);
  r->set_array_handle(in.resource.array_handle);
  if (out->type() == v1::TextureObject::TEXTURE_OBJECT) {
    const TextureSamplingInfo& s = in.sampling;
    v1::TextureSampling* t = out->mutable_sampling();
    for (uint32_t m : s.address_mode) t->add_address_mode(m);
    t->set_filter_mode(s.filter_mode);
    t->set_flags(s.flags);
    t->set_max_anisotropy(s.max_anisotropy);
    t->set_mipmap_filter_mode(s.mipmap_filter_mode);
    t->set_mipmap_level_bias(std::bit_cast<float>(s.mipmap_level_bias_bits));
    t->set_min_mipmap_level_clamp(std::bit_cast<float>(s.min_mipmap_level_clamp_bits));
    t->set_max_mipmap_level_clamp(std::bit_cast<float>(s.max_mipmap_level_clamp_bits));
    for (uint32_t b : s.border_color_bits) t->add_border_color(std::bit_cast<float>(b));
  }
  if (in.has_view) {
    v1::TextureView* v = out->mutable_view();
    v->set_format(in.view.format);
    v->set_width(in.view.width);
    v->set_height(in.view.height);
    v->set_depth(in.view.depth);
    v->set_first_mipmap_level(in.view.first_mipmap_level);
    v->set_last_mipmap_level(in.view.last_mipmap_level);
    v->set_first_layer(in.view.first_layer);
    v->set_last_layer(in.view.last_layer);
  }
}

}  // namespace

absl::Status CheckTextureObjects(const CaptureBeginMsg& b, absl::string_view blob) {
  if (b.texture_objects.size() > kMaxTextureObjects) {
    return absl::InvalidArgumentError(absl::StrCat("CaptureBegin names ", b.texture_objects.size(),
                                                   " texture objects (at most ",
                                                   kMaxTextureObjects, ")"));
  }
  for (size_t i = 0; i < b.texture_objects.size(); ++i) {
    const TextureObjectInfo& t = b.texture_objects[i];
    const std::string where = absl::StrCat("texture object ", i, " (handle 0x",
                                           absl::Hex(t.handle), ")");
    // Type and resource type: checked when the frame was decoded (vocabulary.h).
    if (t.argument_offsets.empty() || t.argument_offsets.size() > kMaxTextureObjects) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", t.argument_offsets.size(),
                                                     " argument offsets (1..",
                                                     kMaxTextureObjects, " expected)"));
    }
    for (uint32_t off : t.argument_offsets) {
      if (off % 8 != 0 || static_cast<uint64_t>(off) + 8 > blob.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": argument offset ", off, " is not an aligned word of the ", blob.size(),
            "-byte argument blob"));
      }
      uint64_t v;
      std::memcpy(&v, blob.data() + off, sizeof(v));
      if (v != t.handle) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": the argument word at offset ",
                                                       off, " holds 0x", absl::Hex(v),
                                                       ", not the handle"));
      }
    }
    if (t.sampling.address_mode.size() > 3 || t.sampling.border_color_bits.size() > 4) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": more than 3 address modes or 4 border colour values"));
    }
  }
  return absl::OkStatus();
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
  if (h.rank.rank >= 0) {
    p->set_rank(h.rank.rank);
    p->set_has_rank(true);
  }
  // Only a well-formed key is kept (ArmRegistry::Reserve refuses a per-shape
  // arm's capture without one; other arms' captures carry none).
  if (IsLaunchShapeKey(b.launch_shape)) m->set_launch_shape(b.launch_shape);
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
  k->set_platform(PlatformFromWire(b.platform == Platform::kUnspecified ? h.platform : b.platform));
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
  for (const TextureObjectInfo& t : b.texture_objects) {
    TextureObjectFromWire(t, m->add_texture_objects());
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
