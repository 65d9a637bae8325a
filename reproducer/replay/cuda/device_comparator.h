// device_comparator.h: runs the comparison kernel (compare_kernel.cu, layout
// in compare_abi.h) over a fixed set of device regions: one launch for all
// of them, then one small device-to-host copy of the per-region counters. A
// region's bytes cross PCIe only if the caller asks for a mismatching element.
//
// The kernel's PTX is embedded in the binary at build time and JIT-compiled
// by the driver here, once per comparator, for whatever GPU replays.
#ifndef KERNCAP_REPRODUCER_REPLAY_CUDA_DEVICE_COMPARATOR_H_
#define KERNCAP_REPRODUCER_REPLAY_CUDA_DEVICE_COMPARATOR_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "reproducer/replay/cuda/cuda_driver.h"
#include "reproducer/replay/core/compare_abi.h"
#include "reproducer/replay/core/compare_plan.h"

namespace kerncap::replay {

class DeviceComparator {
 public:
  // Loads the kernel and uploads the tile table for regions of these sizes
  // (fixed from now on). The context must be current. FailedPrecondition
  // when this binary was built without nvcc (no PTX embedded).
  static absl::StatusOr<std::unique_ptr<DeviceComparator>> Create(
      const CudaDriver& cu, const std::vector<uint64_t>& region_sizes,
      uint64_t tile_bytes = kDefaultTileBytes);
  ~DeviceComparator();
  DeviceComparator(const DeviceComparator&) = delete;
  DeviceComparator& operator=(const DeviceComparator&) = delete;

  // Compares each region (params[i] for region i: addresses, dtype,
  // tolerance; sizes as given to Create) on `stream` and waits for the
  // result. A failing CUDA call is returned as is (the caller decides
  // whether the context survived).
  absl::StatusOr<std::vector<KcCompareStats>> Run(const std::vector<KcCompareRegion>& params,
                                                  CUstream stream);

  // Milliseconds spent JIT-compiling and loading the kernel.
  double load_ms() const { return load_ms_; }

 private:
  explicit DeviceComparator(const CudaDriver& cu) : cu_(cu) {}

  const CudaDriver& cu_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  size_t regions_ = 0;
  size_t tiles_ = 0;
  CUdeviceptr d_tiles_ = 0;
  CUdeviceptr d_params_ = 0;
  CUdeviceptr d_stats_ = 0;
  KcCompareStats* h_stats_ = nullptr;  // pinned
  double load_ms_ = 0;
};

// The embedded PTX (empty when built without nvcc); generated at build time.
extern const unsigned char kCompareKernelPtx[];
extern const unsigned long long kCompareKernelPtxSize;

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CUDA_DEVICE_COMPARATOR_H_
