// agent_link_options.h: how kerncapd's agent link is configured
// (AgentLinkServerOptions) and the bounds on what one agent capture may
// declare (CaptureLimits). Its own header because the server
// (agent_link_server.h) and each connection (agent_connection.h) read them.
#ifndef KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_OPTIONS_H_
#define KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "common/agent_link/ring.h"
#include "common/agent_link/selector.h"
#include "common/agent_link/wire.h"

namespace kerncap::link {

// Bounds on what one agent capture may declare. Every size and count an agent
// sends is checked against these, the frame limits and the ring before
// anything is allocated from it; a capture that exceeds one fails with a
// CaptureResult error naming the bound, the agent stays connected and
// kerncapd keeps serving. The ingest keeps ~40 bytes per declared chunk, so
// the chunk bounds are what bound the daemon's memory per capture and in all.
struct CaptureLimits {
  uint32_t max_regions = 1u << 18;              // RegionBegin frames per capture
  uint64_t max_chunks = 1ull << 23;             // declared chunks, pre + post
  uint64_t max_inflight_chunks = 1ull << 24;    // declared chunks of all captures
  uint64_t max_argument_blob = 1ull << 20;      // CaptureBegin payload
  uint32_t max_code_objects = 1024;             // CodeObject frames per capture
  uint64_t max_code_object_bytes = 4ull << 30;  // their payloads together
  size_t max_kernel_name_bytes = kMaxKernelNameBytes;
  size_t max_name_bytes = 4096;                 // region and code object names
};

struct AgentLinkServerOptions {
  std::string socket_path;  // required; its directory is created if missing
  int socket_mode = 0660;
  // Group of the socket (and of its directory when created here): the users
  // a node daemon serves (kerncapd --socket-group). -1: the daemon's.
  int64_t socket_group = -1;
  // Ring per agent (pre-faulted in the daemon: slot_size * slot_count bytes).
  // Agents that speak "lazy_ring" get theirs only when they may capture (an
  // arm applies to them); others get it at connect time.
  uint64_t slot_size = kDefaultSlotSize;
  uint32_t slot_count = kDefaultSlotCount;
  // Bound on the memory of all rings together (0: none), never exceeded. A
  // ring asked for when the budget is short gets fewer slots (at least 2:
  // its captures pause the application longer, backpressure); when not even
  // 2 slots are left, the daemon asks idle rings back (RingRevoke, agents
  // with "ring_release") and waits up to ring_reclaim_timeout for them, so
  // staging goes to captures in flight; failing that the ring is refused
  // with a message saying the budget is in use.
  uint64_t max_total_ring_bytes = 0;
  // With max_total_ring_bytes 0, the bound kerncapd applies anyway: rings
  // are pre-faulted host memory, so without any bound idle agents could take
  // all of it. 0 here too: no bound at all (tests).
  uint64_t default_total_ring_bytes = 0;
  // Rings that cannot be asked back (agents without "lazy_ring" and
  // "ring_release" get theirs at connect time and keep it) together hold at
  // most this share of the budget, so captures of agents that can always
  // find staging; an agent asked for its ring that does not give it back
  // within ring_reclaim_timeout is disconnected.
  double max_pinned_ring_share = 0.5;
  absl::Duration ring_reclaim_timeout = absl::Seconds(2);
  bool lazy_rings = true;  // honor agents' "lazy_ring"; false: always eager
  // Must equal the store's chunk size: WriteRegion offsets are multiples of it.
  uint32_t chunk_size = 1u << 20;
  int max_agents = 256;  // one thread each; further connections are refused
  FrameLimits limits;
  CaptureLimits capture_limits;
  // An agent that stops reading for this long is disconnected (protects the
  // Arm RPC and ingest callbacks from blocking on a stuck application).
  int send_timeout_ms = 5000;
  absl::Duration hello_timeout = absl::Seconds(5);
  // Shutdown(false) waits at most this long for in-flight captures.
  absl::Duration drain_timeout = absl::Seconds(30);
  absl::Duration progress_interval = absl::Milliseconds(250);
  size_t max_finished_arms = 1000;  // finished arms kept for ListArms(true)
  // The kernel census (ListKernels): how long an agent may take to send all
  // its pages, and how many kernels of one agent are kept (the rest are
  // counted as left out): a census is answered in memory, one per RPC.
  absl::Duration census_timeout = absl::Seconds(5);
  uint64_t max_census_kernels = 100000;
  // ... and bytes (names and modules) kept per agent, per answer, and of all
  // census answers being built at once (concurrent ListKernels calls): a
  // census cut short says so on the agent (AgentKernels.truncated). The
  // answer must fit the control API's 128 MiB messages.
  uint64_t max_census_bytes_per_agent = 32ull << 20;
  uint64_t max_census_total_bytes = 96ull << 20;
  uint64_t max_census_bytes_in_flight = 256ull << 20;
  // Every daemon-to-agents fan-out (arm and disarm pushes, substitutions,
  // census and sample requests) gives each agent at most this long to take
  // its frame (at most send_timeout_ms); the agents that did not are named
  // in the answer and disconnected. Agents are served in parallel.
  absl::Duration fanout_timeout = absl::Seconds(5);
  // Active arms in all and per owner uid (ArmRegistry; 0: no bound).
  size_t max_active_arms = 1024;
  size_t max_active_arms_per_owner = 64;
  // Log lines (and events) an agent's reports may cause: a token bucket per
  // agent of `agent_log_burst` lines refilled at `agent_log_lines_per_second`;
  // lines beyond it are dropped and counted, and one "agent_link.suppressed"
  // line says how many (per agent, when lines flow again or it disconnects).
  double agent_log_lines_per_second = 20;
  uint32_t agent_log_burst = 100;
  // "chunk_fingerprints": chunks remembered per agent connection (about 80
  // bytes each; 1M chunks of 1 MiB cover 1 TiB of device memory). 0 turns
  // the feature off.
  size_t max_remembered_fingerprints = 1u << 20;
};

}  // namespace kerncap::link

#endif  // KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_OPTIONS_H_
