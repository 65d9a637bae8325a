#include "agent/link/daemon_link.h"

#include <cstdlib>
#include <utility>


namespace kerncap::agent {
namespace {

// Every DaemonLink ever started, for the one atexit handler (links are never
// destroyed, so the pointers stay valid).
std::mutex g_links_mu;
std::vector<DaemonLink*>* g_links = nullptr;

}  // namespace

DaemonLink::DaemonLink(CaptureService* service, AgentLinkClientOptions options)
    : service_(service), client_(std::move(options)), transport_(&client_, /*async_end=*/true) {}

DaemonLink* DaemonLink::Start(CaptureService* service, link::HelloMsg identity,
                              DaemonLinkHooks hooks) {
  AgentLinkClientOptions options;
  options.identity = std::move(identity);
  options.lazy_ring = true;
  options.on_ring_mapped = [service, mapped = hooks.on_ring_mapped](uint8_t* base,
                                                                    uint64_t bytes) {
    service->SetRingBytes(bytes);
    if (mapped) mapped(base, bytes);
  };
  options.on_ring_unmapping = [unmapping = hooks.on_ring_unmapping](uint8_t* base,
                                                                    uint64_t bytes) {
    if (unmapping) unmapping(base, bytes);
  };
  options.on_capture_result = [service](const CaptureOutcome& o) {
    service->OnVerdict(o.capture_id, o.error, o.seconds_after_end);
  };
  options.on_armed_changed = std::move(hooks.on_armed_changed);
  options.list_kernels = std::move(hooks.list_kernels);
  options.on_substitute = std::move(hooks.on_substitute);
  options.on_unsubstitute = std::move(hooks.on_unsubstitute);
  options.on_link_lost = std::move(hooks.on_link_lost);
  options.launch_sampler = hooks.launch_sampler;
  auto* link = new DaemonLink(service, std::move(options));  // never destroyed (see header)
  {
    std::lock_guard lock(g_links_mu);
    if (g_links == nullptr) {
      g_links = new std::vector<DaemonLink*>();
      std::atexit([] {
        std::vector<DaemonLink*> links;
        {
          std::lock_guard lock(g_links_mu);
          links = *g_links;
        }
        for (DaemonLink* l : links) l->FlushAtExit();
      });
    }
    g_links->push_back(link);
  }
  link->client_.Start();
  service->SetTransport(&link->transport_);
  return link;
}

void DaemonLink::FlushAtExit() {
  std::lock_guard lock(mu_);
  if (stopped_) return;
  // A device snapshot that was draining is in the ring by now: the capture
  // service's own exit handler, registered at the first drain, ran first.
  client_.FlushOutgoing(CaptureService::ExitWaitMs());
}

void DaemonLink::Stop() {
  std::lock_guard lock(mu_);
  if (stopped_) return;
  stopped_ = true;
  if (service_->transport() == &transport_) service_->SetTransport(nullptr);
  client_.Stop();
}

}  // namespace kerncap::agent
