// unix_listener.h: kerncapd's local control socket, accepted by the daemon
// itself so that every call knows its caller (caller_identity.h).
//
// gRPC's own "unix:" listener gives a call no way to learn the connecting
// process's credentials. This listener binds and listens on the path, accepts
// each connection and hands it to the running gRPC server as a channel of
// its own (grpc::AddInsecureChannelFromFd), whose peer then reads "fd:N".
//
// Use: Bind (before the server starts: the path exists when the daemon says
// it is ready), Start(server) after grpc::ServerBuilder::BuildAndStart,
// Stop before grpc::Server::Shutdown (no channel is added to a server that
// is shutting down). Stop also removes the socket file.
#ifndef KERNCAP_DAEMON_SERVICE_UNIX_LISTENER_H_
#define KERNCAP_DAEMON_SERVICE_UNIX_LISTENER_H_

#include <grpcpp/server.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace kerncap::service {

class UnixListener {
 public:
  // Binds `path` (which must not exist; the caller clears a stale socket)
  // and sets its mode and, when `group` >= 0, its group.
  static absl::StatusOr<std::unique_ptr<UnixListener>> Bind(const std::string& path, mode_t mode,
                                                            int64_t group = -1);
  ~UnixListener();
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  void Start(grpc::Server* server);
  void Stop();
  const std::string& path() const { return path_; }

 private:
  UnixListener(std::string path, int listen_fd, int wake_fd)
      : path_(std::move(path)), listen_fd_(listen_fd), wake_fd_(wake_fd) {}
  void AcceptLoop(grpc::Server* server);

  const std::string path_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: ends the accept loop
  std::thread thread_;
  std::atomic<bool> stopped_{false};
};

}  // namespace kerncap::service

#endif  // KERNCAP_DAEMON_SERVICE_UNIX_LISTENER_H_
