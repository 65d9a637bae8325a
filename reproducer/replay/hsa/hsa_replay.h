// hsa_replay.h: the HSA side of kerncap-replay. Restores a captured dispatch
// at its original virtual addresses, loads its code object, rebuilds the
// kernarg segment with runtime-owned hidden arguments patched, dispatches it
// through an AQL queue, validates every captured region against the post
// image and benchmarks with dispatch timestamps.
//
// Regions are described by their chunks' content addresses, not held in
// memory: the pre image is restored through the restore pipeline
// (core/restore_pipeline.h: workers read, verify and decompress chunks into
// staging slots; an HSA copier moves them to the device with
// hsa_memory_copy, zero chunks are filled without host reads), and the post
// image is compared chunk by chunk, so host memory stays bounded by the
// staging slots whatever the capture's size.
//
// Restore uses the ROCm >= 6 vmem API (hsa_amd_vmem_address_reserve at the
// exact base, handle_create, map, set_access), found by table size in the
// AmdExtTable (common/hsa/hsa_tables.h declares it; Debian's 5.2.3 headers
// lack it). A runtime without it, or one that returns a different address,
// is reported as an error (no silent relocation).
//
// Hidden arguments are patched by value kind. The kinds come from the
// capture's argument list (kerncap.v1.Argument.value_kind, set by the agent
// from the code object metadata); a capture without them (older agents) falls
// back to the replayed code object's own metadata:
//   hidden_queue_ptr                     -> the replay queue
//   hidden_hostcall_buffer, hidden_printf_buffer, hidden_heap_v1,
//   hidden_default_queue, hidden_completion_action,
//   hidden_multigrid_sync_arg            -> 0 (no such service in replay: a
//                                           kernel that needs one cannot be
//                                           replayed faithfully; reported)
//   block counts, group sizes, offsets   -> kept (they describe the launch)
#ifndef KERNCAP_REPRODUCER_REPLAY_HSA_HSA_REPLAY_H_
#define KERNCAP_REPRODUCER_REPLAY_HSA_HSA_REPLAY_H_

#include <hsa/hsa_api_trace.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kerncap::replay::hsa {

// One chunk of a region by content address (32 raw bytes; empty: all zero).
struct RegionChunk {
  uint32_t size = 0;
  std::string pre_digest;   // before the dispatch (the input)
  std::string post_digest;  // after it (only read when the region is validated)
};

struct ReplayRegion {
  uint64_t va = 0;
  uint64_t size = 0;
  bool module_variable = false;  // restored by symbol name, not by address
  std::string name;
  bool validated = false;        // the post digests are the expected output
  std::vector<RegionChunk> chunks;  // consecutive, covering `size`
};

// Fills `out` (`size` bytes) with the raw bytes of chunk `digest` (never
// empty: zero chunks are not read), verified; called from several threads.
using HsaChunkReader =
    std::function<absl::Status(const std::string& digest, uint32_t size, char* out)>;

// One kernel argument as the capture describes it.
struct ReplayArgument {
  uint32_t offset = 0;
  uint32_t size = 0;
  std::string value_kind;  // "by_value", "global_buffer", "hidden_queue_ptr", ...
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
  HsaChunkReader read;  // the chunks of `regions`
  // From the capture; empty or without any value kind: the code object's
  // metadata decides which hidden arguments are patched.
  std::vector<ReplayArgument> arguments;
};

// Regions from bytes held in memory (tests, small inputs): cut into chunks
// addressed by SHA-256, kept here; reader() serves them. Must outlive the
// replay of an input using its reader.
class InMemoryChunks {
 public:
  explicit InMemoryChunks(uint32_t chunk_size = 1u << 20) : chunk_size_(chunk_size) {}
  // `post` null: not validated.
  ReplayRegion Region(uint64_t va, const std::string& pre, const std::string* post,
                      bool module_variable = false, std::string name = "");
  HsaChunkReader reader() const;
  std::map<std::string, std::string>& chunks() { return chunks_; }  // corruption tests

 private:
  std::string Add(const std::string& bytes);  // digest ("" for all-zero)
  uint32_t chunk_size_;
  std::map<std::string, std::string> chunks_;
};

// The whole pre (or post) bytes of `region` through input.read (tests,
// diagnostics: this holds the region in memory).
absl::StatusOr<std::string> RegionBytes(const HsaReplayInput& input, const ReplayRegion& region,
                                        bool post);

struct HsaReplayOptions {
  int warmup = 1;
  int iterations = 5;
  bool restore_each_iteration = true;  // in-place kernels: same input every time
  int timeout_ms = 10000;
  int restore_workers = 0;  // restore pipeline workers; 0: its default
  // Called for every validated chunk after the first dispatch with the
  // expected (post) and actual bytes (tolerance-aware comparison by the
  // caller); `region` indexes HsaReplayInput::regions.
  std::function<void(size_t region, uint64_t offset, const char* expected, const char* actual,
                     size_t size)>
      on_compare;
};

struct RegionResult {
  uint64_t va = 0;
  uint64_t replay_va = 0;  // differs from va for module variables (new load)
  std::string name;
  uint64_t size = 0;
  uint64_t mismatched_bytes = 0;
  int64_t first_mismatch = -1;
};

struct HsaReplayReport {
  bool valid = false;  // every validated region matched byte for byte
  std::vector<RegionResult> regions;
  std::vector<std::string> patched_hidden_args;  // "hidden_queue_ptr@232"
  std::string hidden_args_from;                  // "capture", "code_object" or "" (none)
  uint64_t first_ns = 0;                         // the validated dispatch (device time)
  uint64_t restored_bytes = 0;                   // per restore (regions + variables)
  uint64_t staging_bytes = 0;                    // host staging of the restore pipeline
  std::vector<std::string> warnings;
  std::vector<uint64_t> times_ns;  // per timed iteration (device timestamps)
  uint64_t median_ns = 0;
};

absl::StatusOr<HsaReplayReport> ReplayDispatch(HsaApiTable* table, const HsaReplayInput& input,
                                               const HsaReplayOptions& options);

}  // namespace kerncap::replay::hsa

#endif  // KERNCAP_REPRODUCER_REPLAY_HSA_HSA_REPLAY_H_
