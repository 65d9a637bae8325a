#include "common/json_policy.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "common/exit_codes.h"

namespace kerncap::json_policy {

std::string Address(uint64_t value) { return absl::StrFormat("0x%x", value); }

std::string HexBytes(absl::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

nlohmann::json Number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

std::string StatusCodeName(absl::StatusCode code) {
  return absl::AsciiStrToLower(absl::StatusCodeToString(code));
}

nlohmann::json ErrorObject(const absl::Status& status, int exit_code) {
  return {{"error",
           {{"code", exit_code::ExitCodeName(exit_code)},
            {"message", std::string(status.message())},
            {"exit_code", exit_code},
            {"status", StatusCodeName(status.code())}}}};
}

void WriteError(std::ostream& err, const absl::Status& status, int exit_code) {
  err << ErrorObject(status, exit_code).dump(-1, ' ', false,
                                             nlohmann::json::error_handler_t::replace)
      << std::endl;
}

}  // namespace kerncap::json_policy
