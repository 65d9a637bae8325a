// texture_refused: texture and surface uses kerncap does not capture, each
// of which it must refuse with a clear reason (in the arm's status) instead
// of capturing a meaningless handle. The program itself runs correctly under
// the agent. Capture targets, one per case:
//   "tex_array_read"        a texture object over a CUDA array (array
//                           contents are not captured)
//   "surf_array_write"      a surface object (always over a CUDA array)
//   "tex_handles_in_memory" texture handles read from device memory, not
//                           passed as parameters (replay could not find them)
//   "tex_oversized"         a linear texture whose descriptor claims more
//                           bytes than its allocation holds (a wrong
//                           descriptor: replay could not recreate it faithfully)
#include <vector>

#include "gpu_test_util.h"

__global__ void tex_array_read(cudaTextureObject_t tex, float* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(tex, x + 0.5f, y + 0.5f) + 1.0f;
}

__global__ void surf_array_write(cudaSurfaceObject_t surf, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < w && y < h) surf2Dwrite<float>(static_cast<float>(x * 3 + y), surf, x * 4, y);
}

__global__ void tex_handles_in_memory(const cudaTextureObject_t* handles, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(handles[i & 1], i);
}

__global__ void tex_oversized(cudaTextureObject_t tex, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(tex, i) * 4.0f;
}

int main() {
  SkipIfNoGpu("texture_refused");
  const int w = 256, h = 64, n = w * h;
  std::vector<float> host(n), out(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i % 977) * 0.5f;
  float *dlin, *dout;
  GT_CHECK(cudaMalloc(&dlin, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&dout, n * sizeof(float)));
  GT_CHECK(cudaMemcpy(dlin, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const cudaChannelFormatDesc fdesc = cudaCreateChannelDesc<float>();

  // A texture over a CUDA array.
  cudaArray_t array;
  GT_CHECK(cudaMallocArray(&array, &fdesc, w, h, cudaArraySurfaceLoadStore));
  GT_CHECK(cudaMemcpy2DToArray(array, 0, 0, host.data(), w * sizeof(float), w * sizeof(float), h,
                               cudaMemcpyHostToDevice));
  cudaResourceDesc ares = {};
  ares.resType = cudaResourceTypeArray;
  ares.res.array.array = array;
  cudaTextureDesc td = {};
  td.readMode = cudaReadModeElementType;
  cudaTextureObject_t atex = 0;
  GT_CHECK(cudaCreateTextureObject(&atex, &ares, &td, nullptr));
  tex_array_read<<<dim3(w / 128, h), 128>>>(atex, dout, w, h);
  GT_CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) GT_EXPECT(out[i] == host[i] + 1.0f, "tex_array_read out[%d]=%f", i, out[i]);

  // A surface over the same array.
  cudaSurfaceObject_t surf = 0;
  GT_CHECK(cudaCreateSurfaceObject(&surf, &ares));
  surf_array_write<<<dim3(w / 128, h), 128>>>(surf, w, h);
  GT_CHECK(cudaMemcpy2DFromArray(out.data(), w * sizeof(float), array, 0, 0, w * sizeof(float), h,
                                 cudaMemcpyDeviceToHost));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      GT_EXPECT(out[y * w + x] == static_cast<float>(x * 3 + y), "surf_array_write (%d,%d)=%f", x,
                y, out[y * w + x]);
    }
  }

  // Linear textures whose handles live in device memory.
  cudaResourceDesc lres = {};
  lres.resType = cudaResourceTypeLinear;
  lres.res.linear.devPtr = dlin;
  lres.res.linear.desc = fdesc;
  lres.res.linear.sizeInBytes = n * sizeof(float);
  cudaTextureObject_t ltex[2] = {0, 0};
  GT_CHECK(cudaCreateTextureObject(&ltex[0], &lres, &td, nullptr));
  GT_CHECK(cudaCreateTextureObject(&ltex[1], &lres, &td, nullptr));
  cudaTextureObject_t* dhandles;
  GT_CHECK(cudaMalloc(&dhandles, sizeof(ltex)));
  GT_CHECK(cudaMemcpy(dhandles, ltex, sizeof(ltex), cudaMemcpyHostToDevice));
  tex_handles_in_memory<<<n / 256, 256>>>(dhandles, dout, n);
  GT_CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) GT_EXPECT(out[i] == host[i], "tex_handles_in_memory out[%d]=%f", i, out[i]);

  // A descriptor larger than its allocation (the kernel reads only the part
  // that exists).
  float* dsmall;
  GT_CHECK(cudaMalloc(&dsmall, n * sizeof(float)));
  GT_CHECK(cudaMemcpy(dsmall, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  cudaResourceDesc ores = lres;
  ores.res.linear.devPtr = dsmall;
  ores.res.linear.sizeInBytes = 4 * n * sizeof(float);
  cudaTextureObject_t otex = 0;
  GT_CHECK(cudaCreateTextureObject(&otex, &ores, &td, nullptr));
  tex_oversized<<<n / 256, 256>>>(otex, dout, n);
  GT_CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) GT_EXPECT(out[i] == 4.0f * host[i], "tex_oversized out[%d]=%f", i, out[i]);

  GT_CHECK(cudaDestroyTextureObject(otex));
  GT_CHECK(cudaDestroyTextureObject(ltex[0]));
  GT_CHECK(cudaDestroyTextureObject(ltex[1]));
  GT_CHECK(cudaDestroySurfaceObject(surf));
  GT_CHECK(cudaDestroyTextureObject(atex));
  GT_CHECK(cudaFreeArray(array));
  std::printf("texture_refused: array, surface, handles in memory, oversized descriptor: OK\n");
  return 0;
}
