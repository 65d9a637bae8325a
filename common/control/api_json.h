// api_json.h: API messages as JSON under the one policy (common/json_policy.h,
// docs/JSON.md). Field names are the proto field names (snake_case); every
// scalar field is present with its default value; a message field that is not
// set and a oneof member that is not chosen are left out. Integers are
// numbers (int64 and uint64 included), address fields "0x..." strings, bytes
// lowercase hex, enums their short names (api_names.h), maps objects.
//
// This replaces protobuf's own JSON mapping for output: that one writes 64-bit
// integers as strings, bytes as base64 and enums as NAME_GLOB.
#ifndef KERNCAP_COMMON_CONTROL_API_JSON_H_
#define KERNCAP_COMMON_CONTROL_API_JSON_H_

#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace kerncap::api {

nlohmann::json ToJson(const google::protobuf::Message& message);

}  // namespace kerncap::api

#endif  // KERNCAP_COMMON_CONTROL_API_JSON_H_
