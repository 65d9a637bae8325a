#include "agent/cuda/cuda_snapshot.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>

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

// kc_chunk_fingerprint(src, words, wpc, wpb, sums): the lane sums of the
// chunk fingerprint (common/agent_link/chunk_fingerprint.h) of words
// [0, words) of src, wpc words per chunk: block b adds the terms of words
// [b*wpb, (b+1)*wpb) (wpb divides wpc, so a block stays inside one chunk),
// reduces them across each warp with shuffles and adds them to
// sums[2c], sums[2c+1] of its chunk c with one atomic per warp and lane.
// The host zeroes sums first, adds the term of a short last word and
// finishes each chunk's fingerprint. PTX 7.0 / sm_70 (shfl.sync), checked
// with ptxas for sm_90.
const char kChunkFingerprintPtx[] = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry kc_chunk_fingerprint(.param .u64 src, .param .u64 words, .param .u64 wpc,
                                     .param .u64 wpb, .param .u64 sums)
{
  .reg .pred %p<5>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<32>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [words];
  ld.param.u64 %rd3, [wpc];
  ld.param.u64 %rd4, [wpb];
  ld.param.u64 %rd5, [sums];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd5, %rd5;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  cvt.u64.u32 %rd6, %r1;
  mul.lo.u64 %rd6, %rd6, %rd4;
  setp.ge.u64 %p1, %rd6, %rd2;
  @%p1 bra DONE;
  add.u64 %rd7, %rd6, %rd4;
  min.u64 %rd7, %rd7, %rd2;
  div.u64 %rd8, %rd6, %rd3;
  mul.lo.u64 %rd9, %rd8, %rd3;
  mov.u64 %rd10, 0;
  mov.u64 %rd11, 0;
  cvt.u64.u32 %rd12, %r3;
  add.u64 %rd12, %rd6, %rd12;
  cvt.u64.u32 %rd13, %r2;
  mov.u64 %rd20, 0x9e3779b97f4a7c15;
  mov.u64 %rd21, 0xc2b2ae3d27d4eb4f;
  mov.u64 %rd22, 0xff51afd7ed558ccd;
  mov.u64 %rd23, 0xc4ceb9fe1a85ec53;
LOOP:
  setp.ge.u64 %p2, %rd12, %rd7;
  @%p2 bra REDUCE;
  shl.b64 %rd14, %rd12, 3;
  add.u64 %rd14, %rd1, %rd14;
  ld.global.nc.u64 %rd15, [%rd14];
  sub.u64 %rd16, %rd12, %rd9;
  add.u64 %rd16, %rd16, 1;
  mad.lo.u64 %rd17, %rd16, %rd20, %rd15;
  shr.u64 %rd18, %rd17, 33;
  xor.b64 %rd17, %rd17, %rd18;
  mul.lo.u64 %rd17, %rd17, %rd22;
  shr.u64 %rd18, %rd17, 33;
  xor.b64 %rd17, %rd17, %rd18;
  mul.lo.u64 %rd17, %rd17, %rd23;
  shr.u64 %rd18, %rd17, 33;
  xor.b64 %rd17, %rd17, %rd18;
  add.u64 %rd10, %rd10, %rd17;
  mad.lo.u64 %rd17, %rd16, %rd21, %rd15;
  shr.u64 %rd18, %rd17, 33;
  xor.b64 %rd17, %rd17, %rd18;
  mul.lo.u64 %rd17, %rd17, %rd22;
  shr.u64 %rd18, %rd17, 33;
  xor.b64 %rd17, %rd17, %rd18;
  mul.lo.u64 %rd17, %rd17, %rd23;
  shr.u64 %rd18, %rd17, 33;
  xor.b64 %rd17, %rd17, %rd18;
  add.u64 %rd11, %rd11, %rd17;
  add.u64 %rd12, %rd12, %rd13;
  bra LOOP;
REDUCE:
  mov.u32 %r4, 16;
SHUFFLE:
  setp.eq.u32 %p3, %r4, 0;
  @%p3 bra WRITE;
  mov.b64 {%r5, %r6}, %rd10;
  shfl.sync.down.b32 %r7, %r5, %r4, 31, -1;
  shfl.sync.down.b32 %r8, %r6, %r4, 31, -1;
  mov.b64 %rd24, {%r7, %r8};
  add.u64 %rd10, %rd10, %rd24;
  mov.b64 {%r5, %r6}, %rd11;
  shfl.sync.down.b32 %r7, %r5, %r4, 31, -1;
  shfl.sync.down.b32 %r8, %r6, %r4, 31, -1;
  mov.b64 %rd24, {%r7, %r8};
  add.u64 %rd11, %rd11, %rd24;
  shr.u32 %r4, %r4, 1;
  bra SHUFFLE;
WRITE:
  and.b32 %r9, %r3, 31;
  setp.ne.u32 %p4, %r9, 0;
  @%p4 bra DONE;
  shl.b64 %rd25, %rd8, 4;
  add.u64 %rd25, %rd5, %rd25;
  red.global.add.u64 [%rd25], %rd10;
  red.global.add.u64 [%rd25+8], %rd11;
DONE:
  ret;
}
)";

namespace {

Status Check(CUresult r, const std::string& what) {
  if (r == CUDA_SUCCESS) return OkStatus();
  return Error(what + ": " + CuErrorString(r));
}

// One of the agent's PTX kernels, loaded once per context (never unloaded:
// a few KiB each).
Result<CUfunction> AgentKernel(CUcontext ctx, const char* ptx, const char* name) {
  static std::mutex mu;
  static auto* loaded = new std::map<std::pair<CUcontext, std::string>, CUfunction>();
  std::lock_guard lock(mu);
  auto it = loaded->find({ctx, name});
  if (it != loaded->end()) return it->second;
  CUmodule module = nullptr;
  KC_AGENT_RETURN_IF_ERROR(Check(Driver().cuModuleLoadData(&module, ptx),
                                 std::string("loading ") + name + " (cuModuleLoadData)"));
  CUfunction f = nullptr;
  KC_AGENT_RETURN_IF_ERROR(
      Check(Driver().cuModuleGetFunction(&f, module, name), "cuModuleGetFunction"));
  (*loaded)[{ctx, name}] = f;
  return f;
}

}  // namespace

CudaSnapshotOps::~CudaSnapshotOps() {
  if (sums_ != 0) Driver().cuMemFree(sums_);
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
  auto f = AgentKernel(ctx_, kChunkDiffPtx, "kc_chunk_diff");
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

Status CudaSnapshotOps::Fingerprint(uint64_t src, uint64_t bytes, uint64_t chunk,
                                    std::vector<link::ChunkFingerprint>* fps) {
  if (!self_checked_) {
    // Once per ops object (per capture): the kernel must agree with the
    // reference before anything is decided by its fingerprints.
    self_checked_ = true;
    self_check_ = SelfCheck();
  }
  if (!self_check_.ok()) return self_check_;
  return FingerprintOnDevice(src, bytes, chunk, fps);
}

Status CudaSnapshotOps::SelfCheck() {
  constexpr uint64_t kChunk = 128 << 10;
  constexpr uint64_t kBytes = 2 * kChunk + 13;  // a short last chunk with a short last word
  std::vector<unsigned char> host(kBytes);
  uint64_t x = 0x243f6a8885a308d3ull;
  for (auto& b : host) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<unsigned char>(x);
  }
  CUdeviceptr buf = 0;
  KC_AGENT_RETURN_IF_ERROR(Check(Driver().cuMemAlloc(&buf, kBytes), "cuMemAlloc (fingerprint check)"));
  Status s = Stream();
  if (s.ok()) {
    s = Check(Driver().cuMemcpyAsync(buf, reinterpret_cast<CUdeviceptr>(host.data()), kBytes,
                                     stream_),
              "cuMemcpyAsync (fingerprint check)");
  }
  std::vector<link::ChunkFingerprint> got;
  if (s.ok()) s = FingerprintOnDevice(buf, kBytes, kChunk, &got);
  Driver().cuMemFree(buf);
  if (!s.ok()) return Error("device fingerprints unavailable: " + s.message());
  if (got != link::FingerprintChunks(host.data(), kBytes, kChunk)) {
    return Error("the device's chunk fingerprints differ from the reference: not used");
  }
  return OkStatus();
}

Status CudaSnapshotOps::FingerprintOnDevice(uint64_t src, uint64_t bytes, uint64_t chunk,
                                            std::vector<link::ChunkFingerprint>* fps) {
  if (chunk == 0 || chunk % 8 != 0) return Error("chunk size is not a multiple of 8 bytes");
  if (src % 8 != 0) return Error("memory not 8-byte aligned");
  fps->clear();
  const uint64_t n = (bytes + chunk - 1) / chunk;
  if (n == 0) return OkStatus();
  KC_AGENT_RETURN_IF_ERROR(Stream());
  auto f = AgentKernel(ctx_, kChunkFingerprintPtx, "kc_chunk_fingerprint");
  if (!f.ok()) return f.status();
  if (sums_bytes_ < n * 16) {
    if (sums_ != 0) Driver().cuMemFree(sums_);
    sums_ = 0;
    sums_bytes_ = 0;
    KC_AGENT_RETURN_IF_ERROR(Check(Driver().cuMemAlloc(&sums_, n * 16), "cuMemAlloc (sums)"));
    sums_bytes_ = n * 16;
  }
  KC_AGENT_RETURN_IF_ERROR(
      Check(Driver().cuMemsetD8Async(sums_, 0, n * 16, stream_), "cuMemsetD8Async"));
  uint64_t words = bytes / 8, wpc = chunk / 8;
  // 64 KiB of words per block where that divides the chunk: enough blocks
  // to fill the device, few atomics per chunk.
  uint64_t wpb = wpc % 8192 == 0 ? 8192 : wpc;
  const uint64_t blocks = (words + wpb - 1) / wpb;
  if (blocks > 0x7fffffffull) return Error("too many blocks for one launch");
  if (blocks > 0) {
    CUdeviceptr ps = src, psums = sums_;
    void* params[] = {&ps, &words, &wpc, &wpb, &psums};
    KC_AGENT_RETURN_IF_ERROR(Check(Driver().cuLaunchKernel(f.value(), static_cast<unsigned>(blocks),
                                                           1, 1, 256, 1, 1, 0, stream_, params,
                                                           nullptr),
                                   "launching the fingerprint kernel"));
  }
  std::vector<uint64_t> sums(2 * n);
  KC_AGENT_RETURN_IF_ERROR(Check(
      Driver().cuMemcpyDtoHAsync(sums.data(), sums_, n * 16, stream_), "cuMemcpyDtoHAsync (sums)"));
  unsigned char tail[8] = {};
  const uint64_t tail_bytes = bytes % 8;
  if (tail_bytes != 0) {
    KC_AGENT_RETURN_IF_ERROR(Check(Driver().cuMemcpyDtoHAsync(tail, src + words * 8, tail_bytes,
                                                              stream_),
                                   "cuMemcpyDtoHAsync (tail)"));
  }
  KC_AGENT_RETURN_IF_ERROR(Sync());
  if (tail_bytes != 0) {
    // The zero-padded last word, as the reference reads it.
    const uint64_t c = words / wpc;
    link::FingerprintSums last{sums[2 * c], sums[2 * c + 1]};
    link::AddFingerprintTerm(&last, link::LoadFingerprintWord(tail, tail_bytes), words - c * wpc);
    sums[2 * c] = last.s0;
    sums[2 * c + 1] = last.s1;
  }
  fps->resize(n);
  for (uint64_t c = 0; c < n; ++c) {
    const uint64_t len = std::min(chunk, bytes - c * chunk);
    (*fps)[c] = link::FinishFingerprint({sums[2 * c], sums[2 * c + 1]}, len);
  }
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
