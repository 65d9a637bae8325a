#include "agent/cuda/module_registry.h"

#include <algorithm>

namespace kerncap::agent::cuda {
namespace {

thread_local std::vector<uint32_t> t_pending_modules;

bool DefinesKernel(const ModuleRecord& r, const std::string& mangled) {
  return r.info.has_value() &&
         std::find(r.info->kernels.begin(), r.info->kernels.end(), mangled) != r.info->kernels.end();
}

}  // namespace

void ModuleRegistry::OnModuleLoaded(uint32_t module_id, uint64_t context, const void* image,
                                    size_t size) {
  auto r = std::make_shared<ModuleRecord>();
  r->module_id = module_id;
  r->context = context;
  r->code.name = "module-" + std::to_string(module_id);
  r->code.format = CodeObjectFormat::kCubin;
  auto bytes = std::make_shared<std::string>(static_cast<const char*>(image), size);
  r->code.key = CodeObjectKey(*bytes);
  r->code.bytes = std::move(bytes);
  t_pending_modules.push_back(module_id);
  std::lock_guard lock(mu_);
  r->load_seq = ++seq_;
  auto it = by_id_.find(module_id);
  if (it != by_id_.end()) total_bytes_ -= it->second->code.bytes->size();
  total_bytes_ += size;
  by_id_[module_id] = std::move(r);
}

void ModuleRegistry::OnModuleUnloading(uint32_t module_id) {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(module_id);
  if (it == by_id_.end()) return;
  total_bytes_ -= it->second->code.bytes->size();
  by_id_.erase(it);
  for (auto h = by_handle_.begin(); h != by_handle_.end();) {
    h = h->second == module_id ? by_handle_.erase(h) : std::next(h);
  }
}

void ModuleRegistry::AttributePending(uint64_t cu_module) {
  std::vector<uint32_t> ids;
  ids.swap(t_pending_modules);
  std::lock_guard lock(mu_);
  for (uint32_t id : ids) by_handle_[cu_module] = id;
}

void ModuleRegistry::DiscardPending() { t_pending_modules.clear(); }

void ModuleRegistry::EnsureParsed(ModuleRecord& r) {
  if (r.parsed) return;
  r.parsed = true;
  auto info = cubin::ParseCubin(*r.code.bytes);
  if (info.ok()) r.info = std::move(info.value());
}

std::shared_ptr<ModuleRecord> ModuleRegistry::FindForKernel(uint64_t cu_module,
                                                            const std::string& mangled) {
  std::lock_guard lock(mu_);
  auto h = by_handle_.find(cu_module);
  if (h != by_handle_.end()) {
    auto it = by_id_.find(h->second);
    if (it != by_id_.end()) {
      EnsureParsed(*it->second);
      if (DefinesKernel(*it->second, mangled)) return it->second;
    }
  }
  std::shared_ptr<ModuleRecord> best;
  for (auto& [id, r] : by_id_) {
    EnsureParsed(*r);
    if (DefinesKernel(*r, mangled) && (!best || r->load_seq > best->load_seq)) best = r;
  }
  return best;
}

std::vector<ModuleRegistry::LoadedKernel> ModuleRegistry::LoadedKernels() {
  std::vector<uint32_t> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, r] : by_id_) ids.push_back(id);
  }
  std::vector<LoadedKernel> out;
  for (uint32_t id : ids) {
    std::lock_guard lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) continue;  // unloaded meanwhile
    EnsureParsed(*it->second);
    if (!it->second->info.has_value()) continue;
    for (const std::string& k : it->second->info->kernels) out.push_back(LoadedKernel{id, k});
  }
  return out;
}

size_t ModuleRegistry::size() const {
  std::lock_guard lock(mu_);
  return by_id_.size();
}

uint64_t ModuleRegistry::total_bytes() const {
  std::lock_guard lock(mu_);
  return total_bytes_;
}

void ModuleRegistry::Clear() {
  std::lock_guard lock(mu_);
  by_id_.clear();
  by_handle_.clear();
  total_bytes_ = 0;
}

}  // namespace kerncap::agent::cuda
