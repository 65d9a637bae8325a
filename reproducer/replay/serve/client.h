// client.h: the client side of the serve protocol (protocol.h): connect to a
// `kerncap-replay serve` socket, send request lines, read answer lines. Used
// by `kerncap-replay submit`, the GPU test and the serve benchmark.
#ifndef KERNCAP_REPRODUCER_REPLAY_SERVE_CLIENT_H_
#define KERNCAP_REPRODUCER_REPLAY_SERVE_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace kerncap::replay::serve {

class Client {
 public:
  // Unavailable when nothing listens at `socket_path`.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& socket_path);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `request` as one line and waits for the answer line (as long as
  // the evaluation takes: a PTX candidate is JIT-compiled first).
  // `timeout_seconds` > 0 bounds the wait (DeadlineExceeded).
  absl::StatusOr<nlohmann::json> Call(const nlohmann::json& request, int timeout_seconds = 0);
  // The same with a request line as is (tests send malformed ones).
  absl::StatusOr<std::string> CallRaw(const std::string& line, int timeout_seconds = 0);

 private:
  explicit Client(int fd) : fd_(fd) {}
  int fd_;
  std::string pending_;  // bytes after the last answer line read
};

}  // namespace kerncap::replay::serve

#endif  // KERNCAP_REPRODUCER_REPLAY_SERVE_CLIENT_H_
