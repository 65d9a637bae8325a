#include "agent/core/capture_service.h"

#include <new>

#include "agent/core/log.h"

namespace kerncap::agent {

Result<std::unique_ptr<ActiveCapture>> CaptureService::Begin(
    CaptureTransport* t, std::unique_ptr<DispatchSource> source, const CaptureHeader& header,
    std::string_view arg_blob, std::chrono::steady_clock::time_point gate_taken) {
  if (t == nullptr) return Error("no transport to kerncapd");
  KC_ALOG(kInfo, "capturing dispatch %llu of arm %s: %s on device %d",
          static_cast<unsigned long long>(header.dispatch_index), header.arm_id.c_str(),
          header.kernel.demangled_name.c_str(), header.device.ordinal);
  CaptureOrchestrator orchestrator(t);
  auto pending = orchestrator.Before(std::move(source), header, arg_blob);
  if (!pending.ok()) return pending.status();
  auto capture = std::unique_ptr<ActiveCapture>(new ActiveCapture());
  capture->pending_ = std::move(pending.value());
  capture->gate_taken_ = gate_taken;
  return capture;
}

void CaptureService::End(CaptureTransport* t, std::unique_ptr<ActiveCapture> capture,
                         bool launch_ok, const std::function<void()>& release) {
  const CaptureHeader header = capture->pending_->header();
  CaptureOrchestrator orchestrator(t);
  auto stats = orchestrator.After(std::move(capture->pending_), launch_ok);
  release();
  const double held =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - capture->gate_taken_)
          .count();
  const char* kernel = header.kernel.demangled_name.c_str();
  if (!stats.ok()) {
    ++captures_failed_;
    KC_ALOG(kWarn, "capture of %s (dispatch %llu) failed: %s", kernel,
            static_cast<unsigned long long>(header.dispatch_index), stats.error().c_str());
    return;
  }
  // With an asynchronous transport the daemon's verdict comes later
  // (OnVerdict counts it); the application is released now.
  const bool async = t != nullptr && t->AsyncEnd();
  if (!async) ++captures_ok_;
  {
    std::lock_guard lock(last_mu_);
    last_.pre_bytes = stats->pre_bytes;
    last_.post_bytes = stats->post_bytes;
    last_.regions = stats->regions;
    last_.quiesce_seconds = stats->quiesce_seconds;
    last_.pre_seconds = stats->pre_seconds;
    last_.post_seconds = stats->post_seconds;
    last_.held_seconds = held;
  }
  KC_ALOG(kInfo,
          "captured %s (dispatch %llu): %llu regions, %.1f MiB pre, %.1f MiB post, quiesce "
          "%.3fs pre %.3fs post %.3fs, application held %.3fs%s",
          kernel, static_cast<unsigned long long>(header.dispatch_index),
          static_cast<unsigned long long>(stats->regions), stats->pre_bytes / 1048576.0,
          stats->post_bytes / 1048576.0, stats->quiesce_seconds, stats->pre_seconds,
          stats->post_seconds, held, async ? " (kerncapd commits in the background)" : "");
}

void CaptureService::Skip(CaptureTransport* t, const CaptureTicket& ticket,
                          const KernelMatchInfo& info, const std::string& why, bool give_back) {
  ++captures_failed_;
  const bool retried = t != nullptr && t->ReportSkipped(ticket, info, why, give_back);
  KC_ALOG(kWarn, "dispatch %llu of arm %s (%s) not captured: %s%s",
          static_cast<unsigned long long>(ticket.dispatch_index), ticket.arm_id.c_str(),
          info.demangled_name.c_str(), why.c_str(),
          retried ? " (the arm takes a later matching dispatch)" : "");
}

void CaptureService::OnVerdict(const std::string& capture_id, const std::string& error,
                               double seconds_after_end) {
  if (error.empty()) {
    ++captures_ok_;
    KC_ALOG(kInfo, "capture %s committed by kerncapd %.3f s after the application resumed",
            capture_id.c_str(), seconds_after_end);
  } else {
    ++captures_failed_;
    KC_ALOG(kWarn, "kerncapd did not commit the capture: %s", error.c_str());
  }
}

void CaptureService::SetRingBytes(uint64_t bytes) {
  std::lock_guard lock(last_mu_);
  last_.ring_bytes = bytes;
}

void CaptureService::SetHeldSeconds(double seconds) {
  std::lock_guard lock(last_mu_);
  last_.held_seconds = seconds;
}

LastCaptureFigures CaptureService::last_capture() const {
  std::lock_guard lock(last_mu_);
  return last_;
}

void CaptureService::ResetAfterFork(bool zero_counters) {
  gate_.ResetAfterFork();
  new (&last_mu_) std::mutex();
  if (zero_counters) {
    captures_ok_.store(0);
    captures_failed_.store(0);
  }
  if (CaptureTransport* t = transport()) t->ResetAfterFork();
}

}  // namespace kerncap::agent
