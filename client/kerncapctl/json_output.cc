#include "client/kerncapctl/json_output.h"

#include "google/protobuf/util/json_util.h"

namespace kerncap::ctl {

std::string ProtoToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.always_print_enums_as_ints = false;
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return "{}";
  return out;
}

nlohmann::json ProtoToJsonValue(const google::protobuf::Message& message) {
  return nlohmann::json::parse(ProtoToJson(message));
}

}  // namespace kerncap::ctl
