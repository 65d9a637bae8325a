// server.h: the socket loop of `kerncap-replay serve`. Accepts connections
// on a Unix stream socket, reads one request per line (protocol.h), hands it
// to an Evaluator and writes the answer line. Knows nothing about GPUs: the
// tests drive it with a fake evaluator.
//
// One thread, poll(2): any number of clients may be connected; complete
// request lines are executed one at a time (the restored GPU state is one
// resource), in the order they are read. A client that stops reading its
// answers for 30 s is dropped (SO_SNDTIMEO), so it cannot wedge the server.
//
// Serve() returns OK after a "shutdown" request or Stop(), and an error
// after the evaluator reports its state lost (the answer to that request,
// with "context_lost":true, is written first).
#ifndef KERNCAP_REPRODUCER_REPLAY_SERVE_SERVER_H_
#define KERNCAP_REPRODUCER_REPLAY_SERVE_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "reproducer/replay/serve/protocol.h"

namespace kerncap::replay::serve {

// What the server serves. The GPU implementation is evaluator.h's.
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // Facts for the "info" answer (an object).
  virtual nlohmann::json Info() = 0;
  // Runs one candidate. An error is answered {"ok":false,...}; the server
  // keeps serving unless lost() is true afterwards.
  virtual absl::StatusOr<EvaluateResult> Evaluate(const EvaluateRequest& request) = 0;
  // True once the served state can no longer be trusted (a candidate faulted
  // and took the CUDA context with it).
  virtual bool lost() const = 0;
};

struct ServerOptions {
  std::string socket_path;
  size_t max_request_bytes = kMaxRequestBytes;
  int send_timeout_seconds = 30;
};

class Server {
 public:
  // Creates the socket (mode 0600) and listens. A stale socket file (nobody
  // accepting on it) is replaced; a live one is AlreadyExists; a path that
  // exists and is not a socket is FailedPrecondition.
  static absl::StatusOr<std::unique_ptr<Server>> Listen(const ServerOptions& options);
  ~Server();  // closes every connection and removes the socket file

  absl::Status Serve(Evaluator& evaluator);

  // Makes Serve() return OK once the request in progress is answered.
  // Async-signal-safe (writes one byte to a pipe): call it from SIGTERM.
  void Stop();

  const std::string& socket_path() const { return options_.socket_path; }
  uint64_t requests_served() const { return requests_; }

 private:
  struct Connection;
  explicit Server(ServerOptions options) : options_(std::move(options)) {}

  // Executes one request line; sets *stop / *lost.
  std::string Handle(const std::string& line, Evaluator& evaluator, bool* stop, bool* lost);

  ServerOptions options_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  uint64_t requests_ = 0;
  bool unlink_on_close_ = false;
};

}  // namespace kerncap::replay::serve

#endif  // KERNCAP_REPRODUCER_REPLAY_SERVE_SERVER_H_
