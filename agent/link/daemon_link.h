// daemon_link.h: connects an agent's CaptureService (agent/core) to kerncapd,
// the same way for every backend:
//
//   - an AgentLinkClient with the backend's identity (Hello);
//   - lazy rings: staging memory is asked for only when an arm applies to this
//     process; the backend's ring hooks run when it is mapped / unmapped (the
//     CUDA agent registers it as pinned memory), its size goes to the service;
//   - asynchronous ends: a capture's End returns once its bytes are in the
//     ring; the daemon's verdict is counted by the service (OnVerdict);
//   - exit flush: a capture handed over just before the process exits still
//     reaches kerncapd (atexit, at most $KERNCAP_AGENT_EXIT_FLUSH_MS, default
//     60000);
//   - the kernel census (the backend's list of loaded kernels) and the
//     launcher rank in the Hello (agent_link_client.h);
//   - the transport (LinkTransport) installed on the service.
//
// A DaemonLink is never destroyed (the link thread and the atexit flush may
// outlive the application's static destruction); Stop() disconnects it.
#ifndef KERNCAP_AGENT_LINK_DAEMON_LINK_H_
#define KERNCAP_AGENT_LINK_DAEMON_LINK_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "agent/core/capture_service.h"
#include "agent/link/agent_link_client.h"
#include "agent/link/link_transport.h"

namespace kerncap::agent {

struct DaemonLinkHooks {
  // On the link thread, after the ring is mapped / before it is unmapped.
  std::function<void(uint8_t* base, uint64_t bytes)> on_ring_mapped;
  std::function<void(uint8_t* base, uint64_t bytes)> on_ring_unmapping;
  // After armed() changed (link thread, client lock held: quick, no calls
  // back into the client).
  std::function<void()> on_armed_changed;
  // The kernels of the process's loaded code objects (kernel census, in a
  // stable order; link thread). Unset: the agent offers no census.
  std::function<std::vector<link::LoadedKernelInfo>()> list_kernels;
  // Live substitution (agent_link_client.h; unset: not offered).
  std::function<link::LinkStatus(const link::SubstituteMsg&, std::string code_object)>
      on_substitute;
  std::function<void(const link::UnsubstituteMsg&)> on_unsubstitute;
  std::function<void()> on_link_lost;
  // Launch sampling (agent_link_client.h; null: not offered). Outlives the link.
  LaunchSampler* launch_sampler = nullptr;
};

class DaemonLink {
 public:
  // Starts the client (Start() waits up to its initial_wait_ms for the first
  // handshake) and installs the transport on `service`.
  static DaemonLink* Start(CaptureService* service, link::HelloMsg identity,
                           DaemonLinkHooks hooks = {});

  CaptureTransport* transport() { return &transport_; }
  AgentLinkClient* client() { return &client_; }
  // Disconnects; the service's transport is cleared first. Idempotent.
  void Stop();

 private:
  DaemonLink(CaptureService* service, AgentLinkClientOptions options);
  void FlushAtExit();

  CaptureService* service_;
  AgentLinkClient client_;
  LinkTransport transport_;
  std::mutex mu_;
  bool stopped_ = false;  // guarded by mu_
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_LINK_DAEMON_LINK_H_
