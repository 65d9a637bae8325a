// standin_daemon.h: a minimal kerncapd stand-in for agent-side tests of
// protocol features the real daemon does not drive yet (the kernel census):
// it accepts one agent on a Unix socket, reads its Hello, answers with a
// Welcome of the given features (lazy ring: no ring), then sends what the
// test asks and returns the agent's next frame. Real frames
// (common/agent_link/wire.h); no threads.
#ifndef KERNCAP_AGENT_TESTING_STANDIN_DAEMON_H_
#define KERNCAP_AGENT_TESTING_STANDIN_DAEMON_H_

#include <string>
#include <vector>

#include "common/agent_link/messages.h"
#include "common/agent_link/wire.h"

namespace kerncap::agent::testing {

class StandInDaemon {
 public:
  explicit StandInDaemon(const std::string& socket_path);
  ~StandInDaemon();
  StandInDaemon(const StandInDaemon&) = delete;
  StandInDaemon& operator=(const StandInDaemon&) = delete;

  bool listening() const { return fd_ >= 0; }
  // Accepts the agent (waits at most timeout_ms), reads its Hello, sends a
  // Welcome listing `features` (slot_count 0: lazy ring).
  bool Handshake(link::HelloMsg* hello, std::vector<std::string> features, int timeout_ms = 10000);
  // Sends `msg` (no answer expected).
  template <typename M>
  link::LinkStatus Tell(const M& msg) {
    return link::SendMessage(conn_, msg);
  }
  // Sends `msg` and returns the agent's next frame (10 s at most).
  template <typename M>
  link::LinkResult<link::Frame> Ask(const M& msg) {
    link::LinkStatus sent = link::SendMessage(conn_, msg);
    if (!sent.ok()) return sent;
    return link::RecvFrame(conn_, link::FrameLimits());
  }

 private:
  int fd_ = -1;
  int conn_ = -1;
};

}  // namespace kerncap::agent::testing

#endif  // KERNCAP_AGENT_TESTING_STANDIN_DAEMON_H_
