// cuda_agent_graph.cc: the CUDA agent's armed cuGraphLaunch (see
// CudaAgent::OnGraphLaunchEnter in cuda_agent.h; the pieces it uses are
// graph_registry.h, graph_dispatch.h and graph_executor.h).
//
// Sequence of an armed launch of exec E on stream S, inside the launch's
// ENTER callback:
//   1. E's plan from the registry (what E runs now, flattened). Unknown or
//      unsupported execs pass through unchanged; an unsupported one is
//      reported once per exec on the arms its kernels would match.
//   2. S itself capturing into a graph: pass through uncounted (the nodes do
//      not run now; they run, and count, when the outer graph is launched).
//   3. Each enabled kernel node is one dispatch for the arms (graph_dispatch.h).
//      None selected: pass through unchanged. Otherwise, as for a direct
//      launch: no synchronization while another stream is capturing, the
//      arm grace period, the capture gate taken exclusively (other threads
//      wait at their next CUDA call; queued work is drained by the capture's
//      quiesce).
//   4. Everything the run needs is read (PrepareEagerRun, the empty exec).
//      Any failure: the gate is released, the launch passes through
//      unchanged, the selected dispatches are reported as not captured.
//   5. The nodes run one by one on S in the flattened order; a selected
//      node is captured exactly like a direct launch: its pre image after all
//      nodes before it completed (the capture's quiesce), its post image after
//      it. Then the remaining nodes are enqueued, the launch's exec is swapped
//      for an empty exec (so the driver's launch adds nothing but keeps the
//      stream order), and the gate is released. A node that fails to enqueue
//      once the run has started does not stop the run (the rest of the graph
//      still runs); the failure is logged and reported.
#include <cupti.h>  // includes generated_cuda_meta.h (which has no include guard)

#include <chrono>
#include <thread>

#include "agent/core/log.h"
#include "agent/cuda/cuda_agent.h"
#include "agent/cuda/driver_api.h"
#include "agent/cuda/graph_dispatch.h"

namespace kerncap::agent::cuda {
namespace {

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t Handle(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

}  // namespace

void CudaAgent::OnGraphLaunchEnter(CUpti_CallbackId cbid, const CUpti_CallbackData* cb,
                                   CaptureTransport* t) {
  // The parameter struct is the application's call: overwriting hGraph in
  // ENTER makes the driver launch that exec instead (measured, H200 driver
  // 580). Only ever done after the graph ran node by node.
  auto* params = static_cast<cuGraphLaunch_params*>(const_cast<void*>(cb->functionParams));
  if (t == nullptr || params == nullptr || params->hGraph == nullptr) return;
  const int device = DeviceOf(cb->context);
  std::shared_ptr<const GraphLaunchPlan> plan = graphs_.BeginLaunch(Handle(params->hGraph));
  if (plan == nullptr) {
    if (!graph_warned_.exchange(true)) {
      const char* why =
          "a CUDA graph instantiated before the agent was loaded was launched; kernels of such "
          "graphs are not captured (load the agent at process start)";
      KC_ALOG(kWarn, "%s", why);
      t->ReportSkipped(CaptureTicket{}, KernelMatchInfo{"", "cuGraphLaunch", device, {}}, why,
                       /*give_back=*/false);
    }
    return;
  }
  CUcontext launch_context = cb->context;
  auto describe = [&](const FlatNode& n) {
    std::shared_ptr<const KernelInfo> info =
        kernels_.Get(reinterpret_cast<CUfunction>(static_cast<uintptr_t>(n.function)), nullptr);
    KernelMatchInfo match{info->mangled_name, info->demangled_name, device, {}};
    // The node's own launch configuration and arguments, read only when a
    // per-shape arm's pattern matches it. Called by the selection right
    // away, while `plan` and the node are alive.
    const FlatNode* node = &n;
    const GraphLaunchPlan* graph_plan = plan.get();
    match.launch_shape = [this, node, graph_plan, launch_context,
                          info](link::PerShape mode) -> std::optional<uint64_t> {
      EagerOp op;
      if (!PrepareEagerOp(*node, *graph_plan, launch_context, &op).ok()) return std::nullopt;
      return LaunchShapeOf(mode, op.desc, op.kernel_params, op.extra, *info);
    };
    return match;
  };
  if (!plan->unsupported.empty()) {
    if (graphs_.FirstReport(plan->serial, "")) {
      KC_ALOG(kWarn, "%s", GraphRefusalText(*plan).c_str());
    }
    ReportGraphRefusal(*plan, describe, t, &graphs_);
    return;
  }

  const CUstream stream = GraphLaunchStream(cbid, *params);
  // Launched into a stream that is being captured: the graph becomes a child
  // node of the graph being recorded and does not run now.
  if (StreamBeingCaptured(stream)) return;

  // Taken before the decision, released on every way out (as for a direct
  // launch: other threads stay gated until the captures are over).
  AcquireCaptureRef();
  struct ReleaseOnReturn {
    CudaAgent* agent;
    ~ReleaseOnReturn() { agent->ReleaseCaptureRef(); }
  } capture_ref{this};
  std::vector<GraphNodeSelection> selected = SelectGraphNodes(plan->nodes(), describe, t);
  if (selected.empty()) return;
  auto skip_all = [&](const std::string& why, bool give_back) {
    for (const GraphNodeSelection& s : selected) Skip(t, s.ticket, s.info, why, give_back);
  };
  if (streams_capturing_.load() > 0) {
    return skip_all("another stream of the process is capturing a CUDA graph; synchronizing would "
                    "break it",
                    /*give_back=*/true);
  }
  int64_t since = SteadyNowNs() - armed_since_ns_.load();
  int64_t grace = static_cast<int64_t>(config_.arm_grace_ms) * 1000000;
  if (since < grace) std::this_thread::sleep_for(std::chrono::nanoseconds(grace - since));
  if (!service_.gate().TryEnterExclusive(std::chrono::milliseconds(config_.gate_timeout_ms))) {
    return skip_all("other threads stayed inside CUDA calls for longer than "
                    "KERNCAP_AGENT_GATE_TIMEOUT_MS",
                    /*give_back=*/true);
  }
  const auto gate_taken = std::chrono::steady_clock::now();

  // Everything the run needs, before anything runs.
  auto ops = PrepareEagerRun(*plan, cb->context);
  auto empty = ops.ok() ? empty_execs_.For(cb->context) : Result<CUgraphExec>(ops.status());
  if (!ops.ok() || !empty.ok()) {
    service_.gate().ExitExclusive();
    const std::string why = !ops.ok() ? ops.error() : "no empty graph to swap in: " + empty.error();
    KC_ALOG(kWarn, "graph exec 0x%llx launched unchanged: %s",
            static_cast<unsigned long long>(plan->exec), why.c_str());
    return skip_all("the CUDA graph (exec " + std::to_string(plan->serial) +
                        ") cannot be run node by node: " + why,
                    /*give_back=*/false);
  }

  KC_ALOG(kInfo,
          "graph exec 0x%llx launch %llu: running its %zu nodes one by one to capture %zu of them",
          static_cast<unsigned long long>(plan->exec),
          static_cast<unsigned long long>(plan->launch_index), ops->size(), selected.size());
  const std::vector<FlatNode>& nodes = plan->nodes();
  std::string run_error;
  size_t next = 0;
  for (size_t i = 0; i < ops->size(); ++i) {
    const EagerOp& op = (*ops)[i];
    if (next < selected.size() && selected[next].index == i) {
      const GraphNodeSelection& sel = selected[next++];
      LaunchCall call;
      call.function = op.function;
      call.stream = stream;
      call.kernel_params = op.kernel_params;
      call.extra = op.extra;
      call.desc = op.desc;
      call.desc.stream = Handle(stream);
      GraphOriginDesc origin;
      origin.exec = plan->exec;
      origin.graph = plan->graph;
      origin.exec_serial = plan->serial;
      origin.launch_index = plan->launch_index;
      origin.node_index = static_cast<uint32_t>(i);
      origin.node_count = static_cast<uint32_t>(nodes.size());
      origin.node_path = PathString(nodes[i].path);
      origin.node = nodes[i].handle;
      origin.instantiate_flags = plan->flags;
      KC_ALOG(kInfo, "capturing dispatch %llu of arm %s: node %s of graph exec 0x%llx",
              static_cast<unsigned long long>(sel.ticket.dispatch_index), sel.ticket.arm_id.c_str(),
              origin.node_path.c_str(), static_cast<unsigned long long>(plan->exec));
      auto lc = BeginCapture(&call, kernels_.Get(op.function, nullptr), device, stream, &sel.ticket,
                             t, &origin, gate_taken);
      Status st = EnqueueEagerOp(op, stream);  // the node runs, captured or not
      if (lc.ok()) {
        EndCapture(lc.value(), st.ok(), t, [] {});
      } else {
        Skip(t, sel.ticket, sel.info, lc.error(), /*give_back=*/false);
      }
      if (!st.ok() && run_error.empty()) run_error = "node " + origin.node_path + ": " + st.message();
      continue;
    }
    Status st = EnqueueEagerOp(op, stream);
    if (!st.ok() && run_error.empty()) {
      run_error = "node " + PathString(nodes[i].path) + " (" + GraphNodeKindName(op.kind) + "): " +
                  st.message();
    }
  }
  params->hGraph = empty.value();  // the driver's launch: nothing, in stream order
  service_.gate().ExitExclusive();  // the application continues
  const double held =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - gate_taken).count();
  service_.SetHeldSeconds(held);
  if (!run_error.empty()) {
    service_.CountFailure();
    const std::string why = "the agent's node-by-node run of CUDA graph exec " +
                            std::to_string(plan->serial) + " launch " +
                            std::to_string(plan->launch_index) + " failed at " + run_error +
                            "; the rest of the graph was run";
    KC_ALOG(kError, "%s", why.c_str());
    Skip(t, selected[0].ticket, selected[0].info, why, /*give_back=*/false);
  }
}

}  // namespace kerncap::agent::cuda
