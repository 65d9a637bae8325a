#include "common/capture_id.h"

#include <cstdint>
#include <random>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace kerncap {
namespace {

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string NewCaptureId() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) | rd();
  return absl::StrFormat("cap-%012x", v & 0xffffffffffffull);
}

bool IsValidCaptureIdPrefix(absl::string_view prefix) {
  if (!absl::ConsumePrefix(&prefix, kCaptureIdPrefix)) return false;
  return !prefix.empty() && prefix.size() <= kCaptureIdHexDigits && IsLowerHex(prefix);
}

bool IsValidCaptureId(absl::string_view id) {
  return id.size() == kCaptureIdPrefix.size() + kCaptureIdHexDigits && IsValidCaptureIdPrefix(id);
}

}  // namespace kerncap
