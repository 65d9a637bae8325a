// errno_status.h: one mapping from errno values to canonical status codes, so
// that "disk full" is ResourceExhausted everywhere and callers can act on it.
#ifndef KERNCAP_COMMON_ERRNO_STATUS_H_
#define KERNCAP_COMMON_ERRNO_STATUS_H_

#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace kerncap {

// Returns a status whose message is "<what>: <strerror(err)>". ENOSPC, EDQUOT
// and EFBIG (RLIMIT_FSIZE) map to ResourceExhausted; ENOENT to NotFound; EACCES/EPERM to
// PermissionDenied; EEXIST to AlreadyExists; everything else to Internal.
absl::Status ErrnoError(int err, absl::string_view what);

}  // namespace kerncap

#endif  // KERNCAP_COMMON_ERRNO_STATUS_H_
