// api_names.h: the one table of the API's enum names and address fields.
//
// Every JSON writer and parser (kerncapctl -o json/yaml, kerncap-replay's
// reports, the reproducer's kerncap.json, the Python client, which checks its
// copy against `kerncapctl help json --json`) and every human table uses
// these names, so a region kind is spelled one way everywhere: the proto
// value name without its enum's prefix, in lowercase (REGION_DEVICE_VMM ->
// "device_vmm", NAME_GLOB -> "glob"). The agent link's wire strings
// (common/agent_link/messages.h) are the same names. docs/JSON.md lists them.
//
// Address fields are the uint64 fields that hold a virtual address or an
// opaque handle of the captured process; JSON writes them as "0x..." strings.
#ifndef KERNCAP_COMMON_CONTROL_API_NAMES_H_
#define KERNCAP_COMMON_CONTROL_API_NAMES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/generated_enum_reflection.h"

namespace kerncap::api {

// The gRPC package kerncapd serves and its control service's full name (the
// name health checks and reflection answer for).
inline constexpr char kApiVersion[] = "kerncap.v1";
inline constexpr char kControlServiceName[] = "kerncap.v1.KerncapControl";

// The short name of `value` of `type`; "" when the table has none (an enum
// value added to the proto without a name here; api_names_test catches it).
absl::string_view EnumName(const google::protobuf::EnumDescriptor* type, int value);
// The value named `name`, or nullopt.
std::optional<int> EnumValue(const google::protobuf::EnumDescriptor* type,
                             absl::string_view name);
// The names of `type`'s values, in value order, for "expected one of" errors.
std::vector<std::string> EnumNames(const google::protobuf::EnumDescriptor* type);

template <typename E>
absl::string_view Name(E value) {
  return EnumName(google::protobuf::GetEnumDescriptor<E>(), static_cast<int>(value));
}
template <typename E>
std::optional<E> Parse(absl::string_view name) {
  std::optional<int> v = EnumValue(google::protobuf::GetEnumDescriptor<E>(), name);
  if (!v) return std::nullopt;
  return static_cast<E>(*v);
}

// True for a field written as "0x..." (kerncap.v1.Region.va, ...).
bool IsAddressField(const google::protobuf::FieldDescriptor* field);
// Full names of the address fields ("kerncap.v1.Region.va", ...).
std::vector<std::string> AddressFieldNames();

// Every enum the API defines ("kerncap.v1.RegionKind", nested ones too).
std::vector<const google::protobuf::EnumDescriptor*> AllApiEnums();

}  // namespace kerncap::api

#endif  // KERNCAP_COMMON_CONTROL_API_NAMES_H_
