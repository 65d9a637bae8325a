#include "common/agent_link/messages.h"

#include <algorithm>

namespace kerncap::link {

bool HasFeature(const std::vector<std::string>& features, std::string_view feature) {
  return std::find(features.begin(), features.end(), feature) != features.end();
}

ArmMsg ArmFromSelector(std::string arm_id, const Selector& s) {
  ArmMsg a;
  a.arm_id = std::move(arm_id);
  a.kernel = s.kernel;
  a.match = s.match;
  a.pid = s.pid;
  a.process_name = s.process_name;
  a.device = s.device;
  a.skip = s.skip;
  a.nth = s.nth;
  a.count = s.count;
  a.expires_unix_ms = s.expires_unix_ms;
  a.rank = s.rank;
  a.per_shape = s.per_shape;
  return a;
}

Selector SelectorFromArm(const ArmMsg& a) {
  Selector s;
  s.match = a.match;
  s.kernel = a.kernel;
  s.pid = a.pid;
  s.process_name = a.process_name;
  s.device = a.device;
  s.skip = a.skip;
  s.nth = a.nth;
  s.count = a.count;
  s.expires_unix_ms = a.expires_unix_ms;
  s.rank = a.rank;
  s.per_shape = a.per_shape;
  return s;
}

LinkStatus DecodeBodyJson(const Frame& frame, MessageType expected, nlohmann::json* out) {
  if (frame.type != expected) {
    return LinkStatus::Error(std::string("expected ") + MessageTypeName(expected) + ", got " +
                             MessageTypeName(frame.type));
  }
  nlohmann::json j = nlohmann::json::parse(frame.json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return LinkStatus::Error(std::string(MessageTypeName(expected)) +
                             " body is not a JSON object");
  }
  *out = std::move(j);
  return LinkStatus::Ok();
}

}  // namespace kerncap::link
