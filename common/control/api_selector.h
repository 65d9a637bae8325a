// api_selector.h: an API selector (kerncap.v1.Selector) as the agent link's
// selector (common/agent_link/selector.h), so kerncapd (arms, substitutions)
// and clients (the kernel census filter, the arm preview) match names with
// the very code the agents run.
#ifndef KERNCAP_COMMON_CONTROL_API_SELECTOR_H_
#define KERNCAP_COMMON_CONTROL_API_SELECTOR_H_

#include <cstdint>

#include "common/agent_link/selector.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap::link {

// v1.Selector (+ request expiry) -> link selector. Does not validate.
Selector SelectorFromProto(const v1::Selector& selector, int64_t expires_unix_ms);

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_CONTROL_API_SELECTOR_H_
