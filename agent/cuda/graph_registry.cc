#include "agent/cuda/graph_registry.h"

#include <cstdio>
#include <map>
#include <new>

namespace kerncap::agent::cuda {
namespace {

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Owns clones the agent made; destroys them when the last holder (the exec's
// record or a launch plan in flight) lets go.
struct CloneHolder {
  GraphApi* api = nullptr;
  uint64_t graph = 0;
  bool leak = false;  // fork child: the parent's driver objects are not ours
  ~CloneHolder() {
    if (!leak && graph != 0) api->Destroy(graph);
  }
};

bool HasPrefix(const std::vector<uint32_t>& path, const std::vector<uint32_t>& prefix) {
  return path.size() > prefix.size() && std::equal(prefix.begin(), prefix.end(), path.begin());
}

bool AnyDisabled(const GraphLevel& level) {
  for (const GraphNode& n : level.nodes) {
    if (!n.enabled) return true;
    if (n.body != nullptr && AnyDisabled(*n.body)) return true;
  }
  return false;
}

}  // namespace

struct GraphRegistry::Exec {
  uint64_t serial = 0;
  uint64_t graph = 0;
  uint64_t flags = 0;
  bool device_launch = false;
  uint64_t launches = 0;
  std::shared_ptr<GraphLevel> root;  // null when the model could not be built
  std::shared_ptr<CloneHolder> top;  // clone of the source graph
  // Child bodies replaced by cuGraphExecChildGraphNodeSetParams, by path.
  std::map<std::vector<uint32_t>, std::shared_ptr<CloneHolder>> overrides;
  // The application's node handles -> path in `root`.
  std::unordered_map<uint64_t, std::vector<uint32_t>> paths;
  std::string unsupported;  // sticky tracking failure
  // Cached between changes: the flattened order, and why it cannot run.
  std::shared_ptr<const std::vector<FlatNode>> flat;
  std::string node_reason;
};

GraphRegistry::GraphRegistry(GraphApi* api) : api_(api) {}
GraphRegistry::~GraphRegistry() = default;

void GraphRegistry::Refuse(Exec& e, std::string why) {
  if (e.unsupported.empty()) e.unsupported = std::move(why);
}

Result<std::shared_ptr<GraphLevel>> GraphRegistry::BuildLevel(uint64_t graph, int depth) {
  if (depth > kMaxGraphDepth) {
    return Error("child graphs nested deeper than " + std::to_string(kMaxGraphDepth) + " levels");
  }
  auto level = std::make_shared<GraphLevel>();
  level->graph = graph;
  auto nodes = api_->Nodes(graph);
  if (!nodes.ok()) return Error("listing the nodes of graph " + Hex(graph) + ": " + nodes.error());
  if (nodes->size() > kMaxGraphNodes) {
    return Error("graph " + Hex(graph) + " has more than " + std::to_string(kMaxGraphNodes) +
                 " nodes");
  }
  std::unordered_map<uint64_t, uint32_t> index;
  level->nodes.resize(nodes->size());
  for (uint32_t i = 0; i < nodes->size(); ++i) {
    const uint64_t h = (*nodes)[i];
    if (!index.emplace(h, i).second) return Error("graph " + Hex(graph) + " lists node " + Hex(h) + " twice");
    GraphNode& n = level->nodes[i];
    n.handle = h;
    auto kind = api_->Kind(h);
    if (!kind.ok()) return Error("type of node " + Hex(h) + ": " + kind.error());
    n.kind = *kind;
    if (n.kind == GraphNodeKind::kChildGraph) {
      auto body_graph = api_->ChildBody(h);
      if (!body_graph.ok()) return Error("body of child-graph node " + Hex(h) + ": " + body_graph.error());
      auto body = BuildLevel(*body_graph, depth + 1);
      if (!body.ok()) return body.status();
      n.body = std::move(body.value());
    } else if (n.kind == GraphNodeKind::kKernel) {
      auto k = api_->Kernel(h);
      if (!k.ok()) return Error("parameters of kernel node " + Hex(h) + ": " + k.error());
      n.function = k->function;
      n.device_updatable = k->device_updatable;
    }
  }
  auto edges = api_->Edges(graph);
  if (!edges.ok()) return Error("edges of graph " + Hex(graph) + ": " + edges.error());
  for (const auto& [from, to] : *edges) {
    auto f = index.find(from);
    auto t = index.find(to);
    if (f == index.end() || t == index.end()) {
      return Error("graph " + Hex(graph) + " has an edge to or from a node it does not list");
    }
    level->nodes[t->second].deps.push_back(f->second);
  }
  return level;
}

void GraphRegistry::MapNodes(uint64_t original, const GraphLevel& clone_level,
                             const GraphLevel& tree, std::vector<uint32_t>* prefix, int depth,
                             std::unordered_map<uint64_t, std::vector<uint32_t>>* out) {
  if (depth > kMaxGraphDepth) return;
  auto nodes = api_->Nodes(original);
  if (!nodes.ok()) return;  // unmapped nodes refuse the exec only if named later
  std::unordered_map<uint64_t, uint32_t> index;
  for (uint32_t i = 0; i < tree.nodes.size(); ++i) index.emplace(tree.nodes[i].handle, i);
  for (uint64_t o : *nodes) {
    auto c = api_->FindInClone(o, clone_level.graph);
    if (!c.ok()) continue;
    auto it = index.find(*c);
    if (it == index.end()) continue;
    prefix->push_back(it->second);
    (*out)[o] = *prefix;
    const GraphNode& n = tree.nodes[it->second];
    if (n.kind == GraphNodeKind::kChildGraph && n.body != nullptr) {
      auto body = api_->ChildBody(o);
      if (body.ok()) MapNodes(*body, *n.body, *n.body, prefix, depth + 1, out);
    }
    prefix->pop_back();
  }
}

void GraphRegistry::OnInstantiate(uint64_t exec, uint64_t graph, uint64_t flags) {
  std::lock_guard lock(mu_);
  auto e = std::make_unique<Exec>();
  e->serial = next_serial_++;
  e->graph = graph;
  e->flags = flags;
  if (flags & kInstantiateFlagDeviceLaunch) {
    e->device_launch = true;
    ++device_launch_execs_;
    Refuse(*e, "the graph was instantiated for device launch (CUDA_GRAPH_INSTANTIATE_FLAG_"
               "DEVICE_LAUNCH): kernels may launch it from the GPU, which works only inside a "
               "real graph launch");
  }
  auto clone = api_->Clone(graph);
  if (!clone.ok()) {
    // The driver does not clone graphs with memory or conditional nodes:
    // the source graph (alive now) says why, and which kernels it has (for
    // the refusal's report). That model is never run: its nodes are the
    // application's.
    auto shape = BuildLevel(graph, 0);
    std::string why;
    if (shape.ok()) {
      auto flat = FlattenGraph(**shape);
      if (flat.ok()) why = UnsupportedNodeReason(*flat);
      e->root = std::move(shape.value());
    }
    Refuse(*e, why.empty() ? "cloning the graph at instantiation failed: " + clone.error() : why);
  } else {
    e->top = std::make_shared<CloneHolder>();
    e->top->api = api_;
    e->top->graph = *clone;
    auto root = BuildLevel(*clone, 0);
    if (!root.ok()) {
      Refuse(*e, "reading the graph failed: " + root.error());
    } else {
      e->root = std::move(root.value());
      std::vector<uint32_t> prefix;
      MapNodes(graph, *e->root, *e->root, &prefix, 0, &e->paths);
    }
  }
  auto old = execs_.find(exec);
  if (old != execs_.end() && old->second->device_launch) --device_launch_execs_;
  execs_[exec] = std::move(e);
}

GraphNode* GraphRegistry::Resolve(Exec& e, uint64_t node, const char* what) {
  // A refused exec stays refused; its model is not changed any more.
  if (!e.unsupported.empty() || e.root == nullptr) return nullptr;
  auto it = e.paths.find(node);
  GraphNode* n = it == e.paths.end() ? nullptr : NodeAtPath(*e.root, it->second);
  if (n == nullptr) {
    Refuse(e, std::string(what) + " changed node " + Hex(node) +
                  ", which the agent could not place in its copy of the graph");
  }
  return n;
}

void GraphRegistry::OnNodeUpdate(uint64_t exec, uint64_t node, uint32_t cbid, const void* params) {
  std::lock_guard lock(mu_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) return;
  Exec& e = *it->second;
  GraphNode* n = Resolve(e, node, "an exec-level parameter update");
  if (n == nullptr) return;
  e.flat.reset();
  Status st = api_->ApplyNodeUpdate(n->handle, cbid, params);
  if (!st.ok()) {
    Refuse(e, "replaying an exec-level update of node " + Hex(node) + " failed: " + st.message());
    return;
  }
  if (n->kind == GraphNodeKind::kKernel) {
    auto k = api_->Kernel(n->handle);
    if (!k.ok()) {
      Refuse(e, "reading kernel node " + Hex(node) + " after its update failed: " + k.error());
      return;
    }
    n->function = k->function;
    n->device_updatable = k->device_updatable;
  }
}

void GraphRegistry::OnChildGraphUpdate(uint64_t exec, uint64_t node, uint64_t child_graph) {
  std::lock_guard lock(mu_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) return;
  Exec& e = *it->second;
  auto pit = e.paths.find(node);
  GraphNode* n = Resolve(e, node, "cuGraphExecChildGraphNodeSetParams");
  if (n == nullptr) return;
  e.flat.reset();
  if (n->kind != GraphNodeKind::kChildGraph || n->body == nullptr) {
    return Refuse(e, "a child-graph update named node " + Hex(node) + ", a " +
                         GraphNodeKindName(n->kind) + " node in the agent's copy");
  }
  const std::vector<uint32_t> path = pit->second;
  auto clone = api_->Clone(child_graph);
  if (!clone.ok()) return Refuse(e, "cloning the new child graph failed: " + clone.error());
  auto holder = std::make_shared<CloneHolder>();
  holder->api = api_;
  holder->graph = *clone;
  auto body = BuildLevel(*clone, static_cast<int>(path.size()));
  if (!body.ok()) return Refuse(e, "reading the new child graph failed: " + body.error());
  // The nodes inside keep their paths only if the bodies pair index by index.
  if (!SamePairing(*n->body, **body, nullptr)) {
    std::erase_if(e.paths, [&](const auto& kv) { return HasPrefix(kv.second, path); });
  }
  std::erase_if(e.overrides, [&](const auto& kv) { return HasPrefix(kv.first, path); });
  n->body = std::move(body.value());
  e.overrides[path] = std::move(holder);
}

void GraphRegistry::OnSetEnabled(uint64_t exec, uint64_t node, bool enabled) {
  std::lock_guard lock(mu_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) return;
  Exec& e = *it->second;
  GraphNode* n = Resolve(e, node, "cuGraphNodeSetEnabled");
  if (n == nullptr) return;
  e.flat.reset();
  n->enabled = enabled;
}

void GraphRegistry::OnExecUpdate(uint64_t exec, uint64_t graph) {
  std::lock_guard lock(mu_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) return;
  Exec& e = *it->second;
  e.flat.reset();
  if (!e.unsupported.empty() || e.root == nullptr) return;
  if (AnyDisabled(*e.root)) {
    return Refuse(e, "cuGraphExecUpdate on an exec with disabled nodes: whether they stay "
                     "disabled is not documented");
  }
  auto clone = api_->Clone(graph);
  if (!clone.ok()) return Refuse(e, "cloning the graph of cuGraphExecUpdate failed: " + clone.error());
  auto holder = std::make_shared<CloneHolder>();
  holder->api = api_;
  holder->graph = *clone;
  auto root = BuildLevel(*clone, 0);
  if (!root.ok()) return Refuse(e, "reading the graph of cuGraphExecUpdate failed: " + root.error());
  // What the exec runs is the new graph either way (the driver accepted it
  // as topologically identical). Earlier nodes keep their paths only when
  // index pairing verifies; otherwise they are forgotten, so a later update
  // naming one refuses the exec instead of changing a guessed node. The new
  // graph's own nodes are found exactly.
  if (!SamePairing(*e.root, **root, nullptr)) e.paths.clear();
  std::vector<uint32_t> prefix;
  MapNodes(graph, **root, **root, &prefix, 0, &e.paths);
  e.root = std::move(root.value());
  e.top = std::move(holder);
  e.overrides.clear();
  e.graph = graph;
}

void GraphRegistry::OnDestroy(uint64_t exec) {
  std::unique_ptr<Exec> dropped;  // destroyed (and its clones, unless in use) after unlocking
  std::lock_guard lock(mu_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) return;
  if (it->second->device_launch) --device_launch_execs_;
  dropped = std::move(it->second);
  execs_.erase(it);
}

std::shared_ptr<const GraphLaunchPlan> GraphRegistry::BeginLaunch(uint64_t exec, bool count) {
  std::lock_guard lock(mu_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) return nullptr;
  Exec& e = *it->second;
  auto plan = std::make_shared<GraphLaunchPlan>();
  plan->exec = exec;
  plan->graph = e.graph;
  plan->serial = e.serial;
  plan->flags = e.flags;
  plan->launch_index = count ? ++e.launches : e.launches;
  if (e.flat == nullptr && e.root != nullptr) {
    // Refused execs are flattened too: their kernels name the refusal.
    auto flat = FlattenGraph(*e.root);
    if (flat.ok()) {
      e.node_reason = UnsupportedNodeReason(*flat);
      e.flat = std::make_shared<const std::vector<FlatNode>>(std::move(flat.value()));
    } else {
      Refuse(e, "the graph cannot be ordered: " + flat.error());
    }
  }
  if (!e.unsupported.empty()) {
    plan->unsupported = e.unsupported;
  } else if (!e.node_reason.empty()) {
    plan->unsupported = e.node_reason;
  } else if (device_launch_execs_ > 0) {
    plan->unsupported =
        "this process has graphs instantiated for device launch: a kernel of this graph may "
        "launch one from the GPU, which works only inside a real graph launch";
  }
  plan->flat = e.flat;
  auto keep = std::make_shared<std::vector<std::shared_ptr<CloneHolder>>>();
  if (e.top) keep->push_back(e.top);
  for (const auto& [path, holder] : e.overrides) keep->push_back(holder);
  plan->keepalive = std::move(keep);
  return plan;
}

bool GraphRegistry::FirstReport(uint64_t serial, const std::string& key) {
  std::lock_guard lock(mu_);
  if (reported_.size() >= 65536) reported_.clear();  // bounded; reporting again is harmless
  return reported_.emplace(serial, key).second;
}

size_t GraphRegistry::size() const {
  std::lock_guard lock(mu_);
  return execs_.size();
}

void GraphRegistry::ResetAfterFork() {
  new (&mu_) std::mutex();
  for (auto& [exec, e] : execs_) {
    if (e->top) e->top->leak = true;
    for (auto& [path, holder] : e->overrides) holder->leak = true;
  }
  execs_.clear();
  device_launch_execs_ = 0;
  reported_.clear();
}

}  // namespace kerncap::agent::cuda
