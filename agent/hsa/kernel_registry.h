// kernel_registry.h: kernel_object (device address of a 64-byte kernel
// descriptor, as found in a dispatch packet) -> everything a capture needs:
// names, executable, code object bytes and metadata, kernarg size, module
// variables. Resolved once per kernel object through the runtime (loader
// extension + executable symbols) and cached; the cache is dropped for an
// executable when the application destroys it (its addresses may be reused).
//
// Code objects are copied once per loaded code object and shared between
// executables with identical bytes (CodeObjectKey + byte compare), so
// rocBLAS/Tensile's hundreds of executables do not multiply memory.
#ifndef KERNCAP_AGENT_HSA_KERNEL_REGISTRY_H_
#define KERNCAP_AGENT_HSA_KERNEL_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/core/capture_types.h"
#include "agent/core/status.h"
#include "common/hsa/code_object.h"
#include "common/hsa/hsa_tables.h"

namespace kerncap::agent::hsa {

// Shared with the HSA replay (common/hsa).
using ::kerncap::hsa::AmdExtTableRocm6Tail;
using ::kerncap::hsa::Rocm6Tail;
using ::kerncap::hsa::CodeObjectMetadata;
using ::kerncap::hsa::CodeObjectSymbols;
using ::kerncap::hsa::GfxArchOf;
using ::kerncap::hsa::KernelArg;
using ::kerncap::hsa::KernelMetadata;
using ::kerncap::hsa::ParseCodeObjectMetadata;
using ::kerncap::hsa::ParseCodeObjectSymbols;
using ::kerncap::hsa::ParseKernelDescriptor;
using ::kerncap::hsa::SaveTables;
using ::kerncap::hsa::SavedTables;
using ::kerncap::hsa::TableHas;
using ::kerncap::hsa::UnknownAmdExtEntries;
using ::kerncap::hsa::VmemAccessDesc;
using ::kerncap::hsa::VmemAllocHandle;
using ::kerncap::hsa::kAmdExtKnownSize;
using ::kerncap::hsa::kKernelDescriptorSize;

struct ModuleVariable {
  std::string name;
  uint64_t address = 0;
  uint64_t size = 0;
  bool constant = false;  // in the constant address space (__constant__)
};

// One loaded code object of an executable.
struct LoadedCodeObject {
  uint64_t executable = 0;
  uint64_t load_base = 0;
  uint64_t load_size = 0;
  int64_t load_delta = 0;
  CodeObjectRef code;                 // bytes shared across identical objects
  std::optional<CodeObjectMetadata> metadata;
  std::string metadata_error;         // why metadata is absent
  CodeObjectSymbols symbols;
};

struct KernelRecord {
  uint64_t kernel_object = 0;
  uint64_t executable = 0;
  std::string symbol_name;   // as the runtime names it ("foo.kd" for code object v3+)
  std::string mangled_name;  // without ".kd"
  std::string demangled_name;
  std::string arch;          // "gfx90a" (from the metadata target)
  // Kernarg segment size and where it came from: "symbol", "metadata",
  // "descriptor" or "env"; 0 with `kernarg_error` set when none is known.
  uint32_t kernarg_size = 0;
  std::string kernarg_source;
  std::string kernarg_error;
  std::optional<KernelMetadata> metadata;
  std::shared_ptr<const LoadedCodeObject> code_object;  // null if unknown
  std::vector<ModuleVariable> variables;  // of the whole executable
};

// abi::__cxa_demangle, or `mangled` unchanged.
std::string Demangle(const std::string& mangled);

// Manifest argument list for a kernel (kind 1 value, 2 pointer, 3 hidden;
// hidden arguments are named by their value kind, e.g. "hidden_queue_ptr",
// so replay can patch runtime-owned pointers).
std::vector<ArgumentDesc> ArgumentsOf(const KernelMetadata& md);

class KernelRegistry {
 public:
  explicit KernelRegistry(const SavedTables* tables) : tables_(tables) {}

  // The record for `kernel_object`, resolving it on first use. Never null:
  // unresolvable pieces are left empty and explained in the record.
  std::shared_ptr<const KernelRecord> Get(uint64_t kernel_object);

  // The kernel census: every kernel symbol of every executable the loader
  // has loaded (mangled name without ".kd"), by executable in the loader's
  // order, then in symbol order. Empty without the loader extension.
  struct LoadedKernel {
    uint64_t executable = 0;
    std::string mangled_name;
  };
  std::vector<LoadedKernel> LoadedKernels() const;

  // The application destroyed `executable`: forget its records.
  void ForgetExecutable(uint64_t executable);
  void Clear();
  size_t size() const;
  size_t code_objects() const;

 private:
  std::shared_ptr<KernelRecord> Resolve(uint64_t kernel_object);
  std::shared_ptr<const LoadedCodeObject> CodeObjectFor(uint64_t executable,
                                                        uint64_t kernel_object);
  std::shared_ptr<const std::string> Intern(std::string bytes);

  const SavedTables* tables_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<const KernelRecord>> by_object_;
  // (executable, loaded code object handle) -> parsed object.
  std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<const LoadedCodeObject>> loaded_;
  std::multimap<uint64_t, std::weak_ptr<const std::string>> interned_;  // key -> bytes
};

}  // namespace kerncap::agent::hsa

#endif  // KERNCAP_AGENT_HSA_KERNEL_REGISTRY_H_
