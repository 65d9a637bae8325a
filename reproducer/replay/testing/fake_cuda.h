// fake_cuda.h: a CUDA driver for the replay's CPU tests. Built as a shared
// library with the soname libcuda.so.1 that exports the driver functions
// kerncap-replay resolves (cuda_driver.h), with cuda.h's exact signatures. A
// test that links it has it loaded before anything dlopens "libcuda.so.1",
// so the replay (ReplaySession, serve, libkerncap_replay.so) gets this one,
// on a machine with a GPU as well as without.
//
// What it models: one device (sm_90, 50 MiB L2); virtual address
// reservations (granted at the address asked for when free), physical
// allocations mapped into them, cuMemAlloc'd memory, registered host memory
// (accessed in place); modules loaded from ELF cubins (symbols read with
// common/cuda/cubin_elf.h) or PTX text (.entry and module-scope
// .global/.const declarations), with their variables in fake device memory;
// launches that run a C++ behaviour synchronously (built in: add_one and the
// device comparison kernel, core/compare_abi.h); a virtual device clock
// that kernels and memsets advance and events read; the persisting-L2 limit
// and stream access-policy windows. Every stream-ordered operation and every
// L2/limit call is appended to log() ("htod 0x... 4096", "memset32 0x...",
// "event", "launch add_one", "set_limit persisting_l2 0", ...), so a test
// can check the order of a benchmark's protocol.
//
// Everything is synchronous: an asynchronous copy has landed when it
// returns. Thread-safe (one lock): the restore pipeline copies from several
// threads while the mapping thread maps.
#ifndef KERNCAP_REPRODUCER_REPLAY_TESTING_FAKE_CUDA_H_
#define KERNCAP_REPRODUCER_REPLAY_TESTING_FAKE_CUDA_H_

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#define KC_FAKE_CUDA_API __attribute__((visibility("default")))

namespace kerncap::replay::fake {

class FakeCuda;

// One launch, as a kernel behaviour sees it.
struct Launch {
  std::string function;          // the kernel's name in its module
  uint64_t module = 0;           // FakeCuda module id (1, 2, ... in load order)
  const std::string* image = nullptr;  // the bytes the module was loaded from
  std::string args;              // the argument blob (CU_LAUNCH_PARAM_BUFFER_POINTER)
  void** params = nullptr;       // kernelParams, when the launch used them
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  unsigned cluster[3] = {1, 1, 1};
  bool cooperative = false;
  uint64_t launches_of_function = 0;  // earlier launches of this function in this module
};

// A kernel behaviour: reads and writes fake memory through the FakeCuda and
// returns the device time it took in milliseconds; a negative value is a
// fault (CUDA_ERROR_ILLEGAL_ADDRESS, sticky until Reset()).
using Kernel = std::function<double(FakeCuda& cuda, const Launch& launch)>;

class KC_FAKE_CUDA_API FakeCuda {
 public:
  static FakeCuda& Get();

  // Back to the initial state: no memory, no modules, clock 0, empty log,
  // default settings and the built-in kernels (add_one, see below).
  void Reset();

  // --- configuration -------------------------------------------------------
  // The behaviour of every kernel named `function` (any module).
  void SetKernel(const std::string& function, Kernel k);
  // The behaviour of `function` in modules loaded from exactly `image`
  // (takes precedence; a variant and its original can share a name).
  void SetKernelForImage(const std::string& image, const std::string& function, Kernel k);
  // Reservations that overlap [va, va+size) are refused at that address
  // (granted elsewhere): the replay must relocate.
  void RefuseAddress(uint64_t va, uint64_t size);
  void set_persisting_l2_supported(bool on);
  // Device time of a memset per MiB written and of a copy per MiB.
  void set_memset_ms_per_mib(double ms);
  // The built-in add_one's device time.
  void set_add_one_ms(double ms);
  // What cuMemGetInfo reports (default 64 GiB free of 80 GiB).
  void set_mem_info(uint64_t free_bytes, uint64_t total_bytes);

  // --- memory (for behaviours and tests) -----------------------------------
  // Bytes at a device address (mapped, cuMemAlloc'd or a module variable)
  // or a registered host address; false when [va, va+n) is not all there.
  bool Read(uint64_t va, void* out, size_t n);
  bool Write(uint64_t va, const void* in, size_t n);
  std::optional<uint64_t> ReadU64(uint64_t va);
  bool WriteU64(uint64_t va, uint64_t v);
  // A module variable's address and size.
  std::optional<std::pair<uint64_t, uint64_t>> Global(uint64_t module, const std::string& name);
  // The variable `name` in the module of `launch`.
  std::optional<uint64_t> GlobalOf(const Launch& launch, const std::string& name);

  // --- observation ---------------------------------------------------------
  std::vector<std::string> log();
  void clear_log();
  uint64_t persisting_l2_limit();
  uint64_t persisting_l2_resets();
  uint64_t stream_window_bytes(CUstream stream);
  double clock_ms();
  size_t loaded_modules();  // currently loaded
  // Every launch so far: "function@module".
  std::vector<std::string> launches();
  // Bytes currently cuMemAlloc'd (validate's device copies, comparator tables).
  uint64_t allocated_bytes();

  // --- the driver entry points' implementation (fake_cuda.cc) -------------
  struct State;
  State& state();
  std::recursive_mutex& mu() { return mu_; }

 private:
  FakeCuda();
  std::recursive_mutex mu_;
  std::unique_ptr<State> state_;
};

// The built-in kernel add_one(unsigned long long** table, unsigned n): for
// i < n, (*table)[i] += 1 (replay_test_util.h's kAddOnePtx).
KC_FAKE_CUDA_API Kernel AddOneKernel();
// The built-in device comparison kernel kc_compare_regions(tiles, regions,
// stats) (core/compare_abi.h), bitwise: every differing element counts as
// failing, whatever the dtype (the tests compare exactly; the replay's
// validate path uses it only bitwise). Launches of it are counted
// (compare_launches()).
KC_FAKE_CUDA_API Kernel CompareKernel();

}  // namespace kerncap::replay::fake

// C entry points for tests that cannot share C++ types with the fake (the
// Python binding's test loads the fake with ctypes): reset it, make add_one
// take `ms` of device time, and set the persisting-L2 limit as a previous
// user of the context would have.
extern "C" {
KC_FAKE_CUDA_API void kc_fake_cuda_reset(void);
KC_FAKE_CUDA_API void kc_fake_cuda_set_add_one_ms(double ms);
KC_FAKE_CUDA_API unsigned long long kc_fake_cuda_persisting_l2_limit(void);
}

#endif  // KERNCAP_REPRODUCER_REPLAY_TESTING_FAKE_CUDA_H_
