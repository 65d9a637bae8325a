// graph_dispatch.h: the arms' view of a graph launch. Every enabled kernel
// node of the flattened order (graph_model.h) is one dispatch, evaluated in
// that order, so skip / nth / count count node executions together with
// direct launches: `--kernel=step --nth=19` on a graph with four `step`
// nodes takes the 3rd `step` of the 5th launch (when the arm saw all of
// them). A disabled node does not run and is no dispatch.
//
// A graph the agent cannot execute node by node is refused before anything
// runs: its kernels are not counted (they cannot be captured; the arms keep
// waiting for a dispatch that can be), and the refusal is reported on each
// arm that would match one of its kernels, once per exec and arm.
#ifndef KERNCAP_AGENT_CUDA_GRAPH_DISPATCH_H_
#define KERNCAP_AGENT_CUDA_GRAPH_DISPATCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/core/capture_transport.h"
#include "agent/cuda/graph_model.h"
#include "agent/cuda/graph_registry.h"

namespace kerncap::agent::cuda {

// Names the kernel a flattened kernel node launches.
using DescribeKernelNode = std::function<KernelMatchInfo(const FlatNode&)>;

struct GraphNodeSelection {
  size_t index = 0;  // in the flattened order
  CaptureTicket ticket;
  KernelMatchInfo info;
};

// Asks the transport once per enabled kernel node, in order; returns the
// selected nodes (several when several arms, or an arm's count, take them).
std::vector<GraphNodeSelection> SelectGraphNodes(const std::vector<FlatNode>& nodes,
                                                 const DescribeKernelNode& describe,
                                                 CaptureTransport* transport);

// Reports `plan`'s refusal (plan.unsupported) on the arms that would match a
// kernel of it, once per exec and arm (registry->FirstReport). Returns how
// many reports were sent.
int ReportGraphRefusal(const GraphLaunchPlan& plan, const DescribeKernelNode& describe,
                       CaptureTransport* transport, GraphRegistry* registry);

// The text of such a refusal: "kernels of CUDA graph exec 0x... (instantiated
// from graph 0x...) are not captured: <why>".
std::string GraphRefusalText(const GraphLaunchPlan& plan);

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_GRAPH_DISPATCH_H_
