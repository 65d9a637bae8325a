// link_ids.h: the ids kerncapd gives agents ("agt-"), arms ("arm-") and
// substitutions ("sub-"): the prefix and 16 lowercase hex digits (64 random
// bits), e.g. "arm-0123456789abcdef". Capture ids are common/capture_id.h.
#ifndef KERNCAP_DAEMON_AGENT_LINK_LINK_IDS_H_
#define KERNCAP_DAEMON_AGENT_LINK_LINK_IDS_H_

#include <string>

#include "absl/strings/string_view.h"

namespace kerncap::link {

// Thread-safe.
std::string RandomLinkId(absl::string_view prefix);

}  // namespace kerncap::link

#endif  // KERNCAP_DAEMON_AGENT_LINK_LINK_IDS_H_
