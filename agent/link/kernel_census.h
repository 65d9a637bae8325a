// kernel_census.h: the agent's answer to the daemon's KernelsRequest
// (feature "kernel_census", common/agent_link/messages.h): a page of the
// kernels of the code objects it has seen loaded, within the report's bounds.
#ifndef KERNCAP_AGENT_LINK_KERNEL_CENSUS_H_
#define KERNCAP_AGENT_LINK_KERNEL_CENSUS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/agent_link/messages.h"

namespace kerncap::agent {

// True for a name the link may carry (census, launch sample): printable
// ASCII (code objects are the application's, and a name that is not valid
// UTF-8 could not even be encoded as JSON) of at most link::kMaxKernelNameBytes.
bool SendableKernelName(std::string_view name);

// The page of `request` over `kernels` (the backend's list, in its stable
// order): each (module, mangled name) once; entries with an empty name, a
// name over link::kMaxKernelNameBytes or bytes other than printable ASCII are
// left out (counted in left_out); the page starts at request.offset and ends
// at link::kMaxReportedKernels entries or before the body would pass
// link::kMaxKernelsReportBytes.
link::KernelsReportMsg KernelsReportPage(const link::KernelsRequestMsg& request,
                                         std::vector<link::LoadedKernelInfo> kernels);

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_LINK_KERNEL_CENSUS_H_
