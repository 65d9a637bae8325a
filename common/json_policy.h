// json_policy.h: how every kerncap binary writes values into JSON
// (docs/JSON.md). One place, so kerncapctl, kerncap-replay, kerncapd's logs
// and the reproducer tools cannot drift apart:
//   integers           JSON numbers (never strings; 64-bit values included)
//   addresses/handles  "0x..." strings, lowercase, no padding ("0x7f3a00000000")
//   digests and bytes  lowercase hex strings
//   enums              short lowercase names ("glob", "device_vmm")
//   floats             numbers; not-finite ones as the strings "inf", "-inf", "nan"
//   errors             one object on stderr:
//                      {"error":{"code":"not_found","message":"...","exit_code":3}}
#ifndef KERNCAP_COMMON_JSON_POLICY_H_
#define KERNCAP_COMMON_JSON_POLICY_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace kerncap::json_policy {

// 0x7f3a00000000 -> "0x7f3a00000000"; 0 -> "0x0".
std::string Address(uint64_t value);
// Bytes as lowercase hex ("a1b2..."), two digits per byte.
std::string HexBytes(absl::string_view bytes);
// A double as JSON: a number, or "inf" / "-inf" / "nan" (JSON has none).
nlohmann::json Number(double value);
// absl::StatusCode as a short lowercase name: "not_found", "invalid_argument".
std::string StatusCodeName(absl::StatusCode code);

// {"error":{"code":..., "message":..., "exit_code":..., "status":...}}: code is
// the exit code's name (common/exit_codes.h: "not_found", "usage",
// "permission"), the one vocabulary a script needs; status is the underlying
// status code's name ("invalid_argument", "unauthenticated") for detail.
nlohmann::json ErrorObject(const absl::Status& status, int exit_code);
// ErrorObject as one line (with '\n') on `err`.
void WriteError(std::ostream& err, const absl::Status& status, int exit_code);

}  // namespace kerncap::json_policy

#endif  // KERNCAP_COMMON_JSON_POLICY_H_
