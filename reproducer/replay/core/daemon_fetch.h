// daemon_fetch.h: gets one capture from a running kerncapd for the replayer.
//
// On the daemon's host the replayer reads the daemon's store directly
// (CaptureSource::OpenStore: read-only, no lock, safe while the daemon keeps
// writing and collecting garbage), which restores at the speed of the local
// page cache / disk. It asks the daemon where its store is (GetStatus:
// DaemonStatus.store.path) and uses that directory when the path is
// absolute, the daemon runs on this host (same hostname) and this process
// can open the store and find the capture in it. Otherwise (another mount
// namespace or container, no permission, --via-export) it pulls the capture
// through the ExportCapture stream (GetCapture resolves an id prefix) into a
// temporary `.kcap` file, which CaptureSource then reads chunk by chunk
// (host memory bounded by one chunk whatever the capture's size; ~1 GB/s).
#ifndef KERNCAP_REPRODUCER_REPLAY_CORE_DAEMON_FETCH_H_
#define KERNCAP_REPRODUCER_REPLAY_CORE_DAEMON_FETCH_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerncap/v1/control.pb.h"
#include "reproducer/replay/core/capture_source.h"

namespace kerncap::replay {

// `endpoint`: "unix:/path" or "/path" (a Unix socket). Writes `out_path` and
// returns the resolved capture id.
absl::StatusOr<std::string> FetchCaptureFromDaemon(const std::string& endpoint,
                                                   const std::string& capture_id,
                                                   const std::string& out_path,
                                                   double timeout_s = 600);

struct DaemonSourceOptions {
  bool allow_store = true;  // false: always the export stream (--via-export)
  double timeout_s = 600;
  std::string tmp_dir;      // for the export's temporary .kcap; empty: $TMPDIR
};

// The daemon's store directory if this process should try to read it
// directly: `status` names an absolute path and the daemon's hostname equals
// `local_hostname` (not checked when either is empty). FailedPrecondition
// saying why not otherwise.
absl::StatusOr<std::string> DirectStoreDir(const v1::DaemonStatus& status,
                                           absl::string_view local_hostname);

// Opens capture `capture_id` (id or unique prefix) of the kerncapd at
// `endpoint`: from its store (origin "store:<dir>") when DirectStoreDir and
// CaptureSource::OpenStore succeed, else through the export stream (origin
// "export"). `*note` (optional) gets one line saying which path was taken
// and, on a fallback, why.
absl::StatusOr<std::unique_ptr<CaptureSource>> OpenDaemonCapture(
    const std::string& endpoint, const std::string& capture_id,
    const DaemonSourceOptions& options, std::string* note = nullptr);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CORE_DAEMON_FETCH_H_
