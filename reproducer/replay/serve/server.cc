#include "reproducer/replay/serve/server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace kerncap::replay::serve {
namespace {

absl::StatusOr<sockaddr_un> Address(const std::string& path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path '", path, "' must be 1 to ",
                                                   sizeof(addr.sun_path) - 1, " bytes long"));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

// True when something accepts connections at `path` now.
bool SomeoneListens(const sockaddr_un& addr) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool live = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return live;
}

// Writes all of `data`; false when the peer is gone or stopped reading.
bool SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

struct Server::Connection {
  int fd = -1;
  std::string buffer;  // bytes read, not yet executed
  size_t scanned = 0;  // buffer[0, scanned) holds no '\n' (long base64 lines)
};

absl::StatusOr<std::unique_ptr<Server>> Server::Listen(const ServerOptions& options) {
  absl::StatusOr<sockaddr_un> addr = Address(options.socket_path);
  if (!addr.ok()) return addr.status();
  std::unique_ptr<Server> s(new Server(options));
  struct stat st;
  if (::lstat(options.socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(options.socket_path, " exists and is not a socket; not replacing it"));
    }
    if (SomeoneListens(*addr)) {
      return absl::AlreadyExistsError(
          absl::StrCat("another server is listening on ", options.socket_path));
    }
    ::unlink(options.socket_path.c_str());  // stale: left by a server that died
  }
  if (::pipe2(s->stop_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoError(errno, "pipe2");
  s->listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) return ErrnoError(errno, "socket(AF_UNIX)");
  // Owner only: a request names files the server reads and code it runs.
  const mode_t old_mask = ::umask(0177);
  const int rc = ::bind(s->listen_fd_, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr));
  const int bind_errno = errno;
  ::umask(old_mask);
  if (rc != 0) return ErrnoError(bind_errno, absl::StrCat("bind(", options.socket_path, ")"));
  s->unlink_on_close_ = true;
  if (::listen(s->listen_fd_, 64) != 0) {
    return ErrnoError(errno, absl::StrCat("listen(", options.socket_path, ")"));
  }
  return s;
}

Server::~Server() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (unlink_on_close_) ::unlink(options_.socket_path.c_str());
  for (int fd : stop_pipe_) {
    if (fd >= 0) ::close(fd);
  }
}

void Server::Stop() {
  const char b = 1;
  // The result does not matter: a full pipe already holds a wake-up.
  ssize_t n = ::write(stop_pipe_[1], &b, 1);
  (void)n;
}

std::string Server::Handle(const std::string& line, Evaluator& evaluator, bool* stop,
                           bool* lost) {
  ++requests_;
  absl::StatusOr<Request> req = ParseRequest(line);
  if (!req.ok()) return ToLine(ErrorAnswer(RequestId(line), req.status()));
  switch (req->op) {
    case Op::kShutdown:
      *stop = true;
      return ToLine(ShutdownAnswer(req->id));
    case Op::kInfo:
      return ToLine(InfoAnswer(req->id, evaluator.Info()));
    case Op::kEvaluate:
      break;
  }
  absl::StatusOr<EvaluateResult> r = evaluator.Evaluate(req->evaluate);
  if (r.ok()) return ToLine(EvaluateAnswer(req->id, *r));
  *lost = evaluator.lost();
  return ToLine(ErrorAnswer(req->id, r.status(), *lost));
}

absl::Status Server::Serve(Evaluator& evaluator) {
  std::vector<Connection> conns;
  auto close_conn = [&](size_t i) {
    ::close(conns[i].fd);
    conns.erase(conns.begin() + static_cast<std::ptrdiff_t>(i));
  };
  struct Closer {  // connections never outlive Serve()
    std::vector<Connection>* c;
    ~Closer() {
      for (Connection& x : *c) ::close(x.fd);
    }
  } closer{&conns};

  std::vector<pollfd> fds;
  std::vector<char> chunk(1 << 16);
  while (true) {
    fds.clear();
    fds.push_back({stop_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const Connection& c : conns) fds.push_back({c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;  // a signal: Stop() has written the pipe if it matters
      return ErrnoError(errno, "poll");
    }
    if (fds[0].revents != 0) return absl::OkStatus();
    if (fds[1].revents & POLLIN) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        timeval tv = {options_.send_timeout_seconds, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        conns.push_back(Connection{fd, {}, 0});
      }
    }
    // Connections accepted above are polled next round; walk the polled ones
    // backwards so that closing one keeps the others' indices.
    for (size_t k = fds.size(); k-- > 2;) {
      const size_t i = k - 2;
      if (fds[k].revents == 0) continue;
      Connection& c = conns[i];
      ssize_t n = ::recv(c.fd, chunk.data(), chunk.size(), MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {  // EOF or error: a trailing partial line is dropped
        close_conn(i);
        continue;
      }
      c.buffer.append(chunk.data(), static_cast<size_t>(n));
      bool drop = false;
      while (!drop) {
        const size_t nl = c.buffer.find('\n', c.scanned);
        const size_t length = nl == std::string::npos ? c.buffer.size() : nl;
        if (length > options_.max_request_bytes) {
          SendAll(c.fd, ToLine(ErrorAnswer(
                            nullptr, absl::InvalidArgumentError(absl::StrCat(
                                         "bad request: longer than ", options_.max_request_bytes,
                                         " bytes; closing the connection")))));
          drop = true;
          break;
        }
        if (nl == std::string::npos) {
          c.scanned = c.buffer.size();
          break;
        }
        std::string line = c.buffer.substr(0, nl);
        c.buffer.erase(0, nl + 1);
        c.scanned = 0;
        bool stop = false, lost = false;
        const std::string answer = Handle(line, evaluator, &stop, &lost);
        if (!SendAll(c.fd, answer)) drop = true;
        if (lost) {
          return absl::AbortedError(
              "a candidate faulted and the CUDA context is lost; stopped serving (see the "
              "answer sent to the client)");
        }
        if (stop) return absl::OkStatus();
      }
      if (drop) close_conn(i);
    }
  }
}

}  // namespace kerncap::replay::serve
