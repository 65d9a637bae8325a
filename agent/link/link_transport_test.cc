#include "agent/link/link_transport.h"

#include "gtest/gtest.h"

namespace kerncap::agent {
namespace {

TEST(LinkTransportTest, CaptureBeginCarriesHeader) {
  CaptureHeader h;
  h.arm_id = "arm-7";
  h.dispatch_index = 5;
  h.kernel.mangled_name = "_Z3addPfS_S_i";
  h.kernel.demangled_name = "add(float*, float*, float*, int)";
  h.kernel.arch = "sm_90";
  h.kernel.jit_metadata_json = R"({"num_warps":4})";
  h.device.ordinal = 1;
  h.launch.grid = {4, 2, 1};
  h.launch.block = {256, 1, 1};
  h.launch.shared_mem_bytes = 65536;
  h.launch.cluster = {2, 1, 1};
  h.launch.cooperative = true;
  h.launch.stream = 0x1234;
  h.launch.attributes["func.num_regs"] = 32;
  h.arguments.push_back(ArgumentDesc{0, 8, ArgumentKind::kPointer, "", "", ""});
  h.arguments.push_back(ArgumentDesc{24, 4, ArgumentKind::kValue, "", "", ""});
  h.arguments.push_back(ArgumentDesc{32, 8, ArgumentKind::kHidden, "", "", "hidden_queue_ptr"});
  link::CaptureBeginMsg m = ToCaptureBegin(h);
  EXPECT_EQ(m.arm_id, "arm-7");
  EXPECT_EQ(m.dispatch_index, 5u);
  EXPECT_EQ(WireName(m.platform), "cuda");
  EXPECT_EQ(m.arch, "sm_90");
  EXPECT_EQ(m.jit_metadata_json, R"({"num_warps":4})");
  EXPECT_EQ(m.device, 1u);
  EXPECT_EQ(m.launch.grid, (std::vector<uint32_t>{4, 2, 1}));
  EXPECT_EQ(m.launch.cluster, (std::vector<uint32_t>{2, 1, 1}));
  EXPECT_TRUE(m.launch.cooperative);
  EXPECT_EQ(m.launch.shared_mem_bytes, 65536u);
  EXPECT_EQ(m.launch.attributes.at("func.num_regs"), 32);
  ASSERT_EQ(m.arguments.size(), 3u);
  EXPECT_EQ(WireName(m.arguments[0].kind), "pointer");
  EXPECT_EQ(WireName(m.arguments[1].kind), "value");
  EXPECT_EQ(m.arguments[1].offset, 24u);
  EXPECT_EQ(WireName(m.arguments[2].kind), "hidden");
  EXPECT_EQ(m.arguments[2].value_kind, "hidden_queue_ptr");
}

TEST(LinkTransportTest, CaptureBeginCarriesTextureObjectsExactly) {
  CaptureHeader h;
  TextureObjectDesc t;
  t.type = TextureObjectDesc::Type::kTexture;
  t.handle = 5;
  t.argument_offsets = {0, 24};
  t.resource.type = TextureResourceDesc::Type::kLinear;
  t.resource.device_ptr = 0x7f0000000000;
  t.resource.format = 0x20;
  t.resource.num_channels = 4;
  t.resource.size_bytes = 4096;
  t.sampling.address_mode = {3, 1, 0};
  t.sampling.filter_mode = 1;
  t.sampling.flags = 0x3;
  t.sampling.max_mipmap_level_clamp = -0.0f;
  t.sampling.border_color = {0.25f, 1.0f, -1.0f, 1e-30f};
  h.texture_objects.push_back(t);
  TextureObjectDesc s;
  s.type = TextureObjectDesc::Type::kSurface;
  s.handle = 9;
  s.argument_offsets = {8};
  s.resource.type = TextureResourceDesc::Type::kArray;
  s.resource.array_handle = 0x1234;
  s.has_view = true;
  s.view.depth = 3;
  h.texture_objects.push_back(s);
  link::CaptureBeginMsg m = ToCaptureBegin(h);
  ASSERT_EQ(m.texture_objects.size(), 2u);
  const link::TextureObjectInfo& a = m.texture_objects[0];
  EXPECT_EQ(WireName(a.type), "texture");
  EXPECT_EQ(a.handle, 5u);
  EXPECT_EQ(a.argument_offsets, (std::vector<uint32_t>{0, 24}));
  EXPECT_EQ(WireName(a.resource.type), "linear");
  EXPECT_EQ(a.resource.device_ptr, 0x7f0000000000u);
  EXPECT_EQ(a.resource.size_bytes, 4096u);
  EXPECT_EQ(a.resource.num_channels, 4u);
  EXPECT_EQ(a.sampling.address_mode, (std::vector<uint32_t>{3, 1, 0}));
  EXPECT_EQ(a.sampling.flags, 3u);
  EXPECT_EQ(a.sampling.max_mipmap_level_clamp_bits, 0x80000000u);  // -0.0f, bit for bit
  ASSERT_EQ(a.sampling.border_color_bits.size(), 4u);
  EXPECT_EQ(a.sampling.border_color_bits[0], 0x3e800000u);  // 0.25f
  EXPECT_FALSE(a.has_view);
  const link::TextureObjectInfo& b = m.texture_objects[1];
  EXPECT_EQ(WireName(b.type), "surface");
  EXPECT_EQ(WireName(b.resource.type), "array");
  EXPECT_EQ(b.resource.array_handle, 0x1234u);
  EXPECT_TRUE(b.has_view);
  EXPECT_EQ(b.view.depth, 3u);
}

TEST(LinkTransportTest, NoClusterMeansEmptyList) {
  CaptureHeader h;
  EXPECT_TRUE(ToCaptureBegin(h).launch.cluster.empty());
}

TEST(LinkTransportTest, RegionKindsUseLinkStrings) {
  RegionDesc r{0x7f0000000000, 4096, RegionKind::kConstant, 0, "coeffs"};
  link::RegionBeginMsg m = ToRegionBegin(ImageKind::kPost, r);
  EXPECT_EQ(WireName(m.image), "post");
  EXPECT_EQ(WireName(m.kind), "constant");
  EXPECT_EQ(m.name, "coeffs");
  EXPECT_EQ(m.va, 0x7f0000000000u);
  EXPECT_EQ(WireName(ToRegionBegin(ImageKind::kPre, RegionDesc{1, 1, RegionKind::kDeviceVmm, 0, ""}).kind),
            "device_vmm");
  EXPECT_EQ(WireName(ToRegionBegin(ImageKind::kPre, RegionDesc{1, 1, RegionKind::kHostPinned, 0, ""}).kind),
            "host_pinned");
  EXPECT_EQ(WireName(ToRegionBegin(ImageKind::kPre, RegionDesc{1, 1, RegionKind::kModuleGlobal, 0, ""}).kind),
            "module_global");
}

TEST(LinkTransportTest, GraphOriginTravelsOnlyForGraphNodes) {
  CaptureHeader h;
  EXPECT_FALSE(ToCaptureBegin(h).graph.present);
  h.from_graph = true;
  h.graph.exec = 0xE;
  h.graph.graph = 0xF;
  h.graph.exec_serial = 2;
  h.graph.launch_index = 5;
  h.graph.node_index = 3;
  h.graph.node_count = 9;
  h.graph.node_path = "2/0";
  h.graph.node = 0xA;
  h.graph.instantiate_flags = 8;
  link::CaptureBeginMsg m = ToCaptureBegin(h);
  EXPECT_TRUE(m.graph.present);
  EXPECT_EQ(m.graph.graph_exec, 0xEu);
  EXPECT_EQ(m.graph.graph, 0xFu);
  EXPECT_EQ(m.graph.exec_serial, 2u);
  EXPECT_EQ(m.graph.graph_launch, 5u);
  EXPECT_EQ(m.graph.node_index, 3u);
  EXPECT_EQ(m.graph.node_count, 9u);
  EXPECT_EQ(m.graph.node_path, "2/0");
  EXPECT_EQ(m.graph.node, 0xAu);
  EXPECT_EQ(m.graph.instantiate_flags, 8u);
  // And through the wire's JSON.
  link::CaptureBeginMsg back = nlohmann::json::parse(link::EncodeBody(m)).get<link::CaptureBeginMsg>();
  EXPECT_TRUE(back.graph.present);
  EXPECT_EQ(back.graph.node_path, "2/0");
  EXPECT_EQ(back.graph.graph_launch, 5u);
}

}  // namespace
}  // namespace kerncap::agent
