// capture_types.h: backend-neutral description of one captured dispatch, as
// the capture core hands it to the transport (agent link). Field meanings
// follow kerncap.v1.CaptureManifest (proto/kerncap/v1/manifest.proto).
#ifndef KERNCAP_AGENT_CORE_CAPTURE_TYPES_H_
#define KERNCAP_AGENT_CORE_CAPTURE_TYPES_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/agent_link/launch_shape.h"
#include "common/agent_link/vocabulary.h"

namespace kerncap::agent {

// The link's enumerations (common/agent_link/vocabulary.h; numbered as their
// kerncap.v1 counterparts): the core describes a capture in the terms it
// travels in, so the transport translates nothing.
using link::ArgumentKind;
using link::CapturePath;
using link::CodeObjectFormat;
using link::ImageKind;
using link::Platform;
using link::RegionKind;

// One range of the application's address space that is captured.
struct RegionDesc {
  uint64_t va = 0;
  uint64_t size = 0;
  RegionKind kind = RegionKind::kDevice;
  int device = 0;
  std::string name;  // symbol name for module globals / constants
};

// A code object image, shared (not copied) between the module registry and
// the captures that ship it.
struct CodeObjectRef {
  std::string name;                         // module name or "module-<id>"
  CodeObjectFormat format = CodeObjectFormat::kCubin;
  std::shared_ptr<const std::string> bytes;  // the image
  uint64_t key = 0;                          // CodeObjectKey(bytes): dedup key
};

// == kerncap.v1.Argument
struct ArgumentDesc {
  uint32_t offset = 0;
  uint32_t size = 0;
  ArgumentKind kind = ArgumentKind::kValue;
  std::string name;
  std::string type_name;   // source type when known ("float*")
  std::string value_kind;  // HSA metadata value kind ("global_buffer", "hidden_queue_ptr")
};

struct LaunchDesc {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t shared_mem_bytes = 0;
  std::array<uint32_t, 3> cluster{0, 0, 0};  // all zero: no cluster launch
  bool cooperative = false;
  uint64_t stream = 0;
  std::map<std::string, int64_t> attributes;  // function and launch attributes by name
};

class AllocationTable;  // allocation_table.h

// A dispatch's per-shape key (common/agent_link/launch_shape.h) from its
// launch and, for kScalars, its argument bytes; a word counts as a pointer
// when `allocations` holds its address. What both backends compute.
uint64_t DispatchShapeKey(link::PerShape mode, const LaunchDesc& launch,
                          std::string_view argument_blob, const AllocationTable& allocations);

struct KernelDesc {
  std::string mangled_name;
  std::string demangled_name;
  Platform platform = Platform::kCuda;
  std::string arch;  // "sm_90"
  std::string jit_metadata_json;  // from JitMetadataRegistry; empty for AOT kernels
};

struct DeviceDesc {
  int ordinal = 0;
  std::string name;
  std::string arch;
  std::string uuid;
  uint64_t total_memory = 0;
  std::string pci_bus_id;
};

struct DriverDesc {
  std::string driver_version;
  std::string runtime_version;
  std::string tool_version;
};

// == kerncap.v1.GraphOrigin: the captured dispatch was a kernel node of a
// CUDA graph launch (cuGraphLaunch), run node by node by the agent.
struct GraphOriginDesc {
  uint64_t exec = 0;               // CUgraphExec handle
  uint64_t graph = 0;              // CUgraph it was instantiated (or last updated) from
  uint64_t exec_serial = 0;        // agent-assigned, 1-based, unique per process
  uint64_t launch_index = 0;       // launches of the exec the agent saw while armed (1-based)
  uint32_t node_index = 0;         // position in the flattened topological order (0-based)
  uint32_t node_count = 0;         // nodes in that order
  std::string node_path;           // index per graph level, top first ("4/1")
  uint64_t node = 0;               // CUgraphNode in the agent's copy of the graph
  uint64_t instantiate_flags = 0;  // CUgraphInstantiate_flags
};

// == kerncap.v1.TextureObject and its descriptors (numeric fields hold the
// CUDA driver API's values unchanged; see manifest.proto).
struct TextureResourceDesc {
  using Type = link::TextureResourceType;  // CUresourcetype + 1
  Type type = Type::kLinear;
  uint64_t device_ptr = 0;
  uint32_t format = 0;
  uint32_t num_channels = 0;
  uint64_t size_bytes = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint64_t pitch_bytes = 0;
  uint32_t flags = 0;
  uint64_t array_handle = 0;
};

struct TextureSamplingDesc {
  std::array<uint32_t, 3> address_mode{0, 0, 0};
  uint32_t filter_mode = 0;
  uint32_t flags = 0;
  uint32_t max_anisotropy = 0;
  uint32_t mipmap_filter_mode = 0;
  float mipmap_level_bias = 0;
  float min_mipmap_level_clamp = 0;
  float max_mipmap_level_clamp = 0;
  std::array<float, 4> border_color{0, 0, 0, 0};
};

struct TextureViewDesc {
  uint32_t format = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint64_t depth = 0;
  uint32_t first_mipmap_level = 0;
  uint32_t last_mipmap_level = 0;
  uint32_t first_layer = 0;
  uint32_t last_layer = 0;
};

struct TextureObjectDesc {
  using Type = link::TextureObjectType;
  Type type = Type::kTexture;
  uint64_t handle = 0;
  std::vector<uint32_t> argument_offsets;  // argument-blob offsets of the handle's words
  TextureResourceDesc resource;
  TextureSamplingDesc sampling;  // textures only
  bool has_view = false;
  TextureViewDesc view;
};

// Manifest-level facts about one capture, known before any byte is copied.
struct CaptureHeader {
  std::string arm_id;
  uint64_t dispatch_index = 0;
  KernelDesc kernel;
  LaunchDesc launch;
  std::vector<ArgumentDesc> arguments;
  DeviceDesc device;
  DriverDesc driver;
  bool from_graph = false;  // `graph` is set
  GraphOriginDesc graph;
  std::vector<TextureObjectDesc> texture_objects;  // the argument blob's texture/surface handles
  std::string launch_shape;  // CaptureTicket.launch_shape
};

// What a selector sees about a dispatch (the link decides whether to capture).
struct KernelMatchInfo {
  std::string mangled_name;
  std::string demangled_name;
  int device = 0;
  // The dispatch's shape key, asked for only by per-shape arms whose pattern
  // matches (common/agent_link/launch_shape.h); empty: not known, and
  // per-shape arms do not take the dispatch.
  link::LaunchShapeFn launch_shape;
};

// A positive selector decision.
struct CaptureTicket {
  std::string arm_id;
  uint64_t dispatch_index = 0;
  std::string launch_shape;  // the key's text, for a per-shape arm's capture
};

// 64-bit FNV-1a of the image bytes, mixed with the size. Used only to find
// candidate duplicates quickly; equality is always confirmed on the bytes.
uint64_t CodeObjectKey(const std::string& bytes);

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_CAPTURE_TYPES_H_
