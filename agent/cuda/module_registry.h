// module_registry.h: every code image the driver loaded, so a capture can
// ship the cubin of the launched kernel and enumerate its module's globals.
//
// Source: CUPTI's MODULE_LOADED resource callback hands over the loaded ELF
// cubin (already extracted from the fatbin and decompressed); it is valid only
// during the callback, so it is copied. With lazy loading the callback fires
// at first use, on the thread that triggered the load.
//
// Mapping a launched function back to its image:
//   1. by module handle: modules loaded on a thread during one driver call are
//      attributed to the CUmodule that call produced or named (cuModuleLoad*,
//      cuModuleGetFunction: pending ids are discarded at the call's ENTER and
//      attributed at its EXIT) or that the capture path obtained with
//      cuFuncGetModule right after forcing the load (AttributePending);
//   2. by kernel name: the image whose symbol table defines the mangled name,
//      preferring the most recently loaded one.
#ifndef KERNCAP_AGENT_CUDA_MODULE_REGISTRY_H_
#define KERNCAP_AGENT_CUDA_MODULE_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/core/capture_types.h"
#include "common/cuda/cubin_elf.h"

namespace kerncap::agent::cuda {

struct ModuleRecord {
  uint32_t module_id = 0;
  uint64_t context = 0;
  uint64_t load_seq = 0;  // load order
  CodeObjectRef code;
  // Parsed lazily (captures only); nullopt until then or if unparseable.
  bool parsed = false;
  std::optional<cubin::CubinInfo> info;
};

class ModuleRegistry {
 public:
  // Copies the image. Also remembers the id on this thread's pending list.
  void OnModuleLoaded(uint32_t module_id, uint64_t context, const void* image, size_t size);
  void OnModuleUnloading(uint32_t module_id);

  // Attributes the modules loaded on the calling thread since the last
  // AttributePending() or DiscardPending() to `cu_module` (a CUmodule).
  void AttributePending(uint64_t cu_module);
  // Forgets them (they stay registered, found by kernel name only).
  void DiscardPending();

  // The record for a kernel (see header comment). Parses cubins as needed.
  std::shared_ptr<ModuleRecord> FindForKernel(uint64_t cu_module, const std::string& mangled);

  // Every kernel of every registered image, by module id, then in symbol
  // order (the kernel census). Parses images as needed, one at a time under
  // the lock, so the application's module loads wait for one parse at most.
  struct LoadedKernel {
    uint32_t module_id = 0;
    std::string mangled_name;
  };
  std::vector<LoadedKernel> LoadedKernels();

  size_t size() const;
  uint64_t total_bytes() const;
  void Clear();

 private:
  static void EnsureParsed(ModuleRecord& r);

  mutable std::mutex mu_;
  uint64_t seq_ = 0;
  uint64_t total_bytes_ = 0;
  std::map<uint32_t, std::shared_ptr<ModuleRecord>> by_id_;
  std::map<uint64_t, uint32_t> by_handle_;  // CUmodule -> module id
};

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_MODULE_REGISTRY_H_
