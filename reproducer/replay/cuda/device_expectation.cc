#include "reproducer/replay/cuda/device_expectation.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace kerncap::replay {

absl::StatusOr<std::unique_ptr<DeviceExpectation>> DeviceExpectation::Create(
    const CudaDriver& cu, const std::vector<RegionInput>& regions, CUstream stream,
    std::vector<LeftOut>* left_out) {
  std::unique_ptr<DeviceExpectation> e(new DeviceExpectation(cu));
  for (const RegionInput& in : regions) {
    Region r;
    r.in = in;
    CUresult cr = cu.cuMemAlloc(&r.expected, in.size);
    if (cr != CUDA_SUCCESS) {
      r.expected = 0;
      left_out->push_back(LeftOut{in.index, absl::StrCat("cuMemAlloc of its ", in.size,
                                                         "-byte device copy failed: ",
                                                         cu.ErrorText(cr))});
      continue;
    }
    e->bytes_ += in.size;
    e->by_index_[in.index] = e->regions_.size();
    e->regions_.push_back(std::move(r));
  }
  // The pre image, device to device (on `stream`: ordered before the
  // session's launch by the wait below).
  for (const Region& r : e->regions_) {
    KC_RETURN_IF_ERROR(cu.Check(cu.cuMemcpyDtoDAsync(r.expected, r.in.actual, r.in.size, stream),
                                absl::StrFormat("cuMemcpyDtoDAsync(expected image of region %u, "
                                                "%u bytes)", r.in.index, r.in.size)));
  }
  KC_RETURN_IF_ERROR(cu.Check(cu.cuStreamSynchronize(stream), "copying the expected images"));

  // One comparison "region" per unit, bytewise and exact: the kernel answers
  // "equal or not", nothing else is used from it.
  std::vector<uint64_t> unit_sizes;
  for (Region& r : e->regions_) {
    r.units = PlanCompareUnits(r.in.chunk_lengths);
    r.first_unit = unit_sizes.size();
    r.unit_of.assign(r.in.chunk_lengths.size(), 0);
    for (size_t u = 0; u < r.units.size(); ++u) {
      const CompareUnit& cu_unit = r.units[u];
      for (uint64_t c = 0; c < cu_unit.chunks; ++c) {
        r.unit_of[cu_unit.first_chunk + c] = static_cast<uint32_t>(u);
      }
      unit_sizes.push_back(cu_unit.length);
      e->params_.push_back(MakeCompareRegion(r.in.actual + cu_unit.offset,
                                             r.expected + cu_unit.offset, cu_unit.length,
                                             DType::kBytes, Tolerance{}));
    }
  }
  KC_ASSIGN_OR_RETURN(e->comparator_, DeviceComparator::Create(cu, unit_sizes));
  return e;
}

DeviceExpectation::~DeviceExpectation() {
  comparator_.reset();
  for (Region& r : regions_) {
    if (r.expected != 0) cu_.cuMemFree(r.expected);
  }
}

uint64_t DeviceExpectation::expected(size_t index) const {
  auto it = by_index_.find(index);
  return it == by_index_.end() ? 0 : regions_[it->second].expected;
}

absl::Status DeviceExpectation::Compare(CUstream stream) {
  KC_ASSIGN_OR_RETURN(std::vector<KcCompareStats> raw, comparator_->Run(params_, stream));
  unit_equal_.assign(raw.size(), false);
  differing_bytes_ = 0;
  for (size_t u = 0; u < raw.size(); ++u) {
    unit_equal_[u] = raw[u].differing == 0 && raw[u].bytes_differing == 0;
    if (!unit_equal_[u]) differing_bytes_ += params_[u].size;
  }
  return absl::OkStatus();
}

bool DeviceExpectation::ChunkEqual(size_t index, uint64_t chunk) const {
  auto it = by_index_.find(index);
  if (it == by_index_.end()) return false;
  const Region& r = regions_[it->second];
  if (chunk >= r.unit_of.size()) return false;
  const size_t u = r.first_unit + r.unit_of[chunk];
  return u < unit_equal_.size() && unit_equal_[u];
}

}  // namespace kerncap::replay
