#include "common/agent_link/messages.h"

#include <algorithm>

namespace kerncap::link {

bool HasFeature(const std::vector<std::string>& features, std::string_view feature) {
  return std::find(features.begin(), features.end(), feature) != features.end();
}

const char* NameMatchToString(NameMatch match) {
  switch (match) {
    case NameMatch::kSubstring: return "substring";
    case NameMatch::kGlob: return "glob";
    case NameMatch::kRegex: return "regex";
    case NameMatch::kMangled: return "mangled";
  }
  return "substring";
}

bool NameMatchFromString(std::string_view name, NameMatch* match) {
  if (name == "substring" || name.empty()) {
    *match = NameMatch::kSubstring;
  } else if (name == "glob") {
    *match = NameMatch::kGlob;
  } else if (name == "regex") {
    *match = NameMatch::kRegex;
  } else if (name == "mangled") {
    *match = NameMatch::kMangled;
  } else {
    return false;
  }
  return true;
}

ArmMsg ArmFromSelector(std::string arm_id, const Selector& s) {
  ArmMsg a;
  a.arm_id = std::move(arm_id);
  a.kernel = s.kernel;
  a.match = NameMatchToString(s.match);
  a.pid = s.pid;
  a.process_name = s.process_name;
  a.device = s.device;
  a.skip = s.skip;
  a.nth = s.nth;
  a.count = s.count;
  a.expires_unix_ms = s.expires_unix_ms;
  return a;
}

LinkResult<Selector> SelectorFromArm(const ArmMsg& a) {
  Selector s;
  if (!NameMatchFromString(a.match, &s.match)) {
    return LinkStatus::Error("unknown name match '" + a.match + "'");
  }
  s.kernel = a.kernel;
  s.pid = a.pid;
  s.process_name = a.process_name;
  s.device = a.device;
  s.skip = a.skip;
  s.nth = a.nth;
  s.count = a.count;
  s.expires_unix_ms = a.expires_unix_ms;
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
