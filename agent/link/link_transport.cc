#include "agent/link/link_transport.h"

#include <bit>

#include "agent/core/log.h"

namespace kerncap::agent {
namespace {

link::TextureObjectInfo ToTextureObjectInfo(const TextureObjectDesc& o) {
  link::TextureObjectInfo t;
  t.type = o.type;
  t.handle = o.handle;
  t.argument_offsets = o.argument_offsets;
  const TextureResourceDesc& r = o.resource;
  t.resource.type = r.type;
  t.resource.device_ptr = r.device_ptr;
  t.resource.format = r.format;
  t.resource.num_channels = r.num_channels;
  t.resource.size_bytes = r.size_bytes;
  t.resource.width = r.width;
  t.resource.height = r.height;
  t.resource.pitch_bytes = r.pitch_bytes;
  t.resource.flags = r.flags;
  t.resource.array_handle = r.array_handle;
  const TextureSamplingDesc& s = o.sampling;
  t.sampling.address_mode.assign(s.address_mode.begin(), s.address_mode.end());
  t.sampling.filter_mode = s.filter_mode;
  t.sampling.flags = s.flags;
  t.sampling.max_anisotropy = s.max_anisotropy;
  t.sampling.mipmap_filter_mode = s.mipmap_filter_mode;
  t.sampling.mipmap_level_bias_bits = std::bit_cast<uint32_t>(s.mipmap_level_bias);
  t.sampling.min_mipmap_level_clamp_bits = std::bit_cast<uint32_t>(s.min_mipmap_level_clamp);
  t.sampling.max_mipmap_level_clamp_bits = std::bit_cast<uint32_t>(s.max_mipmap_level_clamp);
  for (float f : s.border_color) t.sampling.border_color_bits.push_back(std::bit_cast<uint32_t>(f));
  t.has_view = o.has_view;
  t.view.format = o.view.format;
  t.view.width = o.view.width;
  t.view.height = o.view.height;
  t.view.depth = o.view.depth;
  t.view.first_mipmap_level = o.view.first_mipmap_level;
  t.view.last_mipmap_level = o.view.last_mipmap_level;
  t.view.first_layer = o.view.first_layer;
  t.view.last_layer = o.view.last_layer;
  return t;
}

class LinkSession final : public TransportSession {
 public:
  LinkSession(std::unique_ptr<CaptureSession> s, bool async_end)
      : s_(std::move(s)), async_end_(async_end) {}

  Result<int> AddRegion(ImageKind image, const RegionDesc& region) override {
    auto r = s_->AddRegion(ToRegionBegin(image, region));
    if (!r.ok()) return r.status();
    return static_cast<int>(r.value());
  }
  Status AcquireSlot(Slot* slot) override {
    auto r = s_->AcquireSlot(LinkTransport::kSlotTimeoutMs);
    if (!r.ok()) return r.status();
    *slot = Slot{static_cast<int>(r->index), r->data, static_cast<size_t>(r->capacity)};
    return OkStatus();
  }
  Status SubmitSlot(const Slot& slot, int region, uint64_t offset, size_t length) override {
    return s_->SubmitSlot(ToLinkSlot(slot), static_cast<uint32_t>(region), offset, length);
  }
  void ReturnSlot(const Slot& slot) override { s_->ReturnSlot(ToLinkSlot(slot)); }
  Status AddCodeObject(const CodeObjectRef& code) override {
    return s_->AddCodeObject(code.format, code.name, code.bytes->data(),
                             code.bytes->size());
  }
  uint64_t UnchangedChunkSize() const override {
    return s_->unchanged_supported() ? s_->chunk_size() : 0;
  }
  Status MarkUnchanged(int region, uint64_t first_chunk, uint64_t count) override {
    return s_->MarkUnchanged(static_cast<uint32_t>(region), first_chunk, count);
  }
  uint64_t FingerprintChunkSize() const override {
    return s_->fingerprints_supported() && s_->unchanged_supported() ? s_->chunk_size() : 0;
  }
  Status QueryKnown(const std::vector<ChunkFingerprint>& fps,
                    std::vector<uint8_t>* held) override {
    auto r = s_->QueryKnown(fps);
    if (!r.ok()) return r.status();
    *held = std::move(r).value();
    return OkStatus();
  }
  Status MarkKnown(int region, uint64_t first_chunk,
                   const std::vector<ChunkFingerprint>& fps) override {
    return s_->MarkKnown(static_cast<uint32_t>(region), first_chunk, fps);
  }
  Status TellFingerprints(int region, uint64_t first_chunk,
                          const std::vector<ChunkFingerprint>& fps) override {
    return s_->TellFingerprints(static_cast<uint32_t>(region), first_chunk, fps);
  }
  void SetTiming(const CaptureTiming& t) override {
    link::CaptureTimingInfo w;
    w.path = t.path;
    w.path_reason = t.path_reason;
    w.quiesce_seconds = t.quiesce_seconds;
    w.pre_seconds = t.pre_seconds;
    w.post_seconds = t.post_seconds;
    w.held_seconds = t.held_seconds;
    w.drain_seconds = t.drain_seconds;
    w.pcie_bytes = t.pcie_bytes;
    w.unchanged_post_bytes = t.unchanged_post_bytes;
    w.fingerprint_seconds = t.fingerprint_seconds;
    s_->SetTiming(w);
  }
  Status End(bool post_complete) override {
    if (async_end_) {
      Status st = s_->EndAsync(post_complete);
      if (st.ok()) KC_ALOG(kDebug, "capture handed to kerncapd; its verdict follows");
      return st;
    }
    auto id = s_->End(post_complete);
    if (!id.ok()) return id.status();
    KC_ALOG(kInfo, "capture %s committed by kerncapd", id.value().c_str());
    return OkStatus();
  }
  void Abort(std::string_view reason) override { s_->Abort(std::string(reason)); }

 private:
  static CaptureSession::Slot ToLinkSlot(const Slot& slot) {
    CaptureSession::Slot s;
    s.index = static_cast<uint32_t>(slot.index);
    s.data = static_cast<uint8_t*>(slot.data);
    s.capacity = slot.capacity;
    return s;
  }
  std::unique_ptr<CaptureSession> s_;
  bool async_end_;
};

}  // namespace

link::CaptureBeginMsg ToCaptureBegin(const CaptureHeader& h) {
  link::CaptureBeginMsg m;
  m.arm_id = h.arm_id;
  m.dispatch_index = h.dispatch_index;
  m.launch_shape = h.launch_shape;
  m.mangled_name = h.kernel.mangled_name;
  m.demangled_name = h.kernel.demangled_name;
  m.platform = h.kernel.platform;
  m.arch = h.kernel.arch;
  m.jit_metadata_json = h.kernel.jit_metadata_json;
  m.device = static_cast<uint32_t>(h.device.ordinal);
  m.launch.grid.assign(h.launch.grid.begin(), h.launch.grid.end());
  m.launch.block.assign(h.launch.block.begin(), h.launch.block.end());
  m.launch.shared_mem_bytes = h.launch.shared_mem_bytes;
  if (h.launch.cluster[0] != 0) m.launch.cluster.assign(h.launch.cluster.begin(), h.launch.cluster.end());
  m.launch.cooperative = h.launch.cooperative;
  m.launch.stream = h.launch.stream;
  m.launch.attributes = h.launch.attributes;
  if (h.from_graph) {
    link::GraphOriginInfo& g = m.graph;
    g.present = true;
    g.graph_exec = h.graph.exec;
    g.graph = h.graph.graph;
    g.exec_serial = h.graph.exec_serial;
    g.graph_launch = h.graph.launch_index;
    g.node_index = h.graph.node_index;
    g.node_count = h.graph.node_count;
    g.node_path = h.graph.node_path;
    g.node = h.graph.node;
    g.instantiate_flags = h.graph.instantiate_flags;
  }
  for (const ArgumentDesc& a : h.arguments) {
    link::ArgumentInfo info;
    info.offset = a.offset;
    info.size = a.size;
    info.kind = a.kind;
    info.name = a.name;
    info.type_name = a.type_name;
    info.value_kind = a.value_kind;
    m.arguments.push_back(std::move(info));
  }
  for (const TextureObjectDesc& o : h.texture_objects) {
    m.texture_objects.push_back(ToTextureObjectInfo(o));
  }
  return m;
}

link::SampledConfig ToSampledConfig(const LaunchDesc& launch) {
  link::SampledConfig c;
  c.grid = launch.grid;
  c.block = launch.block;
  c.shared_mem_bytes = launch.shared_mem_bytes;
  c.cluster = launch.cluster;
  return c;
}

link::RegionBeginMsg ToRegionBegin(ImageKind image, const RegionDesc& region) {
  link::RegionBeginMsg m;
  m.image = image;
  m.va = region.va;
  m.size = region.size;
  m.kind = region.kind;
  m.device = static_cast<uint32_t>(region.device < 0 ? 0 : region.device);
  m.name = region.name;
  return m;
}

std::optional<CaptureTicket> LinkTransport::ShouldCapture(const KernelMatchInfo& info) {
  auto match = client_->ShouldCapture(info.demangled_name, info.mangled_name, info.device,
                                      &info.launch_shape);
  if (!match) return std::nullopt;
  return CaptureTicket{match->arm_id, match->dispatch_index, match->launch_shape};
}

std::vector<std::string> LinkTransport::ArmsMatching(const KernelMatchInfo& info) {
  return client_->ArmsMatching(info.demangled_name, info.mangled_name, info.device);
}

Result<std::unique_ptr<TransportSession>> LinkTransport::Begin(const CaptureHeader& header,
                                                               std::string_view arg_blob) {
  auto session = client_->BeginCapture(ToCaptureBegin(header), arg_blob);
  if (!session.ok()) return session.status();
  return std::unique_ptr<TransportSession>(new LinkSession(std::move(session.value()), async_end_));
}

bool LinkTransport::ReportSkipped(const CaptureTicket& ticket, const KernelMatchInfo& info,
                                  std::string_view reason, bool give_back) {
  link::DispatchSkippedMsg msg;
  msg.arm_id = ticket.arm_id;
  msg.dispatch_index = ticket.dispatch_index;
  msg.kernel = info.demangled_name.empty() ? info.mangled_name : info.demangled_name;
  msg.device = static_cast<uint32_t>(info.device < 0 ? 0 : info.device);
  msg.reason = std::string(reason);
  return client_->ReportSkipped(std::move(msg), give_back);
}

}  // namespace kerncap::agent
