// device_expectation.h: validate's device path. A 24 GiB capture compared on
// the host costs a read + decompress of every golden chunk, a device-to-host
// copy of every replayed byte and a memcmp (17.6 s against a 1.05 s restore);
// here the comparison runs on the GPU at HBM speed and only what differs
// crosses PCIe.
//
// Before the launch, for each device region chosen (ReplaySession decides
// which fit in free device memory), a device buffer holding the region's
// expected post-dispatch bytes:
//   1. a device-to-device copy of the restored pre image (Create): for every
//      chunk the kernel did not change (post digest == pre digest, known from
//      the manifests' chunk lists without reading a byte) the pre image is
//      the post image;
//   2. the chunks whose post digest differs, uploaded over it by the session
//      through the restore pipeline (read, verified, decompressed,
//      relocation-patched exactly as the host path patches its expected
//      bytes) at expected(region) + offset.
// After the launch, Compare() runs the comparison kernel
// (device_comparator.h) once over every compare unit (core/compare_plan.h:
// runs of whole chunks), bitwise, and keeps one bit per unit: equal or not.
// The session then compares again on the host, with the host path's
// comparator, only the chunks of units that are not equal; equal chunks are
// counted as equal (RegionComparator::CountEqual). The GPU is a prefilter
// that can only say "bitwise equal", so the verdict, the statistics and the
// samples are those of the host path, with or without tolerances.
//
// Costs one extra copy of the chosen regions in device memory.
#ifndef KERNCAP_REPRODUCER_REPLAY_CUDA_DEVICE_EXPECTATION_H_
#define KERNCAP_REPRODUCER_REPLAY_CUDA_DEVICE_EXPECTATION_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "reproducer/replay/core/compare_plan.h"
#include "reproducer/replay/cuda/cuda_driver.h"
#include "reproducer/replay/cuda/device_comparator.h"

namespace kerncap::replay {

class DeviceExpectation {
 public:
  struct RegionInput {
    size_t index = 0;       // pre-image region index
    uint64_t actual = 0;    // device address of the restored (then replayed) region
    uint64_t size = 0;
    std::vector<uint32_t> chunk_lengths;  // the region's chunks, in order
  };
  // A region left on the host path, with the reason.
  struct LeftOut {
    size_t index = 0;
    std::string reason;
  };

  // Loads the comparison kernel, allocates one buffer per region and copies
  // the region's current (restored, not yet launched) bytes into it on
  // `stream`, waiting for the copies. A region whose buffer cannot be
  // allocated goes to *left_out (the others keep the device path). Errors:
  // no comparison kernel in this build (FailedPrecondition), a failing copy
  // or kernel load. The context must be current.
  static absl::StatusOr<std::unique_ptr<DeviceExpectation>> Create(
      const CudaDriver& cu, const std::vector<RegionInput>& regions, CUstream stream,
      std::vector<LeftOut>* left_out);
  ~DeviceExpectation();  // the context must be current
  DeviceExpectation(const DeviceExpectation&) = delete;
  DeviceExpectation& operator=(const DeviceExpectation&) = delete;

  bool covers(size_t index) const { return by_index_.contains(index); }
  // Device address of region `index`'s expected bytes (0: not covered).
  uint64_t expected(size_t index) const;
  uint64_t bytes() const { return bytes_; }
  size_t regions() const { return regions_.size(); }

  // After the launch: compares every unit bitwise with its expectation on
  // `stream` and waits. A failing CUDA call is returned as is.
  absl::Status Compare(CUstream stream);
  // After Compare(): chunk `chunk` of region `index` is bitwise equal to its
  // expectation (false for a region not covered).
  bool ChunkEqual(size_t index, uint64_t chunk) const;
  // After Compare(): bytes of the units found not equal.
  uint64_t differing_bytes() const { return differing_bytes_; }
  double kernel_load_ms() const { return comparator_ != nullptr ? comparator_->load_ms() : 0; }

 private:
  struct Region {
    RegionInput in;
    CUdeviceptr expected = 0;
    std::vector<CompareUnit> units;
    size_t first_unit = 0;            // in the flat unit order
    std::vector<uint32_t> unit_of;    // per chunk: its unit (region-local)
  };
  explicit DeviceExpectation(const CudaDriver& cu) : cu_(cu) {}

  const CudaDriver& cu_;
  std::vector<Region> regions_;
  absl::flat_hash_map<size_t, size_t> by_index_;  // pre index -> regions_
  std::unique_ptr<DeviceComparator> comparator_;
  std::vector<KcCompareRegion> params_;  // per unit, flat
  std::vector<bool> unit_equal_;         // per unit, flat (after Compare)
  uint64_t bytes_ = 0;
  uint64_t differing_bytes_ = 0;
};

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CUDA_DEVICE_EXPECTATION_H_
