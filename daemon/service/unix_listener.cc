#include "daemon/service/unix_listener.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace kerncap::service {

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Bind(const std::string& path,
                                                                 mode_t mode, int64_t group) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path ", path, " is longer than the ",
                                                   sizeof(addr.sun_path) - 1,
                                                   " bytes Unix sockets allow"));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoError(errno, "socket");
  // The socket is created with no access for anyone but the daemon and then
  // opened up to `mode`, so no one connects in between with wider rights.
  const mode_t old_umask = ::umask(0777);
  const int bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  ::umask(old_umask);
  if (bound != 0) {
    ::close(fd);
    return ErrnoError(bind_errno, absl::StrCat("bind ", path));
  }
  if ((group >= 0 &&
       ::chown(path.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(group)) != 0) ||
      ::chmod(path.c_str(), mode) != 0 || ::listen(fd, 128) != 0) {
    const int e = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return ErrnoError(e, absl::StrCat("listen on ", path));
  }
  int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    const int e = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return ErrnoError(e, "eventfd");
  }
  return std::unique_ptr<UnixListener>(new UnixListener(path, fd, wake));
}

UnixListener::~UnixListener() {
  Stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void UnixListener::Start(grpc::Server* server) {
  thread_ = std::thread([this, server] { AcceptLoop(server); });
}

void UnixListener::Stop() {
  if (stopped_.exchange(true)) return;
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  ::unlink(path_.c_str());
}

void UnixListener::AcceptLoop(grpc::Server* server) {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (!stopped_.load()) {
    int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log::Error("control.accept_failed", {{"socket", path_}, {"error", std::strerror(errno)}});
      return;
    }
    if (fds[1].revents != 0 || stopped_.load()) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors: back off briefly rather than spin.
      log::Warn("control.accept_failed", {{"socket", path_}, {"error", std::strerror(errno)}});
      ::poll(nullptr, 0, 50);
      continue;
    }
    // gRPC owns the descriptor from here and closes it with the channel.
    grpc::AddInsecureChannelFromFd(server, conn);
  }
}

}  // namespace kerncap::service
