// capture_gate.h: the process-wide gate that makes a snapshot consistent.
//
// While any arm is active, every thread's launch / copy / memset API call
// passes the gate in shared mode for the duration of the call (driver-API
// ENTER to EXIT). A capturing thread takes it exclusively: it waits for
// in-flight calls to leave, new ones block at ENTER, and then it can
// synchronize the device knowing nobody enqueues more work until it releases
// the gate after the post-dispatch snapshot.
//
// Writer preference: once a capturer waits, new shared entries wait too, so a
// busy app cannot starve the capture. The capturer's wait is bounded: a
// capture that cannot get the gate in time is skipped (the app must never
// hang because of the agent), e.g. when another thread sits in a long
// blocking call.
#ifndef KERNCAP_AGENT_CORE_CAPTURE_GATE_H_
#define KERNCAP_AGENT_CORE_CAPTURE_GATE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace kerncap::agent {

class CaptureGate {
 public:
  CaptureGate() = default;
  CaptureGate(const CaptureGate&) = delete;
  CaptureGate& operator=(const CaptureGate&) = delete;

  // Ordinary API call: blocks while a capture holds or awaits the gate.
  void EnterShared();
  void ExitShared();

  // Capturer: true when the gate is held exclusively. False after `timeout`
  // (the gate is then untouched and waiting shared callers proceed).
  bool TryEnterExclusive(std::chrono::milliseconds timeout);
  void ExitExclusive();

  // For tests and diagnostics.
  int shared_count() const;
  bool exclusive() const;

  // Fork child: the parent's holders do not exist in the child.
  void ResetAfterFork();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int shared_ = 0;
  int writers_waiting_ = 0;
  bool exclusive_ = false;
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_CAPTURE_GATE_H_
