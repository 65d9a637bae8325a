// agent_c_api.h: the parts of the agent's C API (agent/api/kerncap_agent.h)
// that both backends answer the same way, from the backend-neutral capture
// service's figures; agent/cuda/injection.cc and agent/hsa/tool_entry.cc
// export the functions and call these.
#ifndef KERNCAP_AGENT_CORE_AGENT_C_API_H_
#define KERNCAP_AGENT_CORE_AGENT_C_API_H_

#include "agent/api/kerncap_agent.h"
#include "agent/core/capture_service.h"

namespace kerncap::agent {

// kerncap_agent_get_last_capture: fills *out from `c`; 0, or 1 for a null
// `out`.
int FillCaptureInfo(const LastCaptureFigures& c, kerncap_agent_capture_info_t* out);

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_AGENT_C_API_H_
