#include "reproducer/replay/cuda/device_comparator.h"

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kerncap::replay {
namespace {

constexpr unsigned kThreads = 256;  // the kernel's __launch_bounds__

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceComparator>> DeviceComparator::Create(
    const CudaDriver& cu, const std::vector<uint64_t>& region_sizes, uint64_t tile_bytes) {
  if (kCompareKernelPtxSize == 0) {
    return absl::FailedPreconditionError(
        "this kerncap-replay was built without nvcc: the device comparison kernel is missing "
        "(`serve` is unavailable and `validate` compares on the host; rebuild with the CUDA "
        "toolkit's nvcc on PATH)");
  }
  std::unique_ptr<DeviceComparator> d(new DeviceComparator(cu));
  const auto t0 = std::chrono::steady_clock::now();
  char log[4096] = {};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* vals[] = {log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(log)))};
  CUresult r = cu.cuModuleLoadDataEx(&d->module_, kCompareKernelPtx, 2, opts, vals);
  if (r != CUDA_SUCCESS) {
    return absl::InternalError(absl::StrCat("loading the comparison kernel (PTX JIT): ",
                                            cu.ErrorText(r), log[0] ? ": " : "", log));
  }
  KC_RETURN_IF_ERROR(cu.Check(
      cu.cuModuleGetFunction(&d->function_, d->module_, KC_COMPARE_KERNEL_NAME),
      "cuModuleGetFunction(" KC_COMPARE_KERNEL_NAME ")"));
  d->load_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  const std::vector<KcCompareTile> tiles = PlanTiles(region_sizes, tile_bytes);
  d->regions_ = region_sizes.size();
  d->tiles_ = tiles.size();
  if (d->regions_ == 0) return d;
  KC_RETURN_IF_ERROR(cu.Check(cu.cuMemAlloc(&d->d_tiles_, sizeof(KcCompareTile) * d->tiles_),
                              "cuMemAlloc(comparison tiles)"));
  KC_RETURN_IF_ERROR(cu.Check(
      cu.cuMemcpyHtoD(d->d_tiles_, tiles.data(), sizeof(KcCompareTile) * d->tiles_),
      "uploading the comparison tiles"));
  KC_RETURN_IF_ERROR(cu.Check(cu.cuMemAlloc(&d->d_params_, sizeof(KcCompareRegion) * d->regions_),
                              "cuMemAlloc(comparison parameters)"));
  KC_RETURN_IF_ERROR(cu.Check(cu.cuMemAlloc(&d->d_stats_, sizeof(KcCompareStats) * d->regions_),
                              "cuMemAlloc(comparison counters)"));
  void* host = nullptr;
  KC_RETURN_IF_ERROR(cu.Check(cu.cuMemAllocHost(&host, sizeof(KcCompareStats) * d->regions_),
                              "cuMemAllocHost(comparison counters)"));
  d->h_stats_ = static_cast<KcCompareStats*>(host);
  return d;
}

DeviceComparator::~DeviceComparator() {
  if (h_stats_ != nullptr) cu_.cuMemFreeHost(h_stats_);
  if (d_stats_ != 0) cu_.cuMemFree(d_stats_);
  if (d_params_ != 0) cu_.cuMemFree(d_params_);
  if (d_tiles_ != 0) cu_.cuMemFree(d_tiles_);
  if (module_ != nullptr) cu_.cuModuleUnload(module_);
}

absl::StatusOr<std::vector<KcCompareStats>> DeviceComparator::Run(
    const std::vector<KcCompareRegion>& params, CUstream stream) {
  if (params.size() != regions_) {
    return absl::InvalidArgumentError(absl::StrCat("comparison: ", params.size(),
                                                   " parameter sets for ", regions_, " regions"));
  }
  if (regions_ == 0) return std::vector<KcCompareStats>{};
  const size_t stats_bytes = sizeof(KcCompareStats) * regions_;
  // Pageable source: the driver stages it, ordered on the stream.
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemcpyHtoDAsync(d_params_, params.data(),
                                                     sizeof(KcCompareRegion) * regions_, stream),
                               "uploading the comparison parameters"));
  KC_RETURN_IF_ERROR(
      cu_.Check(cu_.cuMemsetD8Async(d_stats_, 0, stats_bytes, stream), "clearing the counters"));
  void* args[] = {&d_tiles_, &d_params_, &d_stats_};
  if (tiles_ > 0) {
    KC_RETURN_IF_ERROR(cu_.Check(cu_.cuLaunchKernel(function_, static_cast<unsigned>(tiles_), 1, 1,
                                                    kThreads, 1, 1, 0, stream, args, nullptr),
                                 "launching the comparison kernel"));
  }
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuMemcpyDtoHAsync(h_stats_, d_stats_, stats_bytes, stream),
                               "reading the comparison counters"));
  KC_RETURN_IF_ERROR(cu_.Check(cu_.cuStreamSynchronize(stream), "comparison"));
  return std::vector<KcCompareStats>(h_stats_, h_stats_ + regions_);
}

}  // namespace kerncap::replay
