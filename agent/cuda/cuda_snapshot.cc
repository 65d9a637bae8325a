#include "agent/cuda/cuda_snapshot.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "agent/cuda/driver_api.h"

namespace kerncap::agent::cuda {

// kc_chunk_diff(a, b, words, words_per_chunk, flags): for every 8-byte word
// i < words with a[i] != b[i], flags[i / words_per_chunk] = 1 (u32 flags).
// Grid-stride loop; PTX 7.0 / sm_52 so every driver the agent supports can
// JIT it for its device (checked with ptxas for sm_90).
const char kChunkDiffPtx[] = R"(
.version 7.0
.target sm_52
.address_size 64
.visible .entry kc_chunk_diff(.param .u64 a, .param .u64 b, .param .u64 words,
                              .param .u64 wpc, .param .u64 flags)
{
  .reg .pred %p<3>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<20>;
  ld.param.u64 %rd1, [a];
  ld.param.u64 %rd2, [b];
  ld.param.u64 %rd3, [words];
  ld.param.u64 %rd4, [wpc];
  ld.param.u64 %rd5, [flags];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd5, %rd5;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mul.wide.u32 %rd6, %r1, %r2;
  cvt.u64.u32 %rd7, %r3;
  add.s64 %rd6, %rd6, %rd7;
  mul.wide.u32 %rd8, %r4, %r2;
  mov.u32 %r5, 1;
LOOP:
  setp.ge.u64 %p1, %rd6, %rd3;
  @%p1 bra DONE;
  shl.b64 %rd9, %rd6, 3;
  add.s64 %rd10, %rd1, %rd9;
  add.s64 %rd11, %rd2, %rd9;
  ld.global.nc.u64 %rd12, [%rd10];
  ld.global.nc.u64 %rd13, [%rd11];
  setp.eq.u64 %p2, %rd12, %rd13;
  @%p2 bra NEXT;
  div.u64 %rd14, %rd6, %rd4;
  shl.b64 %rd15, %rd14, 2;
  add.s64 %rd16, %rd5, %rd15;
  st.global.u32 [%rd16], %r5;
NEXT:
  add.s64 %rd6, %rd6, %rd8;
  bra LOOP;
DONE:
  ret;
}
)";

namespace {

Status Check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return OkStatus();
  return Error(std::string(what) + ": " + CuErrorString(r));
}

// The compare kernel, loaded once per context (never unloaded: a few KiB).
Result<CUfunction> DiffKernel(CUcontext ctx) {
  static std::mutex mu;
  static std::map<CUcontext, CUfunction>* loaded = new std::map<CUcontext, CUfunction>();
  std::lock_guard lock(mu);
  auto it = loaded->find(ctx);
  if (it != loaded->end()) return it->second;
  CUmodule module = nullptr;
  KC_AGENT_RETURN_IF_ERROR(Check(Driver().cuModuleLoadData(&module, kChunkDiffPtx),
                                 "loading the compare kernel (cuModuleLoadData)"));
  CUfunction f = nullptr;
  KC_AGENT_RETURN_IF_ERROR(
      Check(Driver().cuModuleGetFunction(&f, module, "kc_chunk_diff"), "cuModuleGetFunction"));
  (*loaded)[ctx] = f;
  return f;
}

}  // namespace

CudaSnapshotOps::~CudaSnapshotOps() {
  if (flags_ != 0) Driver().cuMemFree(flags_);
  if (stream_ != nullptr) Driver().cuStreamDestroy(stream_);
}

Status CudaSnapshotOps::Stream() {
  if (stream_ != nullptr) return OkStatus();
  return Check(Driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

Status CudaSnapshotOps::FreeMemory(uint64_t* free_bytes, uint64_t* total_bytes) {
  size_t f = 0, t = 0;
  KC_AGENT_RETURN_IF_ERROR(Check(Driver().cuMemGetInfo(&f, &t), "cuMemGetInfo"));
  *free_bytes = f;
  *total_bytes = t;
  return OkStatus();
}

Result<uint64_t> CudaSnapshotOps::Allocate(uint64_t bytes) {
  CUdeviceptr p = 0;
  KC_AGENT_RETURN_IF_ERROR(Check(Driver().cuMemAlloc(&p, bytes), "cuMemAlloc"));
  return static_cast<uint64_t>(p);
}

void CudaSnapshotOps::Free(uint64_t buffer) {
  if (buffer != 0) Driver().cuMemFree(static_cast<CUdeviceptr>(buffer));
}

Status CudaSnapshotOps::Copy(uint64_t dst, uint64_t src, uint64_t bytes) {
  KC_AGENT_RETURN_IF_ERROR(Stream());
  return Check(Driver().cuMemcpyAsync(dst, src, bytes, stream_), "cuMemcpyAsync");
}

Status CudaSnapshotOps::DiffChunks(uint64_t a, uint64_t b, uint64_t bytes, uint64_t chunk,
                                   std::vector<uint8_t>* differ) {
  if (chunk == 0) return Error("chunk size 0");
  const uint64_t n = (bytes + chunk - 1) / chunk;
  differ->assign(n, 1);
  // Only whole 8-byte words at 8-byte addresses are compared; anything else
  // is reported changed (correct, only slower).
  if (a % 8 != 0 || b % 8 != 0 || bytes % 8 != 0 || chunk % 8 != 0 || n == 0) return OkStatus();
  KC_AGENT_RETURN_IF_ERROR(Stream());
  auto f = DiffKernel(ctx_);
  if (!f.ok()) return f.status();
  if (flags_bytes_ < n * 4) {
    if (flags_ != 0) Driver().cuMemFree(flags_);
    flags_ = 0;
    flags_bytes_ = 0;
    KC_AGENT_RETURN_IF_ERROR(Check(Driver().cuMemAlloc(&flags_, n * 4), "cuMemAlloc (flags)"));
    flags_bytes_ = n * 4;
  }
  KC_AGENT_RETURN_IF_ERROR(
      Check(Driver().cuMemsetD32Async(flags_, 0, n, stream_), "cuMemsetD32Async"));
  uint64_t words = bytes / 8, wpc = chunk / 8;
  CUdeviceptr pa = a, pb = b, pf = flags_;
  void* params[] = {&pa, &pb, &words, &wpc, &pf};
  const uint64_t want = (words + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(std::clamp<uint64_t>(want, 1, 8192));
  KC_AGENT_RETURN_IF_ERROR(Check(
      Driver().cuLaunchKernel(f.value(), blocks, 1, 1, 256, 1, 1, 0, stream_, params, nullptr),
      "launching the compare kernel"));
  std::vector<uint32_t> flags(n);
  KC_AGENT_RETURN_IF_ERROR(Check(Driver().cuMemcpyDtoHAsync(flags.data(), flags_, n * 4, stream_),
                                 "cuMemcpyDtoHAsync (flags)"));
  KC_AGENT_RETURN_IF_ERROR(Sync());
  for (uint64_t i = 0; i < n; ++i) (*differ)[i] = flags[i] != 0;
  return OkStatus();
}

Status CudaSnapshotOps::Sync() {
  if (stream_ == nullptr) return OkStatus();
  return Check(Driver().cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

Status CudaSnapshotOps::ReadToHost(uint64_t src, void* dst, size_t bytes) {
  KC_AGENT_RETURN_IF_ERROR(Stream());
  KC_AGENT_RETURN_IF_ERROR(
      Check(Driver().cuMemcpyDtoHAsync(dst, src, bytes, stream_), "cuMemcpyDtoHAsync"));
  return Sync();
}

Status CudaSnapshotOps::BindDrainThread() {
  if (enter_agent_thread_ != nullptr) enter_agent_thread_();
  return Check(Driver().cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
}

}  // namespace kerncap::agent::cuda
