// sim_runtime.h: a simulated HSA runtime for tests (no AMD GPU exists here).
//
// It implements the HsaApiTable entries the agent, replay and the tests' HIP-
// like host programs use, with ROCm 6 table layout (AmdExtTable followed by
// the vmem tail, minor_id = its size), so the agent's table-size checks and
// the replay's vmem path are exercised:
//   * one CPU agent and one GPU agent ("gfx90a"); a device memory pool, a
//     kernarg (host) pool and a legacy region;
//   * "device" memory is host memory mmap'ed with MAP_FIXED_NOREPLACE at
//     deterministic addresses (arena per pool), so a capture taken in one
//     simulated process can be restored at the same VAs by another instance;
//   * signals with blocking waits and dispatch timestamps;
//   * AQL queues with one packet-processor thread each: kernel dispatch
//     packets run the host function registered for the kernel's symbol
//     (reading the real kernarg layout), barrier-AND/OR packets wait on their
//     dependencies, any other packet type is recorded verbatim and completed;
//   * intercept queues (hsa_amd_queue_intercept_create/_register): a doorbell
//     store on the proxy hands the new packets to the registered handler on
//     the storing thread, whose writer appends to the hardware queue;
//   * executables loaded from real code objects (PT_LOAD segments copied to
//     a code arena; symbols and kernarg sizes from the ELF and metadata note),
//     and the loader extension 1.03 answered from them.
// One SimRuntime may exist at a time (the C entry points find it globally).
#ifndef KERNCAP_TESTS_HSA_SIM_SIM_RUNTIME_H_
#define KERNCAP_TESTS_HSA_SIM_SIM_RUNTIME_H_

#include <hsa/hsa.h>
#include <hsa/hsa_api_trace.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/hsa/code_object.h"
#include "common/hsa/hsa_tables.h"

namespace kerncap::hsa_sim {

// What a host kernel sees of one dispatch.
struct DispatchContext {
  const uint8_t* kernarg = nullptr;
  const ::kerncap::hsa::KernelMetadata* metadata = nullptr;  // null if the note lacks it
  std::array<uint32_t, 3> grid{1, 1, 1};       // work-items
  std::array<uint32_t, 3> workgroup{1, 1, 1};
  // Address of a variable of the kernel's executable (0 if none).
  std::function<uint64_t(const std::string&)> variable;

  // Explicit argument `index` (in metadata order), read at its real offset.
  template <typename T>
  T Arg(size_t index) const {
    T v{};
    __builtin_memcpy(&v, kernarg + metadata->args.at(index).offset, sizeof(T));
    return v;
  }
};
using HostKernel = std::function<void(const DispatchContext&)>;

// A packet of a type the simulator does not execute, as it arrived.
struct RawPacket {
  std::array<uint8_t, 64> bytes;
};

class SimRuntime {
 public:
  // Fixed arenas (deterministic addresses).
  static constexpr uint64_t kDeviceArena = 0x7e0000000000ull;
  static constexpr uint64_t kHostArena = 0x7e1000000000ull;
  static constexpr uint64_t kCodeArena = 0x7e2000000000ull;
  static constexpr uint64_t kVmemArena = 0x7e3000000000ull;

  SimRuntime();
  ~SimRuntime();  // stops queues, unmaps every arena allocation
  SimRuntime(const SimRuntime&) = delete;
  SimRuntime& operator=(const SimRuntime&) = delete;

  static SimRuntime* Current();

  // The live table (tools patch it; host programs call through it).
  HsaApiTable* table() { return &root_; }
  // dlopen()s an HSA tool and calls its OnLoad with the table, like ROCr
  // does for HSA_TOOLS_LIB. Returns OnLoad's result (false on dlopen error).
  bool LoadTool(const std::string& path, std::string* error);
  // Calls OnUnload of loaded tools (the runtime's shutdown).
  void UnloadTools();

  void RegisterKernel(const std::string& name, HostKernel fn);

  // Makes the AmdExtTable advertise `n` (<= kMaxUnknownAmdEntries) null
  // entries after the ROCm 6.1 layout, like a newer runtime (ROCm 10 has
  // hsa_amd_queue_create somewhere there). Call before LoadTool.
  static constexpr uint32_t kMaxUnknownAmdEntries = 8;
  void AdvertiseUnknownAmdExtEntries(uint32_t n);

  hsa_agent_t gpu() const { return hsa_agent_t{kGpuHandle}; }
  hsa_agent_t cpu() const { return hsa_agent_t{kCpuHandle}; }
  hsa_amd_memory_pool_t device_pool() const { return hsa_amd_memory_pool_t{kDevicePool}; }
  hsa_amd_memory_pool_t kernarg_pool() const { return hsa_amd_memory_pool_t{kKernargPool}; }

  // Packets of unknown type seen by packet processors, in arrival order.
  std::vector<RawPacket> unknown_packets();
  uint64_t dispatches_executed() const;

  // ----- implementation, used by the C entry points -------------------------
  struct Signal;
  struct Queue;
  struct Executable;
  static constexpr uint64_t kCpuHandle = 0x1001, kGpuHandle = 0x1002;
  static constexpr uint64_t kDevicePool = 0x2001, kKernargPool = 0x2002, kDeviceRegion = 0x3001;

  void* Allocate(uint64_t arena, size_t size, uint64_t owner);
  bool Free(void* ptr);
  bool FindAllocation(uint64_t addr, uint64_t* base, uint64_t* size, uint64_t* owner);
  Queue* NewQueue(uint32_t size, bool intercept);
  void DestroyQueue(Queue* q);
  void OnDoorbell(Signal* s);  // intercept dispatch on the storing thread
  void ExecutePacket(Queue* q, uint8_t* slot);
  hsa_status_t LoadCodeObject(Executable* e, const std::string& bytes);
  Executable* ExecutableOf(uint64_t addr);

  std::mutex mu_;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> allocations_;  // va -> (size, owner)
  std::map<uint64_t, uint64_t> bump_;  // arena -> next free offset
  std::map<std::string, HostKernel> kernels_;
  std::vector<std::unique_ptr<Executable>> executables_;
  std::vector<Queue*> queues_;
  std::vector<RawPacket> unknown_;
  uint64_t dispatches_ = 0;
  std::vector<void*> tools_;

  HsaApiTable root_{};
  CoreApiTable core_{};
  // ROCm 6 layout: the vmem tail starts right after
  // hsa_amd_svm_prefetch_async_fn, i.e. it overlays 5.2.3's last entry.
  struct AmdExtWithTail {
    AmdExtTable base;
    char room[sizeof(::kerncap::hsa::AmdExtTableRocm6Tail) + kMaxUnknownAmdEntries * sizeof(void*)];
  } amd_{};
  static constexpr uint32_t kAmdExtSize =
      ::kerncap::hsa::kAmdExtRocm6TailOffset + sizeof(::kerncap::hsa::AmdExtTableRocm6Tail);
  FinalizerExtTable finalizer_{};
  ImageExtTable image_{};
};

// Builds the HIP-like host side of a dispatch: kernarg buffer from the
// kernarg pool filled with `explicit_args` at their metadata offsets (hidden
// arguments get plausible runtime values), and submits through the table.
class SimHostProgram {
 public:
  explicit SimHostProgram(SimRuntime* sim) : sim_(sim), core_(sim->table()->core_),
                                             amd_(sim->table()->amd_ext_) {}
  hsa_executable_t Load(const std::string& code_object);
  uint64_t KernelObject(hsa_executable_t exe, const std::string& name);
  uint64_t VariableAddress(hsa_executable_t exe, const std::string& name);
  void* DeviceAlloc(size_t bytes);
  hsa_queue_t* CreateQueue();
  // A kernel dispatch packet for `kernel` over `n` work-items (1-D, 64 wide).
  hsa_kernel_dispatch_packet_t Dispatch(hsa_executable_t exe, const std::string& kernel,
                                        const std::vector<uint64_t>& explicit_args, uint32_t n,
                                        hsa_signal_t completion);
  // Writes `packets` (headers last) and rings the doorbell once.
  void Submit(hsa_queue_t* q, const std::vector<std::array<uint8_t, 64>>& packets);
  void SubmitOne(hsa_queue_t* q, const void* packet);
  hsa_signal_t NewSignal(int64_t value);
  bool Wait(hsa_signal_t s, int timeout_ms = 10000);
  // Dispatch + SubmitOne on `q` with a fresh completion signal, then Wait:
  // true once the kernel completed.
  bool Run(hsa_executable_t exe, hsa_queue_t* q, const std::string& kernel,
           const std::vector<uint64_t>& explicit_args, uint32_t n, int timeout_ms = 10000);

  const CoreApiTable* core() const { return core_; }
  const AmdExtTable* amd() const { return amd_; }

 private:
  SimRuntime* sim_;
  CoreApiTable* core_;
  AmdExtTable* amd_;
  std::map<uint64_t, std::string> code_objects_;  // exe handle -> bytes
};

}  // namespace kerncap::hsa_sim

#endif  // KERNCAP_TESTS_HSA_SIM_SIM_RUNTIME_H_
