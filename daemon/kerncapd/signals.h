// signals.h: kerncapd's signal handling. No work happens in async signal
// handlers: SIGTERM, SIGINT and SIGHUP are blocked in every thread and one
// thread takes them with sigtimedwait() and calls plain callbacks.
// SIGPIPE is ignored (a vanished peer is an EPIPE error) and so is SIGXFSZ
// (a file-size limit makes writes fail with EFBIG, which the store reports
// as ResourceExhausted, instead of killing the daemon).
#ifndef KERNCAP_DAEMON_KERNCAPD_SIGNALS_H_
#define KERNCAP_DAEMON_KERNCAPD_SIGNALS_H_

#include <atomic>
#include <functional>
#include <thread>

namespace kerncap::kerncapd {

// Must run in main() before any other thread exists, so every thread
// inherits the mask.
void BlockDaemonSignals();

class SignalThread {
 public:
  SignalThread(std::function<void(int signo)> on_stop, std::function<void()> on_reload);
  ~SignalThread();  // stops and joins

  void Stop();

 private:
  void Run();

  std::function<void(int)> on_stop_;
  std::function<void()> on_reload_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kerncap::kerncapd

#endif  // KERNCAP_DAEMON_KERNCAPD_SIGNALS_H_
