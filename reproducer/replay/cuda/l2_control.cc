#include "reproducer/replay/cuda/l2_control.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kerncap::replay {

PersistingL2State ResetPersistingL2(const CudaDriver& cu, CUstream stream) {
  PersistingL2State st;
  size_t before = 0;
  CUresult r = cu.cuCtxGetLimit(&before, CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
  if (r != CUDA_SUCCESS) {
    st.supported = false;
    st.note = absl::StrCat("cuCtxGetLimit(PERSISTING_L2_CACHE_SIZE): ", cu.ErrorText(r));
  } else {
    st.limit_before = before;
    r = cu.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0);
    if (r != CUDA_SUCCESS) {
      st.note = absl::StrCat("cuCtxSetLimit(PERSISTING_L2_CACHE_SIZE, 0): ", cu.ErrorText(r));
    }
    size_t during = before;
    if (cu.cuCtxGetLimit(&during, CU_LIMIT_PERSISTING_L2_CACHE_SIZE) == CUDA_SUCCESS) {
      st.limit_during = during;
    }
    r = cu.cuCtxResetPersistingL2Cache();
    st.lines_reset = r == CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) {
      absl::StrAppend(&st.note, st.note.empty() ? "" : "; ", "cuCtxResetPersistingL2Cache: ",
                      cu.ErrorText(r));
    }
  }
  CUstreamAttrValue window = {};
  window.accessPolicyWindow.base_ptr = nullptr;
  window.accessPolicyWindow.num_bytes = 0;
  window.accessPolicyWindow.hitRatio = 0;
  window.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_NORMAL;
  window.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_NORMAL;
  r = cu.cuStreamSetAttribute(stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &window);
  CUstreamAttrValue now = {};
  st.window_cleared =
      r == CUDA_SUCCESS &&
      cu.cuStreamGetAttribute(stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &now) ==
          CUDA_SUCCESS &&
      now.accessPolicyWindow.num_bytes == 0;
  if (r != CUDA_SUCCESS) {
    absl::StrAppend(&st.note, st.note.empty() ? "" : "; ",
                    "clearing the stream's access-policy window: ", cu.ErrorText(r));
  }
  return st;
}

void RestorePersistingL2Limit(const CudaDriver& cu, const PersistingL2State& state) {
  if (state.supported && state.limit_before != state.limit_during) {
    cu.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, state.limit_before);
  }
}

absl::StatusOr<L2Flusher> L2Flusher::Create(const CudaDriver& cu, CUdevice device) {
  int l2 = 0;
  cu.cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device);
  // Twice the L2, so that nothing of the previous launch survives.
  const size_t bytes = std::max<size_t>(static_cast<size_t>(std::max(l2, 0)) * 2, 64u << 20);
  CUdeviceptr buffer = 0;
  KC_RETURN_IF_ERROR(cu.Check(cu.cuMemAlloc(&buffer, bytes), "cuMemAlloc(L2 flush buffer)"));
  return L2Flusher(cu, buffer, bytes / 4);
}

L2Flusher::L2Flusher(L2Flusher&& other) noexcept
    : cu_(other.cu_), buffer_(other.buffer_), words_(other.words_), flushes_(other.flushes_) {
  other.buffer_ = 0;
}

L2Flusher::~L2Flusher() {
  if (buffer_ != 0) cu_->cuMemFree(buffer_);
}

absl::Status L2Flusher::Flush(CUstream stream) {
  return cu_->Check(cu_->cuMemsetD32Async(buffer_, ++flushes_, words_, stream), "L2 flush");
}

}  // namespace kerncap::replay
