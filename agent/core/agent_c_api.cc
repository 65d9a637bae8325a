#include "agent/core/agent_c_api.h"

namespace kerncap::agent {

int FillCaptureInfo(const LastCaptureFigures& c, kerncap_agent_capture_info_t* out) {
  if (out == nullptr) return 1;
  out->pre_bytes = c.pre_bytes;
  out->post_bytes = c.post_bytes;
  out->regions = c.regions;
  out->ring_bytes = c.ring_bytes;
  out->quiesce_seconds = c.quiesce_seconds;
  out->pre_seconds = c.pre_seconds;
  out->post_seconds = c.post_seconds;
  out->held_seconds = c.held_seconds;
  return 0;
}

}  // namespace kerncap::agent
