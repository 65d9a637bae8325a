#include "daemon/kerncapd/signals.h"

#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <ctime>

namespace kerncap::kerncapd {
namespace {

sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void BlockDaemonSignals() {
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);
  sigset_t set = HandledSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

SignalThread::SignalThread(std::function<void(int)> on_stop, std::function<void()> on_reload)
    : on_stop_(std::move(on_stop)), on_reload_(std::move(on_reload)) {
  thread_ = std::thread([this] { Run(); });
}

SignalThread::~SignalThread() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void SignalThread::Stop() { stop_.store(true); }

void SignalThread::Run() {
  const sigset_t set = HandledSignals();
  // Wakes every 200 ms to notice Stop(); signals are queued meanwhile.
  const timespec timeout{0, 200 * 1000 * 1000};
  while (!stop_.load()) {
    int signo = ::sigtimedwait(&set, nullptr, &timeout);
    if (signo < 0) continue;  // EAGAIN (timeout) or EINTR
    if (signo == SIGHUP) {
      on_reload_();
    } else {
      on_stop_(signo);
    }
  }
}

}  // namespace kerncap::kerncapd
