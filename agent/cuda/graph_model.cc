#include "agent/cuda/graph_model.h"

#include <algorithm>
#include <queue>

namespace kerncap::agent::cuda {
namespace {

Status FlattenLevel(const GraphLevel& level, int depth, std::vector<uint32_t>* path,
                    std::vector<FlatNode>* out) {
  if (depth > kMaxGraphDepth) {
    return Error("child graphs nested deeper than " + std::to_string(kMaxGraphDepth) + " levels");
  }
  const size_t n = level.nodes.size();
  std::vector<uint32_t> waiting(n, 0);  // unfinished dependencies per node
  std::vector<std::vector<uint32_t>> dependents(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint32_t> deps = level.nodes[i].deps;
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (uint32_t d : deps) {
      if (d >= n || d == i) {
        path->push_back(static_cast<uint32_t>(i));
        std::string where = PathString(*path);
        path->pop_back();
        return Error("node " + where + " depends on " +
                     (d == i ? std::string("itself") : "node index " + std::to_string(d) +
                                                           " of a level of " + std::to_string(n)));
      }
      ++waiting[i];
      dependents[d].push_back(static_cast<uint32_t>(i));
    }
  }
  // Lowest index first among the ready nodes: deterministic, and the
  // driver's own node order where dependencies allow it.
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (waiting[i] == 0) ready.push(static_cast<uint32_t>(i));
  }
  size_t done = 0;
  while (!ready.empty()) {
    const uint32_t i = ready.top();
    ready.pop();
    ++done;
    const GraphNode& node = level.nodes[i];
    path->push_back(i);
    if (node.kind == GraphNodeKind::kChildGraph) {
      if (node.body == nullptr) {
        std::string where = PathString(*path);
        path->pop_back();
        return Error("child-graph node " + where + " has no body");
      }
      KC_AGENT_RETURN_IF_ERROR(FlattenLevel(*node.body, depth + 1, path, out));
    } else {
      if (out->size() >= kMaxGraphNodes) {
        path->pop_back();
        return Error("more than " + std::to_string(kMaxGraphNodes) + " nodes");
      }
      FlatNode f;
      f.path = *path;
      f.handle = node.handle;
      f.kind = node.kind;
      f.function = node.function;
      f.device_updatable = node.device_updatable;
      f.enabled = node.enabled;
      out->push_back(std::move(f));
    }
    path->pop_back();
    for (uint32_t d : dependents[i]) {
      if (--waiting[d] == 0) ready.push(d);
    }
  }
  if (done != n) {
    return Error("the graph" + (path->empty() ? std::string() : " level " + PathString(*path)) +
                 " has a dependency cycle (" + std::to_string(n - done) + " nodes never ready)");
  }
  return OkStatus();
}

bool SamePairingAt(const GraphLevel& a, const GraphLevel& b, int depth, std::vector<uint32_t>* path,
                   std::string* why) {
  auto where = [&](uint32_t i) {
    path->push_back(i);
    std::string s = PathString(*path);
    path->pop_back();
    return s;
  };
  if (depth > kMaxGraphDepth) {
    *why = "child graphs nested too deeply";
    return false;
  }
  if (a.nodes.size() != b.nodes.size()) {
    *why = "level " + (path->empty() ? std::string("top") : PathString(*path)) + " has " +
           std::to_string(a.nodes.size()) + " nodes before and " +
           std::to_string(b.nodes.size()) + " after";
    return false;
  }
  for (uint32_t i = 0; i < a.nodes.size(); ++i) {
    const GraphNode& x = a.nodes[i];
    const GraphNode& y = b.nodes[i];
    if (x.kind != y.kind) {
      *why = "node " + where(i) + " is a " + GraphNodeKindName(x.kind) + " node before and a " +
             GraphNodeKindName(y.kind) + " node after";
      return false;
    }
    std::vector<uint32_t> dx = x.deps, dy = y.deps;
    std::sort(dx.begin(), dx.end());
    std::sort(dy.begin(), dy.end());
    dx.erase(std::unique(dx.begin(), dx.end()), dx.end());
    dy.erase(std::unique(dy.begin(), dy.end()), dy.end());
    if (dx != dy) {
      *why = "node " + where(i) + " has other dependencies";
      return false;
    }
    if (x.kind == GraphNodeKind::kChildGraph) {
      if (x.body == nullptr || y.body == nullptr) {
        *why = "child-graph node " + where(i) + " has no body";
        return false;
      }
      path->push_back(i);
      bool same = SamePairingAt(*x.body, *y.body, depth + 1, path, why);
      path->pop_back();
      if (!same) return false;
    }
  }
  return true;
}

}  // namespace

std::string GraphNodeKindName(GraphNodeKind kind) {
  switch (kind) {
    case GraphNodeKind::kKernel: return "kernel";
    case GraphNodeKind::kMemcpy: return "memcpy";
    case GraphNodeKind::kMemset: return "memset";
    case GraphNodeKind::kHost: return "host";
    case GraphNodeKind::kChildGraph: return "child graph";
    case GraphNodeKind::kEmpty: return "empty";
    case GraphNodeKind::kEventWait: return "event wait";
    case GraphNodeKind::kEventRecord: return "event record";
    case GraphNodeKind::kExtSemaphoreSignal: return "external semaphore signal";
    case GraphNodeKind::kExtSemaphoreWait: return "external semaphore wait";
    case GraphNodeKind::kMemAlloc: return "memory allocation";
    case GraphNodeKind::kMemFree: return "memory free";
    case GraphNodeKind::kBatchMemOp: return "batch memory operation";
    case GraphNodeKind::kConditional: return "conditional";
  }
  return "node type " + std::to_string(static_cast<int>(kind));
}

Result<std::vector<FlatNode>> FlattenGraph(const GraphLevel& top) {
  std::vector<FlatNode> out;
  std::vector<uint32_t> path;
  Status st = FlattenLevel(top, 0, &path, &out);
  if (!st.ok()) return st;
  return out;
}

std::string PathString(const std::vector<uint32_t>& path) {
  std::string s;
  for (uint32_t i : path) {
    if (!s.empty()) s += '/';
    s += std::to_string(i);
  }
  return s;
}

std::string UnsupportedNodeReason(const std::vector<FlatNode>& nodes) {
  for (const FlatNode& n : nodes) {
    const std::string at = "node " + PathString(n.path) + " is a " + GraphNodeKindName(n.kind) +
                           " node";
    switch (n.kind) {
      case GraphNodeKind::kKernel:
        if (n.device_updatable) {
          return "node " + PathString(n.path) +
                 " is a device-updatable kernel node (kernels may change its parameters from "
                 "the GPU, so the agent cannot know what it launches)";
        }
        break;
      case GraphNodeKind::kMemcpy:
      case GraphNodeKind::kMemset:
      case GraphNodeKind::kHost:
      case GraphNodeKind::kEmpty:
      case GraphNodeKind::kEventWait:
      case GraphNodeKind::kEventRecord:
        break;
      case GraphNodeKind::kMemAlloc:
      case GraphNodeKind::kMemFree:
        return at + " (graph-owned memory, e.g. cudaMallocAsync captured into the graph): the "
                    "agent cannot allocate or free it the way the graph does";
      case GraphNodeKind::kConditional:
        return at + " (IF/WHILE/SWITCH: the body that runs is decided on the GPU)";
      case GraphNodeKind::kExtSemaphoreSignal:
      case GraphNodeKind::kExtSemaphoreWait:
      case GraphNodeKind::kBatchMemOp:
        return at + " (not supported by the agent's node-by-node execution)";
      case GraphNodeKind::kChildGraph:  // expanded by FlattenGraph; never flat
      default:
        return at + " (unknown to the agent)";
    }
  }
  return "";
}

bool SamePairing(const GraphLevel& a, const GraphLevel& b, std::string* why) {
  std::vector<uint32_t> path;
  std::string ignored;
  return SamePairingAt(a, b, 0, &path, why != nullptr ? why : &ignored);
}

GraphNode* NodeAtPath(GraphLevel& top, const std::vector<uint32_t>& path) {
  GraphLevel* level = &top;
  GraphNode* node = nullptr;
  for (size_t k = 0; k < path.size(); ++k) {
    if (level == nullptr || path[k] >= level->nodes.size()) return nullptr;
    node = &level->nodes[path[k]];
    level = node->body.get();
  }
  return node;
}

}  // namespace kerncap::agent::cuda
