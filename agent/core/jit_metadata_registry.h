// jit_metadata_registry.h: metadata that only the application's language
// runtime knows about a JIT-compiled kernel (for Triton: the JIT function's
// source, signature, constexprs and chosen autotuner configuration), handed
// to the agent through its C API (kerncap_agent_set_jit_metadata) by
// python_shim, and attached to a capture of that kernel.
//
// Keyed by kernel name as the driver reports it (the mangled name; Triton
// kernels are not mangled). A later call for the same name replaces the
// entry: a recompiled kernel carries its latest configuration. Bounded: past
// kMaxEntries the oldest entries are dropped (a long-running autotuning
// process compiles many variants; only recent ones can still launch).
//
// Std-only (the agent lives inside arbitrary applications). Thread-safe; the
// lookup runs only on the capture path, never on the unarmed launch path.
#ifndef KERNCAP_AGENT_CORE_JIT_METADATA_REGISTRY_H_
#define KERNCAP_AGENT_CORE_JIT_METADATA_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kerncap::agent {

class JitMetadataRegistry {
 public:
  static constexpr size_t kMaxEntries = 4096;
  // One JSON document; larger ones are refused (a manifest field, not a store).
  static constexpr size_t kMaxJsonBytes = 1u << 20;

  enum class SetResult { kOk, kEmptyName, kTooLarge };
  SetResult Set(const std::string& kernel_name, std::string json);
  // The C API's form (kerncap_agent_set_jit_metadata in both agents): 0 ok,
  // 1 null/empty name or null json, 2 json larger than kMaxJsonBytes,
  // 3 out of memory. Never throws (it is called from the application).
  int SetFromC(const char* kernel_name, const char* json) noexcept;
  // The JSON for `kernel_name`, or empty.
  std::string Lookup(const std::string& kernel_name) const;
  size_t size() const;
  // Fork child: the parent's lock holders do not exist in the child.
  void ResetAfterFork();

 private:
  struct Entry {
    std::string json;
    uint64_t generation = 0;
  };
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  // Insertion order with generations, so a replaced entry's old position is
  // recognised as stale when it reaches the front.
  std::deque<std::pair<std::string, uint64_t>> order_;
  uint64_t next_generation_ = 0;
};

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_JIT_METADATA_REGISTRY_H_
