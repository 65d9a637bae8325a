// caller_sink.h: a CaptureSink that ingests into the store for a caller.
//
// A request that imports files for a caller (a reference capture folder)
// reads them with the caller's file-system identity; the store behind the
// sink is the daemon's, so every call into it steps back to the daemon's own
// identity (ScopedOwnFsIdentity), and what it commits is the caller's
// (CaptureManifest.owner_uid), whatever the producer filled in.
#ifndef KERNCAP_DAEMON_SERVICE_CALLER_SINK_H_
#define KERNCAP_DAEMON_SERVICE_CALLER_SINK_H_

#include <cstdint>
#include <memory>

#include "daemon/capture_sink.h"

namespace kerncap::service {

class CallerSink final : public CaptureSink {
 public:
  CallerSink(CaptureSink& store, uint32_t owner_uid) : store_(store), owner_uid_(owner_uid) {}
  absl::StatusOr<std::unique_ptr<CaptureIngest>> BeginCapture() override;

 private:
  CaptureSink& store_;
  const uint32_t owner_uid_;
};

}  // namespace kerncap::service

#endif  // KERNCAP_DAEMON_SERVICE_CALLER_SINK_H_
