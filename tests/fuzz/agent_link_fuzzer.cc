// agent_link_fuzzer.cc: bytes an agent writes to kerncapd's agent socket, as
// the daemon parses them: one connection served exactly as an accepted one
// (AgentLinkServer::ServeForTesting: Hello, Welcome and ring, then every
// frame through its handler), against an armed server and a sink that keeps
// nothing. "arm-0000000000000000" in the input is replaced by the id of the
// server's arm (same length), so captures can get past the arm check.
// Any crash, hang, sanitizer report or unbounded allocation is a bug.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "common/log.h"
#include "daemon/agent_link/agent_link_server.h"
#include "daemon/event_bus.h"
#include "tests/fuzz/null_sink.h"

namespace {

constexpr char kArmPlaceholder[] = "arm-0000000000000000";
// Small chunks and slots: the ring (created per connection) costs little.
constexpr uint32_t kChunk = 4096;

struct Daemon {
  Daemon() : sink(kChunk) {
    kerncap::log::SetMinLevel(kerncap::log::Level::kError);  // a line per input is noise
    char dir[] = "/tmp/kc-link-fuzz-XXXXXX";
    if (::mkdtemp(dir) == nullptr) std::abort();
    kerncap::link::AgentLinkServerOptions o;
    o.socket_path = std::string(dir) + "/agent.sock";
    o.chunk_size = kChunk;
    o.slot_size = kChunk;
    o.slot_count = 2;
    o.send_timeout_ms = 5;  // nobody reads the replies
    o.hello_timeout = absl::Milliseconds(10);
    o.progress_interval = absl::Seconds(1);
    o.capture_limits.max_inflight_chunks = 1u << 20;
    if (!server.Start(o, sink, bus).ok()) std::abort();
    Arm();
  }
  void Arm() {
    kerncap::v1::ArmRequest req;
    req.mutable_selector()->set_kernel("k");
    req.mutable_selector()->set_count(4000000000u);
    kerncap::Caller root;  // reaches every agent, whichever uid runs the fuzzer
    root.privileged = true;
    auto arm = server.Arm(req, root);
    if (!arm.ok() || arm->arm_id().size() != std::strlen(kArmPlaceholder)) std::abort();
    arm_id = arm->arm_id();
  }
  kerncap::fuzz::NullSink sink;
  kerncap::EventBus bus;
  kerncap::link::AgentLinkServer server;
  std::string arm_id;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Daemon* daemon = new Daemon();  // lives for the process
  std::string bytes(reinterpret_cast<const char*>(data), size);
  for (size_t at = bytes.find(kArmPlaceholder); at != std::string::npos;
       at = bytes.find(kArmPlaceholder, at + 1)) {
    bytes.replace(at, daemon->arm_id.size(), daemon->arm_id);
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  int buf = 1 << 20;
  ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  ::setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(sv[0], bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::shutdown(sv[0], SHUT_WR);  // EOF after the input
  daemon->server.ServeForTesting(kerncap::link::UniqueFd(sv[1]));
  ::close(sv[0]);
  return 0;
}
