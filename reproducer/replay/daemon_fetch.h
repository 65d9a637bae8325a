// daemon_fetch.h: pulls one capture from a running kerncapd (GetCapture to
// resolve an id prefix, then the ExportCapture stream) into a `.kcap` file,
// which CaptureSource then reads chunk by chunk. Streaming to a file keeps
// host memory bounded by one chunk whatever the capture's size.
#ifndef KERNCAP_REPRODUCER_REPLAY_DAEMON_FETCH_H_
#define KERNCAP_REPRODUCER_REPLAY_DAEMON_FETCH_H_

#include <string>

#include "absl/status/statusor.h"

namespace kerncap::replay {

// `endpoint`: "unix:/path" or "/path" (a Unix socket). Writes `out_path` and
// returns the resolved capture id.
absl::StatusOr<std::string> FetchCaptureFromDaemon(const std::string& endpoint,
                                                   const std::string& capture_id,
                                                   const std::string& out_path,
                                                   double timeout_s = 600);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_DAEMON_FETCH_H_
