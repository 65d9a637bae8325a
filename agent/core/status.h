// status.h: the agent's error model. The agent may not use Abseil (the host
// application may bundle another copy), so it shares the std-only LinkStatus /
// LinkResult of the agent link (common/agent_link/result.h) instead of
// inventing a second one. Functions never throw into the application.
#ifndef KERNCAP_AGENT_CORE_STATUS_H_
#define KERNCAP_AGENT_CORE_STATUS_H_

#include <string>

#include "common/agent_link/result.h"

namespace kerncap::agent {

using Status = ::kerncap::link::LinkStatus;
template <typename T>
using Result = ::kerncap::link::LinkResult<T>;

inline Status OkStatus() { return Status::Ok(); }
inline Status Error(std::string message) { return Status::Error(std::move(message)); }

}  // namespace kerncap::agent

// Returns early from the enclosing function when `expr` yields a non-ok Status.
#define KC_AGENT_RETURN_IF_ERROR(expr)      \
  do {                                      \
    ::kerncap::agent::Status _kc_s = (expr); \
    if (!_kc_s.ok()) return _kc_s;          \
  } while (0)

#endif  // KERNCAP_AGENT_CORE_STATUS_H_
