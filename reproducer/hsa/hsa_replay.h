// hsa_replay.h: the HSA side of kerncap-replay. Restores a captured dispatch
// at its original virtual addresses, loads its code object, rebuilds the
// kernarg segment with runtime-owned hidden arguments patched, dispatches it
// through an AQL queue, validates every captured region against the post
// image and benchmarks with dispatch timestamps.
//
// Restore uses the ROCm >= 6 vmem API (hsa_amd_vmem_address_reserve at the
// exact base, handle_create, map, set_access), found by table size in the
// AmdExtTable (agent/hsa/hsa_tables.h declares it; Debian's 5.2.3 headers
// lack it). A runtime without it, or one that returns a different address,
// is reported as an error (no silent relocation).
//
// Hidden arguments (AMDGPU code object metadata value kinds) are patched:
//   hidden_queue_ptr                     -> the replay queue
//   hidden_hostcall_buffer, hidden_printf_buffer, hidden_heap_v1,
//   hidden_default_queue, hidden_completion_action,
//   hidden_multigrid_sync_arg            -> 0 (no such service in replay: a
//                                           kernel that needs one cannot be
//                                           replayed faithfully; reported)
//   block counts, group sizes, offsets   -> kept (they describe the launch)
#ifndef KERNCAP_REPRODUCER_HSA_HSA_REPLAY_H_
#define KERNCAP_REPRODUCER_HSA_HSA_REPLAY_H_

#include <hsa/hsa_api_trace.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::replay::hsa {

struct ReplayRegion {
  uint64_t va = 0;
  std::string pre;   // bytes before the dispatch (the input)
  std::string post;  // bytes after it; empty: not validated
  bool module_variable = false;  // restored by symbol name, not by address
  std::string name;
};

struct HsaReplayInput {
  std::string code_object;  // the captured hsaco
  std::string kernel;       // mangled name (symbol is kernel + ".kd")
  std::string kernarg;      // captured kernarg segment, hidden args included
  std::array<uint32_t, 3> grid{1, 1, 1};       // work-items (AQL grid)
  std::array<uint16_t, 3> workgroup{1, 1, 1};
  uint32_t group_segment_size = 0;
  uint32_t private_segment_size = 0;
  std::vector<ReplayRegion> regions;
};

struct HsaReplayOptions {
  int warmup = 1;
  int iterations = 5;
  bool restore_each_iteration = true;  // in-place kernels: same input every time
  int timeout_ms = 10000;
};

struct RegionResult {
  uint64_t va = 0;
  std::string name;
  uint64_t size = 0;
  uint64_t mismatched_bytes = 0;
  int64_t first_mismatch = -1;
};

struct HsaReplayReport {
  bool valid = false;  // every validated region matched byte for byte
  std::vector<RegionResult> regions;
  std::vector<std::string> patched_hidden_args;  // "hidden_queue_ptr@232"
  std::vector<std::string> warnings;
  std::vector<uint64_t> times_ns;  // per timed iteration (device timestamps)
  uint64_t median_ns = 0;
};

absl::StatusOr<HsaReplayReport> ReplayDispatch(HsaApiTable* table, const HsaReplayInput& input,
                                               const HsaReplayOptions& options);

}  // namespace kerncap::replay::hsa

#endif  // KERNCAP_REPRODUCER_HSA_HSA_REPLAY_H_
