// kernel_census.h: the agent's answer to the daemon's KernelsRequest
// (feature "kernel_census", common/agent_link/messages.h): a page of the
// kernels of the code objects it has seen loaded, within the report's bounds.
#ifndef KERNCAP_AGENT_LINK_KERNEL_CENSUS_H_
#define KERNCAP_AGENT_LINK_KERNEL_CENSUS_H_

#include <cstdint>
#include <vector>

#include "common/agent_link/messages.h"

namespace kerncap::agent {

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
