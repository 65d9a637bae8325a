// texture_linear: kernels that read a texture object over linear device
// memory (cudaCreateTextureObject, cudaResourceTypeLinear; tex1Dfetch). The
// output depends on every texture read, so a replay whose handle reads
// nothing (or the wrong memory) cannot validate.
// Capture targets: "tex_linear_gather" (the handle is a parameter) and
// "tex_struct_gather" (the handle is a member of a by-value struct).
#include <vector>

#include "gpu_test_util.h"

__global__ void tex_linear_gather(cudaTextureObject_t tex, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * tex1Dfetch<float>(tex, (i * 7) % n) + tex1Dfetch<float>(tex, i);
}

struct GatherArgs {
  int n;
  cudaTextureObject_t tex;
  float* out;
};

__global__ void tex_struct_gather(GatherArgs a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < a.n) a.out[i] = tex1Dfetch<float>(a.tex, a.n - 1 - i) - 1.0f;
}

int main() {
  SkipIfNoGpu("texture_linear");
  const int n = 1 << 20;
  std::vector<float> in(n), out(n);
  for (int i = 0; i < n; ++i) in[i] = 0.25f * static_cast<float>(i % 4093) - 17.0f;
  float *din, *dout;
  GT_CHECK(cudaMalloc(&din, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&dout, n * sizeof(float)));
  GT_CHECK(cudaMemcpy(din, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemset(dout, 0, n * sizeof(float)));

  cudaResourceDesc res = {};
  res.resType = cudaResourceTypeLinear;
  res.res.linear.devPtr = din;
  res.res.linear.desc = cudaCreateChannelDesc<float>();
  res.res.linear.sizeInBytes = n * sizeof(float);
  cudaTextureDesc td = {};
  td.readMode = cudaReadModeElementType;
  cudaTextureObject_t tex = 0;
  GT_CHECK(cudaCreateTextureObject(&tex, &res, &td, nullptr));

  tex_linear_gather<<<(n + 255) / 256, 256>>>(tex, dout, n);
  GT_CHECK(cudaGetLastError());
  GT_CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const float want = 2.0f * in[(static_cast<long long>(i) * 7) % n] + in[i];
    GT_EXPECT(out[i] == want, "tex_linear_gather: out[%d]=%f expected %f", i, out[i], want);
  }
  const unsigned long long gather_sum = Checksum(out.data(), n * sizeof(float));

  tex_struct_gather<<<(n + 255) / 256, 256>>>(GatherArgs{n, tex, dout});
  GT_CHECK(cudaGetLastError());
  GT_CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    const float want = in[n - 1 - i] - 1.0f;
    GT_EXPECT(out[i] == want, "tex_struct_gather: out[%d]=%f expected %f", i, out[i], want);
  }
  GT_CHECK(cudaDestroyTextureObject(tex));
  std::printf("texture_linear: n=%d in=%p out=%p tex=0x%llx checksum(gather)=%016llx "
              "checksum(struct)=%016llx OK\n",
              n, (void*)din, (void*)dout, (unsigned long long)tex, gather_sum,
              (unsigned long long)Checksum(out.data(), n * sizeof(float)));
  GT_CHECK(cudaFree(din));
  GT_CHECK(cudaFree(dout));
  return 0;
}
