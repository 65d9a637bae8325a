#include "agent/testing/standin_daemon.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>

namespace kerncap::agent::testing {

StandInDaemon::StandInDaemon(const std::string& socket_path) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path.c_str());
  if (fd_ >= 0 && (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
                   ::listen(fd_, 4) != 0)) {
    ::close(fd_);
    fd_ = -1;
  }
}

StandInDaemon::~StandInDaemon() {
  if (conn_ >= 0) ::close(conn_);
  if (fd_ >= 0) ::close(fd_);
}

bool StandInDaemon::Handshake(link::HelloMsg* hello, std::vector<std::string> features,
                              int timeout_ms) {
  pollfd p{fd_, POLLIN, 0};
  if (fd_ < 0 || ::poll(&p, 1, timeout_ms) != 1) return false;
  conn_ = ::accept(fd_, nullptr, nullptr);
  if (conn_ < 0) return false;
  timeval tv{10, 0};
  ::setsockopt(conn_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  link::LinkResult<link::Frame> f = link::RecvFrame(conn_, link::FrameLimits());
  if (!f.ok() || !link::DecodeBody(*f, hello).ok()) return false;
  link::WelcomeMsg w;
  w.agent_id = "agt-standin";
  w.chunk_size = 1 << 16;
  w.max_payload = 1 << 20;
  w.features = std::move(features);
  return link::SendMessage(conn_, w).ok();
}

}  // namespace kerncap::agent::testing
