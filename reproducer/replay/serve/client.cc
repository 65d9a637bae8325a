#include "reproducer/replay/serve/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "reproducer/replay/serve/protocol.h"

namespace kerncap::replay::serve {

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& socket_path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("bad socket path '", socket_path, "'"));
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError(errno, "socket(AF_UNIX)");
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int e = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", socket_path, ": ",
                                               std::strerror(e),
                                               " (is `kerncap-replay serve` running there?)"));
  }
  return std::unique_ptr<Client>(new Client(fd));
}

Client::~Client() { ::close(fd_); }

absl::StatusOr<std::string> Client::CallRaw(const std::string& line, int timeout_seconds) {
  std::string out = line;
  if (out.empty() || out.back() != '\n') out.push_back('\n');
  for (size_t off = 0; off < out.size();) {
    ssize_t n = ::send(fd_, out.data() + off, out.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError(errno, "sending the request");
    off += static_cast<size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  char buf[1 << 16];
  while (true) {
    const size_t nl = pending_.find('\n');
    if (nl != std::string::npos) {
      std::string answer = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return answer;
    }
    int wait_ms = -1;
    if (timeout_seconds > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) {
        return absl::DeadlineExceededError(
            absl::StrCat("no answer within ", timeout_seconds, " s"));
      }
      wait_ms = static_cast<int>(left);
    }
    pollfd p = {fd_, POLLIN, 0};
    int pr = ::poll(&p, 1, wait_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) return ErrnoError(errno, "poll");
    if (pr == 0) continue;  // the deadline check above reports it
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, "reading the answer");
    if (n == 0) {
      return absl::UnavailableError(
          "the server closed the connection without answering (did it exit? see its log)");
    }
    pending_.append(buf, static_cast<size_t>(n));
  }
}

absl::StatusOr<nlohmann::json> Client::Call(const nlohmann::json& request, int timeout_seconds) {
  absl::StatusOr<std::string> line = CallRaw(ToLine(request), timeout_seconds);
  if (!line.ok()) return line.status();
  nlohmann::json j = nlohmann::json::parse(*line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat("the server's answer is not a JSON object: ",
                                            line->substr(0, 200)));
  }
  return j;
}

}  // namespace kerncap::replay::serve
