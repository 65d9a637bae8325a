// json_output.h: --json output. Protobuf messages are printed with their
// proto field names (snake_case, stable across releases) and with default
// values included, so scripts see every field every time. 64-bit integers
// are JSON strings, as the protobuf JSON mapping specifies.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_JSON_OUTPUT_H_
#define KERNCAP_CLIENT_KERNCAPCTL_JSON_OUTPUT_H_

#include <string>

#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace kerncap::ctl {

// One line, no trailing newline.
std::string ProtoToJson(const google::protobuf::Message& message);
nlohmann::json ProtoToJsonValue(const google::protobuf::Message& message);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_JSON_OUTPUT_H_
