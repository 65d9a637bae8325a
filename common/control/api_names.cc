#include "common/control/api_names.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "kerncap/v1/control.pb.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::api {
namespace {

using google::protobuf::EnumDescriptor;

struct Entry {
  const EnumDescriptor* type;
  int value;
  const char* name;
};

// The table. An UNSPECIFIED value is "unspecified" unless 0 has a meaning of
// its own (NameMatch 0 is substring matching, ReproducerKind 0 is "choose
// from the capture").
std::vector<Entry> BuildTable() {
  const EnumDescriptor* match = v1::NameMatch_descriptor();
  const EnumDescriptor* arm = v1::ArmState_descriptor();
  const EnumDescriptor* repro = v1::ReproducerKind_descriptor();
  const EnumDescriptor* codec = v1::ChunkCodec_descriptor();
  const EnumDescriptor* platform = v1::Platform_descriptor();
  const EnumDescriptor* region = v1::RegionKind_descriptor();
  const EnumDescriptor* arg = v1::ArgumentKind_descriptor();
  const EnumDescriptor* code = v1::CodeObjectFormat_descriptor();
  const EnumDescriptor* source = v1::CaptureSource_descriptor();
  const EnumDescriptor* tex = v1::TextureObject::Type_descriptor();
  const EnumDescriptor* res = v1::TextureResource::Type_descriptor();
  const EnumDescriptor* sub = v1::SubstitutionState_descriptor();
  const EnumDescriptor* shape = v1::PerShape_descriptor();
  return {
      {match, v1::NAME_MATCH_UNSPECIFIED, "substring"},
      {match, v1::NAME_SUBSTRING, "substring"},
      {match, v1::NAME_GLOB, "glob"},
      {match, v1::NAME_REGEX, "regex"},
      {match, v1::NAME_MANGLED, "mangled"},
      {arm, v1::ARM_STATE_UNSPECIFIED, "unspecified"},
      {arm, v1::ARM_ACTIVE, "active"},
      {arm, v1::ARM_DONE, "done"},
      {arm, v1::ARM_EXPIRED, "expired"},
      {arm, v1::ARM_DISARMED, "disarmed"},
      {shape, v1::PER_SHAPE_OFF, "off"},
      {shape, v1::PER_SHAPE_SCALARS, "scalars"},
      {shape, v1::PER_SHAPE_LAUNCH, "launch"},
      {sub, v1::SUBSTITUTION_STATE_UNSPECIFIED, "unspecified"},
      {sub, v1::SUBSTITUTION_ACTIVE, "active"},
      {sub, v1::SUBSTITUTION_ENDED, "ended"},
      {repro, v1::REPRODUCER_KIND_UNSPECIFIED, "auto"},
      {repro, v1::REPRODUCER_CUDA, "cuda"},
      {repro, v1::REPRODUCER_HIP, "hip"},
      {repro, v1::REPRODUCER_TRITON, "triton"},
      {repro, v1::REPRODUCER_BINARY, "binary"},
      {codec, v1::CODEC_UNSPECIFIED, "unspecified"},
      {codec, v1::CODEC_RAW, "raw"},
      {codec, v1::CODEC_ZSTD, "zstd"},
      {platform, v1::PLATFORM_UNSPECIFIED, "unspecified"},
      {platform, v1::PLATFORM_CUDA, "cuda"},
      {platform, v1::PLATFORM_HSA, "hsa"},
      {platform, v1::PLATFORM_SYNTHETIC, "synthetic"},
      {region, v1::REGION_KIND_UNSPECIFIED, "unspecified"},
      {region, v1::REGION_DEVICE, "device"},
      {region, v1::REGION_DEVICE_VMM, "device_vmm"},
      {region, v1::REGION_MANAGED, "managed"},
      {region, v1::REGION_HOST_PINNED, "host_pinned"},
      {region, v1::REGION_MODULE_GLOBAL, "module_global"},
      {region, v1::REGION_CONSTANT, "constant"},
      {region, v1::REGION_KERNARG, "kernarg"},
      {arg, v1::ARGUMENT_KIND_UNSPECIFIED, "unspecified"},
      {arg, v1::ARG_BY_VALUE, "value"},
      {arg, v1::ARG_POINTER, "pointer"},
      {arg, v1::ARG_HIDDEN, "hidden"},
      {code, v1::CODE_OBJECT_FORMAT_UNSPECIFIED, "unspecified"},
      {code, v1::CODE_OBJECT_CUBIN, "cubin"},
      {code, v1::CODE_OBJECT_FATBIN, "fatbin"},
      {code, v1::CODE_OBJECT_PTX, "ptx"},
      {code, v1::CODE_OBJECT_HSACO, "hsaco"},
      {source, v1::CAPTURE_SOURCE_UNSPECIFIED, "unspecified"},
      {source, v1::SOURCE_AGENT, "agent"},
      {source, v1::SOURCE_REFERENCE_IMPORT, "reference_import"},
      {source, v1::SOURCE_IMPORT, "import"},
      {tex, v1::TextureObject::TEXTURE_OBJECT_TYPE_UNSPECIFIED, "unspecified"},
      {tex, v1::TextureObject::TEXTURE_OBJECT, "texture"},
      {tex, v1::TextureObject::SURFACE_OBJECT, "surface"},
      {res, v1::TextureResource::RESOURCE_TYPE_UNSPECIFIED, "unspecified"},
      {res, v1::TextureResource::RESOURCE_ARRAY, "array"},
      {res, v1::TextureResource::RESOURCE_MIPMAPPED_ARRAY, "mipmapped_array"},
      {res, v1::TextureResource::RESOURCE_LINEAR, "linear"},
      {res, v1::TextureResource::RESOURCE_PITCH2D, "pitch2d"},
  };
}

// uint64 fields holding an address or handle of the captured process.
constexpr const char* kAddressFields[] = {
    "kerncap.v1.Region.va",
    "kerncap.v1.LaunchConfig.stream",
    "kerncap.v1.GraphOrigin.graph_exec",
    "kerncap.v1.GraphOrigin.graph",
    "kerncap.v1.GraphOrigin.node",
    "kerncap.v1.TextureObject.handle",
    "kerncap.v1.TextureResource.device_ptr",
    "kerncap.v1.TextureResource.array_handle",
};

struct Index {
  absl::flat_hash_map<std::pair<const EnumDescriptor*, int>, const char*> name_of;
  // The first entry of a name wins (NAME_SUBSTRING over NAME_MATCH_UNSPECIFIED
  // would be wrong: both are "substring"; parsing gives the explicit value).
  absl::flat_hash_map<std::pair<const EnumDescriptor*, std::string>, int> value_of;
};

const Index& GetIndex() {
  static const Index* index = [] {
    auto* idx = new Index;
    for (const Entry& e : BuildTable()) {
      idx->name_of.emplace(std::make_pair(e.type, e.value), e.name);
      auto key = std::make_pair(e.type, std::string(e.name));
      auto [it, inserted] = idx->value_of.emplace(key, e.value);
      // An explicit value beats an UNSPECIFIED one that reads the same.
      if (!inserted && it->second == 0) it->second = e.value;
    }
    return idx;
  }();
  return *index;
}

void CollectEnums(const google::protobuf::Descriptor* m,
                  std::vector<const EnumDescriptor*>* out) {
  for (int i = 0; i < m->enum_type_count(); ++i) out->push_back(m->enum_type(i));
  for (int i = 0; i < m->nested_type_count(); ++i) CollectEnums(m->nested_type(i), out);
}

}  // namespace

absl::string_view EnumName(const EnumDescriptor* type, int value) {
  const Index& idx = GetIndex();
  auto it = idx.name_of.find(std::make_pair(type, value));
  return it == idx.name_of.end() ? absl::string_view() : absl::string_view(it->second);
}

std::optional<int> EnumValue(const EnumDescriptor* type, absl::string_view name) {
  const Index& idx = GetIndex();
  auto it = idx.value_of.find(std::make_pair(type, std::string(name)));
  if (it == idx.value_of.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> EnumNames(const EnumDescriptor* type) {
  std::vector<std::string> out;
  for (int i = 0; i < type->value_count(); ++i) {
    absl::string_view n = EnumName(type, type->value(i)->number());
    if (n.empty() || n == "unspecified") continue;
    bool seen = false;
    for (const std::string& s : out) seen = seen || s == n;
    if (!seen) out.emplace_back(n);
  }
  return out;
}

bool IsAddressField(const google::protobuf::FieldDescriptor* field) {
  for (const char* name : kAddressFields) {
    if (field->full_name() == name) return true;
  }
  return false;
}

std::vector<std::string> AddressFieldNames() {
  return std::vector<std::string>(std::begin(kAddressFields), std::end(kAddressFields));
}

std::vector<const EnumDescriptor*> AllApiEnums() {
  std::vector<const EnumDescriptor*> out;
  for (const google::protobuf::FileDescriptor* f :
       {v1::CaptureManifest::descriptor()->file(), v1::ArmRequest::descriptor()->file()}) {
    for (int i = 0; i < f->enum_type_count(); ++i) out.push_back(f->enum_type(i));
    for (int i = 0; i < f->message_type_count(); ++i) CollectEnums(f->message_type(i), &out);
  }
  return out;
}

}  // namespace kerncap::api
