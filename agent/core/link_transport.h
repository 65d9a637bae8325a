// link_transport.h: CaptureTransport over the real agent link
// (AgentLinkClient: Unix socket to kerncapd + shared-memory slot ring).
// Converts the core's capture description into the link's JSON messages
// (common/agent_link/messages.h); adds no behaviour of its own.
#ifndef KERNCAP_AGENT_CORE_LINK_TRANSPORT_H_
#define KERNCAP_AGENT_CORE_LINK_TRANSPORT_H_

#include <memory>

#include "agent/core/capture_transport.h"
#include "agent/link/agent_link_client.h"

namespace kerncap::agent {

// Message conversions, exposed for tests.
link::CaptureBeginMsg ToCaptureBegin(const CaptureHeader& header);
link::RegionBeginMsg ToRegionBegin(ImageKind image, const RegionDesc& region);
const char* CodeObjectFormatName(CodeObjectFormat format);

class LinkTransport final : public CaptureTransport {
 public:
  // `client` must outlive the transport; Start() is the caller's business.
  explicit LinkTransport(AgentLinkClient* client) : client_(client) {}

  bool Armed() const override { return client_->armed(); }
  std::optional<CaptureTicket> ShouldCapture(const KernelMatchInfo& info) override;
  Result<std::unique_ptr<TransportSession>> Begin(const CaptureHeader& header,
                                                  std::string_view arg_blob) override;

  // Ring slots are waited for at most this long; a daemon that stops freeing
  // slots then fails the capture instead of holding the application forever.
  static constexpr int kSlotTimeoutMs = 30000;

 private:
  AgentLinkClient* client_;
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_LINK_TRANSPORT_H_
