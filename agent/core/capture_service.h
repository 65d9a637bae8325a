// capture_service.h: the backend-neutral capture policy of an agent process,
// one instance per backend (CUDA, HSA), shared by both:
//
//   the gate        CaptureGate every armed call passes (capture_gate.h)
//   the transport   where captures go (the daemon link, agent/link/daemon_link.h,
//                   installs its own; tests install a FakeTransport)
//   begin / end     the orchestrator's Before/After around the dispatch, with
//                   the log lines, the counters and the figures of the last
//                   capture (what kerncap_agent_get_last_capture reports)
//   skip reporting  a selected dispatch that is not captured: counted, logged
//                   and reported on its arm (give_back: the arm takes a later
//                   matching dispatch)
//   verdicts        with an asynchronous transport End returns once every byte
//                   is in the ring; the daemon's verdict is counted later
//                   (OnVerdict, called by the link)
//   drains          a device_snapshot capture (capture_orchestrator.h) with an
//                   asynchronous transport is drained on a thread of its own
//                   after the application is released; the next capture's
//                   Begin (inside its gate) waits for it, and so does the exit
//                   flush (WaitForDrain). The first drain also registers an
//                   exit handler that waits for every service's drain: exit
//                   handlers run in reverse order of registration, and the
//                   vendor runtime registers its own teardown during its
//                   initialization, before any launch, so this one runs
//                   first and the runtime never tears the device down under a
//                   drain that is still reading it (an application that
//                   returns from main right after its last launch)
//
// What stays in a backend is what is vendor specific: how calls are
// intercepted and gated, how a dispatch is described (CaptureHeader) and read
// (DispatchSource), and the unarmed fast path (one atomic check).
#ifndef KERNCAP_AGENT_CORE_CAPTURE_SERVICE_H_
#define KERNCAP_AGENT_CORE_CAPTURE_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "agent/core/capture_gate.h"
#include "agent/core/capture_orchestrator.h"
#include "agent/core/capture_transport.h"
#include "agent/core/capture_types.h"
#include "agent/core/status.h"

namespace kerncap::agent {

// Figures of the last capture that released the application.
struct LastCaptureFigures {
  uint64_t pre_bytes = 0;
  uint64_t post_bytes = 0;
  uint64_t regions = 0;
  double quiesce_seconds = 0;
  double pre_seconds = 0;
  double post_seconds = 0;
  double held_seconds = 0;  // from the gate taken to the application released
  uint64_t ring_bytes = 0;  // host staging mapped for captures
  CapturePath path = CapturePath::kUnspecified;
  double drain_seconds = 0;  // device_snapshot: after the release
  uint64_t pcie_bytes = 0;
};

// A capture between its pre image and its post image.
class ActiveCapture {
 public:
  const CaptureHeader& header() const { return pending_->header(); }

 private:
  friend class CaptureService;
  std::unique_ptr<PendingCapture> pending_;
  std::chrono::steady_clock::time_point gate_taken_;
};

class CaptureService {
 public:
  CaptureService();
  ~CaptureService();
  CaptureService(const CaptureService&) = delete;
  CaptureService& operator=(const CaptureService&) = delete;

  CaptureGate& gate() { return gate_; }

  // When captures keep their images on the device (device_snapshot.h);
  // from the environment by default.
  void SetSnapshotPolicy(const SnapshotPolicy& policy) { policy_ = policy; }
  // Waits until no drain runs (timeout_ms < 0: no limit); false on timeout.
  bool WaitForDrain(int timeout_ms = -1);
  // What the exit handler and a context's teardown wait for a drain:
  // KERNCAP_AGENT_EXIT_FLUSH_MS (60000 by default).
  static int ExitWaitMs();
  // Waits (at most ExitWaitMs() each) for the drains of every live service;
  // logs the ones that did not finish. Run by the exit handler; callable
  // from a backend's teardown callbacks.
  static void WaitForAllDrains(const char* why);

  // The transport captures go to (null: none yet, nothing is captured).
  CaptureTransport* transport() const { return transport_.load(std::memory_order_acquire); }
  void SetTransport(CaptureTransport* transport) {
    transport_.store(transport, std::memory_order_release);
  }

  // The pre image: quiesce, regions, session, code objects (the caller holds
  // the gate exclusively since `gate_taken`). Errors say why nothing was
  // captured (the caller then Skip()s).
  Result<std::unique_ptr<ActiveCapture>> Begin(CaptureTransport* t,
                                              std::unique_ptr<DispatchSource> source,
                                              const CaptureHeader& header,
                                              std::string_view arg_blob,
                                              std::chrono::steady_clock::time_point gate_taken);
  // After the dispatch ran (launch_ok: the driver accepted it): the post
  // image and the end of the session; `release` lets the application go on
  // (it runs before the log and the counters).
  void End(CaptureTransport* t, std::unique_ptr<ActiveCapture> capture, bool launch_ok,
           const std::function<void()>& release);

  // A dispatch the transport selected that is not captured, and why.
  void Skip(CaptureTransport* t, const CaptureTicket& ticket, const KernelMatchInfo& info,
            const std::string& why, bool give_back);

  // The daemon's verdict on an asynchronously ended capture (error empty:
  // committed as `capture_id`).
  void OnVerdict(const std::string& capture_id, const std::string& error,
                 double seconds_after_end);
  // Host staging mapped for captures (0: none).
  void SetRingBytes(uint64_t bytes);
  // The application's pause for the last capture, when it ended after the
  // capture's own release (a graph launch runs the rest of its nodes first).
  void SetHeldSeconds(double seconds);
  // A failure outside any capture's begin/end (an internal error while
  // intercepting): counted with the failed captures.
  void CountFailure() { ++captures_failed_; }

  uint64_t captures_committed() const { return captures_ok_.load(); }
  uint64_t captures_failed() const { return captures_failed_.load(); }
  LastCaptureFigures last_capture() const;

  // Fork child: a fresh gate and figure lock (a parent thread may have held
  // them); the transport resets itself. zero_counters: the child counts from 0.
  void ResetAfterFork(bool zero_counters);

 private:
  CaptureGate gate_;
  std::atomic<CaptureTransport*> transport_{nullptr};
  std::atomic<uint64_t> captures_ok_{0};
  std::atomic<uint64_t> captures_failed_{0};
  mutable std::mutex last_mu_;
  LastCaptureFigures last_;
  SnapshotPolicy policy_ = SnapshotPolicy::FromEnv();
  std::mutex drain_mu_;
  std::condition_variable drain_cv_;
  bool draining_ = false;  // guarded by drain_mu_

  void Record(const CaptureStatsSummary& stats, double held);
  void StartDrain(std::unique_ptr<PendingCapture> pending, const CaptureHeader& header,
                  double held);
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_CAPTURE_SERVICE_H_
