// capture_id.h: the one definition of a capture id, shared by the store
// (which validates ids and resolves prefixes) and the agent link server
// (which names a capture when it begins, so that every event about it
// carries the id it will be committed under).
//
// A capture id is "cap-" + 12 lowercase hex digits (48 random bits): short
// enough to type, and unique prefixes of 4-6 digits are usually enough.
#ifndef KERNCAP_COMMON_CAPTURE_ID_H_
#define KERNCAP_COMMON_CAPTURE_ID_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace kerncap {

inline constexpr absl::string_view kCaptureIdPrefix = "cap-";
inline constexpr size_t kCaptureIdHexDigits = 12;

std::string NewCaptureId();
bool IsValidCaptureId(absl::string_view id);
// "cap-" followed by 1..12 lowercase hex digits. A bare "cap-" names no
// capture: it would match whichever one a store happens to hold, and `rm`
// must never delete what the user did not name.
bool IsValidCaptureIdPrefix(absl::string_view prefix);

}  // namespace kerncap

#endif  // KERNCAP_COMMON_CAPTURE_ID_H_
