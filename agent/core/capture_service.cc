#include "agent/core/capture_service.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <thread>
#include <vector>

#include "agent/core/agent_env.h"
#include "agent/core/log.h"

namespace kerncap::agent {
namespace {

// Every live CaptureService, for the exit handler (services of the agent are
// never destroyed; tests create and destroy theirs).
std::mutex g_services_mu;
std::vector<CaptureService*>& Services() {
  static auto* services = new std::vector<CaptureService*>();  // never destroyed
  return *services;
}

// Registered at the first drain, so after the vendor runtime's own exit
// handlers, and therefore run before them (see the header).
void RegisterDrainExitWait() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::atexit([] { CaptureService::WaitForAllDrains("exit"); });
  });
}

}  // namespace

CaptureService::CaptureService() {
  std::lock_guard lock(g_services_mu);
  Services().push_back(this);
}

CaptureService::~CaptureService() {
  std::lock_guard lock(g_services_mu);
  std::erase(Services(), this);
}

int CaptureService::ExitWaitMs() { return EnvInt("KERNCAP_AGENT_EXIT_FLUSH_MS", 60000); }

void CaptureService::WaitForAllDrains(const char* why) {
  std::lock_guard lock(g_services_mu);
  const int ms = ExitWaitMs();
  for (CaptureService* s : Services()) {
    if (s->WaitForDrain(0)) continue;
    KC_ALOG(kInfo, "%s: waiting for a capture's device snapshot to drain", why);
    if (!s->WaitForDrain(ms)) {
      KC_ALOG(kWarn, "%s: a capture's device snapshot did not drain within %d ms", why, ms);
    }
  }
}

Result<std::unique_ptr<ActiveCapture>> CaptureService::Begin(
    CaptureTransport* t, std::unique_ptr<DispatchSource> source, const CaptureHeader& header,
    std::string_view arg_blob, std::chrono::steady_clock::time_point gate_taken) {
  if (t == nullptr) return Error("no transport to kerncapd");
  // One capture at a time per link: the previous capture's drain first.
  if (!WaitForDrain(0)) {
    KC_ALOG(kInfo, "waiting for the previous capture's device snapshot to drain");
    WaitForDrain();
  }
  KC_ALOG(kInfo, "capturing dispatch %llu of arm %s: %s on device %d",
          static_cast<unsigned long long>(header.dispatch_index), header.arm_id.c_str(),
          header.kernel.demangled_name.c_str(), header.device.ordinal);
  CaptureOrchestrator orchestrator(t, policy_);
  auto pending = orchestrator.Before(std::move(source), header, arg_blob, gate_taken);
  if (!pending.ok()) return pending.status();
  auto capture = std::unique_ptr<ActiveCapture>(new ActiveCapture());
  capture->pending_ = std::move(pending.value());
  capture->gate_taken_ = gate_taken;
  return capture;
}

void CaptureService::End(CaptureTransport* t, std::unique_ptr<ActiveCapture> capture,
                         bool launch_ok, const std::function<void()>& release) {
  const CaptureHeader header = capture->pending_->header();
  CaptureOrchestrator orchestrator(t, policy_);
  // With an asynchronous transport the daemon's verdict comes later
  // (OnVerdict counts it); the application is released now. Only then can a
  // device snapshot drain after the release.
  const bool async = t != nullptr && t->AsyncEnd();
  std::unique_ptr<PendingCapture> drain;
  auto stats = orchestrator.After(std::move(capture->pending_), launch_ok, async ? &drain : nullptr);
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
  if (drain != nullptr) {
    StartDrain(std::move(drain), header, held);
    return;
  }
  if (!async) ++captures_ok_;
  Record(stats.value(), held);
  KC_ALOG(kInfo,
          "captured %s (dispatch %llu) by the %s path: %llu regions, %.1f MiB pre, %.1f MiB "
          "post, quiesce %.3fs pre %.3fs post %.3fs, application held %.3fs%s",
          kernel, static_cast<unsigned long long>(header.dispatch_index), std::string(link::WireName(stats->path)).c_str(),
          static_cast<unsigned long long>(stats->regions), stats->pre_bytes / 1048576.0,
          stats->post_bytes / 1048576.0, stats->quiesce_seconds, stats->pre_seconds,
          stats->post_seconds, held, async ? " (kerncapd commits in the background)" : "");
}

void CaptureService::Record(const CaptureStatsSummary& stats, double held) {
  std::lock_guard lock(last_mu_);
  last_.pre_bytes = stats.pre_bytes;
  last_.post_bytes = stats.post_bytes;
  last_.regions = stats.regions;
  last_.quiesce_seconds = stats.quiesce_seconds;
  last_.pre_seconds = stats.pre_seconds;
  last_.post_seconds = stats.post_seconds;
  last_.held_seconds = held;
  last_.path = stats.path;
  last_.drain_seconds = stats.drain_seconds;
  last_.pcie_bytes = stats.pcie_bytes;
}

void CaptureService::StartDrain(std::unique_ptr<PendingCapture> pending,
                                const CaptureHeader& header, double held) {
  {
    std::lock_guard lock(drain_mu_);
    draining_ = true;
  }
  RegisterDrainExitWait();
  // The figures of the pause are known now; the drain's come later.
  Record(pending->stats(), held);
  auto job = [this, p = std::move(pending), header, held]() mutable {
    auto stats = CaptureOrchestrator::Drain(std::move(p), held);
    const char* kernel = header.kernel.demangled_name.c_str();
    if (!stats.ok()) {
      ++captures_failed_;
      KC_ALOG(kWarn, "capture of %s (dispatch %llu) failed after the application resumed: %s",
              kernel, static_cast<unsigned long long>(header.dispatch_index),
              stats.error().c_str());
    } else {
      Record(stats.value(), held);
      KC_ALOG(kInfo,
              "captured %s (dispatch %llu) by the device_snapshot path: %llu regions, %.1f MiB "
              "pre, %.1f MiB changed post (%.1f MiB unchanged), quiesce %.3fs, device copies "
              "pre %.3fs post %.3fs, application held %.3fs, drained in %.3fs after the release "
              "(kerncapd commits in the background)",
              kernel, static_cast<unsigned long long>(header.dispatch_index),
              static_cast<unsigned long long>(stats->regions), stats->pre_bytes / 1048576.0,
              stats->post_bytes / 1048576.0, stats->unchanged_post_bytes / 1048576.0,
              stats->quiesce_seconds, stats->pre_seconds, stats->post_seconds, held,
              stats->drain_seconds);
    }
    std::lock_guard lock(drain_mu_);
    draining_ = false;
    drain_cv_.notify_all();
  };
  try {
    std::thread(std::move(job)).detach();
  } catch (const std::system_error& e) {
    // No thread: the capture is lost (never the application's launch).
    ++captures_failed_;
    KC_ALOG(kWarn, "no thread to drain the capture of %s: %s",
            header.kernel.demangled_name.c_str(), e.what());
    std::lock_guard lock(drain_mu_);
    draining_ = false;
    drain_cv_.notify_all();
  }
}

bool CaptureService::WaitForDrain(int timeout_ms) {
  std::unique_lock lock(drain_mu_);
  if (timeout_ms < 0) {
    drain_cv_.wait(lock, [&] { return !draining_; });
    return true;
  }
  return drain_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                            [&] { return !draining_; });
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
  new (&g_services_mu) std::mutex();  // a parent thread may have held it
  new (&last_mu_) std::mutex();
  // A parent's drain thread does not exist in the child.
  new (&drain_mu_) std::mutex();
  new (&drain_cv_) std::condition_variable();
  draining_ = false;
  if (zero_counters) {
    captures_ok_.store(0);
    captures_failed_.store(0);
  }
  if (CaptureTransport* t = transport()) t->ResetAfterFork();
}

}  // namespace kerncap::agent
