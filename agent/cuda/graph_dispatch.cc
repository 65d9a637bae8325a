#include "agent/cuda/graph_dispatch.h"

#include <cstdio>
#include <set>

namespace kerncap::agent::cuda {

std::vector<GraphNodeSelection> SelectGraphNodes(const std::vector<FlatNode>& nodes,
                                                 const DescribeKernelNode& describe,
                                                 CaptureTransport* transport) {
  std::vector<GraphNodeSelection> out;
  if (transport == nullptr) return out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const FlatNode& n = nodes[i];
    if (n.kind != GraphNodeKind::kKernel || !n.enabled) continue;
    KernelMatchInfo info = describe(n);
    std::optional<CaptureTicket> ticket = transport->ShouldCapture(info);
    if (ticket) out.push_back(GraphNodeSelection{i, std::move(*ticket), std::move(info)});
  }
  return out;
}

std::string GraphRefusalText(const GraphLaunchPlan& plan) {
  char head[160];
  std::snprintf(head, sizeof(head),
                "kernels of CUDA graph exec 0x%llx (instantiated from graph 0x%llx) are not "
                "captured: ",
                static_cast<unsigned long long>(plan.exec),
                static_cast<unsigned long long>(plan.graph));
  return head + plan.unsupported;
}

int ReportGraphRefusal(const GraphLaunchPlan& plan, const DescribeKernelNode& describe,
                       CaptureTransport* transport, GraphRegistry* registry) {
  if (transport == nullptr || plan.unsupported.empty()) return 0;
  int sent = 0;
  std::set<uint64_t> functions_seen;
  std::set<std::string> arms_done;
  const std::string text = GraphRefusalText(plan);
  for (const FlatNode& n : plan.nodes()) {
    if (n.kind != GraphNodeKind::kKernel) continue;
    if (!functions_seen.insert(n.function).second) continue;
    KernelMatchInfo info = describe(n);
    for (const std::string& arm : transport->ArmsMatching(info)) {
      if (!arms_done.insert(arm).second) continue;
      if (!registry->FirstReport(plan.serial, arm)) continue;
      transport->ReportSkipped(CaptureTicket{arm, 0, ""}, info, text, /*give_back=*/false);
      ++sent;
    }
  }
  return sent;
}

}  // namespace kerncap::agent::cuda
