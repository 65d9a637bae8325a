// link_transport.h: CaptureTransport over the real agent link
// (AgentLinkClient: Unix socket to kerncapd + shared-memory slot ring).
// Converts the core's capture description into the link's messages
// (common/agent_link/messages.h; both speak vocabulary.h's enumerations, so
// only the shapes differ); adds no behaviour of its own.
#ifndef KERNCAP_AGENT_LINK_LINK_TRANSPORT_H_
#define KERNCAP_AGENT_LINK_LINK_TRANSPORT_H_

#include <memory>

#include "agent/core/capture_transport.h"
#include "agent/link/agent_link_client.h"

namespace kerncap::agent {

// Message conversions, exposed for tests.
link::CaptureBeginMsg ToCaptureBegin(const CaptureHeader& header);
link::RegionBeginMsg ToRegionBegin(ImageKind image, const RegionDesc& region);
// A launch's configuration as the launch sampler counts it (launches 0).
link::SampledConfig ToSampledConfig(const LaunchDesc& launch);

class LinkTransport final : public CaptureTransport {
 public:
  // `client` must outlive the transport; Start() is the caller's business.
  // async_end: End() returns once the capture's end is queued (the daemon's
  // verdict goes to the client's on_capture_result), so the application is
  // released as soon as its bytes are in the ring.
  explicit LinkTransport(AgentLinkClient* client, bool async_end = false)
      : client_(client), async_end_(async_end) {}

  bool Armed() const override { return client_->armed(); }
  const std::atomic<bool>* ArmedFlag() const override { return client_->armed_flag(); }
  bool AsyncEnd() const override { return async_end_; }
  bool ReportSkipped(const CaptureTicket& ticket, const KernelMatchInfo& info,
                     std::string_view reason, bool give_back) override;
  std::vector<std::string> ArmsMatching(const KernelMatchInfo& info) override;
  std::optional<CaptureTicket> ShouldCapture(const KernelMatchInfo& info) override;
  Result<std::unique_ptr<TransportSession>> Begin(const CaptureHeader& header,
                                                  std::string_view arg_blob) override;

  // Ring slots are waited for at most this long; a daemon that stops freeing
  // slots then fails the capture instead of holding the application forever.
  static constexpr int kSlotTimeoutMs = 30000;

 private:
  AgentLinkClient* client_;
  bool async_end_;
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_LINK_LINK_TRANSPORT_H_
