// texture_pitch2d: a filtered 2D texture over pitched memory
// (cudaMallocPitch), created through the driver API (cuTexObjectCreate, its
// entry point from the runtime, so the program links no libcuda): bilinear
// filtering, normalized coordinates, mirror addressing in x and border
// colour in y, sampled past the edges so every descriptor field shapes the
// result. The hardware's filtering is what the capture's golden output
// holds; a replay validates only with the same descriptor over the same
// bytes. Capture target: "tex_bilinear" (2nd dispatch: the 1st samples at
// another scale).
#include <cuda.h>

#include <cmath>
#include <vector>

#include "gpu_test_util.h"

__global__ void tex_bilinear(float* out, int out_pitch_elems, cudaTextureObject_t tex, int w,
                             int h, float scale) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y;
  if (x >= w || y >= h) return;
  // Normalized coordinates reaching 15% past both edges.
  float u = ((x + 0.5f) / w - 0.5f) * scale + 0.5f;
  float v = ((y + 0.5f) / h - 0.5f) * scale + 0.5f;
  out[y * out_pitch_elems + x] = tex2D<float>(tex, u, v);
}

namespace {

using TexObjectCreateFn = CUresult (*)(CUtexObject*, const CUDA_RESOURCE_DESC*,
                                       const CUDA_TEXTURE_DESC*, const CUDA_RESOURCE_VIEW_DESC*);
using TexObjectDestroyFn = CUresult (*)(CUtexObject);

template <typename Fn>
Fn Driver(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q;
  GT_CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q));
  GT_EXPECT(q == cudaDriverEntryPointSuccess && p != nullptr, "driver entry point %s not found",
            name);
  return reinterpret_cast<Fn>(p);
}

}  // namespace

int main() {
  SkipIfNoGpu("texture_pitch2d");
  GT_CHECK(cudaFree(nullptr));  // primary context current on this thread
  auto tex_create = Driver<TexObjectCreateFn>("cuTexObjectCreate");
  auto tex_destroy = Driver<TexObjectDestroyFn>("cuTexObjectDestroy");

  const int w = 1000, h = 600;  // rows of 4000 bytes: the pitch pads them
  std::vector<float> img(static_cast<size_t>(w) * h);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) img[y * w + x] = std::sin(0.01f * x) * std::cos(0.013f * y) + 0.001f * x;
  }
  float* dimg = nullptr;
  size_t pitch = 0;
  GT_CHECK(cudaMallocPitch(reinterpret_cast<void**>(&dimg), &pitch, w * sizeof(float), h));
  GT_CHECK(cudaMemcpy2D(dimg, pitch, img.data(), w * sizeof(float), w * sizeof(float), h,
                        cudaMemcpyHostToDevice));
  float* dout = nullptr;
  GT_CHECK(cudaMalloc(&dout, static_cast<size_t>(w) * h * sizeof(float)));

  CUDA_RESOURCE_DESC res = {};
  res.resType = CU_RESOURCE_TYPE_PITCH2D;
  res.res.pitch2D.devPtr = reinterpret_cast<CUdeviceptr>(dimg);
  res.res.pitch2D.format = CU_AD_FORMAT_FLOAT;
  res.res.pitch2D.numChannels = 1;
  res.res.pitch2D.width = w;
  res.res.pitch2D.height = h;
  res.res.pitch2D.pitchInBytes = pitch;
  CUDA_TEXTURE_DESC td = {};
  td.addressMode[0] = CU_TR_ADDRESS_MODE_MIRROR;
  td.addressMode[1] = CU_TR_ADDRESS_MODE_BORDER;
  td.filterMode = CU_TR_FILTER_MODE_LINEAR;
  td.flags = CU_TRSF_NORMALIZED_COORDINATES;
  td.borderColor[0] = 0.75f;
  CUtexObject tex = 0;
  CUresult cr = tex_create(&tex, &res, &td, nullptr);
  GT_EXPECT(cr == CUDA_SUCCESS, "cuTexObjectCreate failed: CUresult %d", static_cast<int>(cr));

  std::vector<float> out(static_cast<size_t>(w) * h);
  for (float scale : {1.0f, 1.3f}) {
    tex_bilinear<<<dim3((w + 127) / 128, h), 128>>>(dout, w, tex, w, h, scale);
    GT_CHECK(cudaGetLastError());
  }
  GT_CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  // Filtering is the hardware's (9-bit weights): check what must hold. Past
  // the top and bottom edges the border colour blends in; inside, values
  // stay within the image's range.
  float lo = img[0], hi = img[0];
  for (float v : img) {
    lo = std::fmin(lo, v);
    hi = std::fmax(hi, v);
  }
  lo = std::fmin(lo, 0.75f);
  hi = std::fmax(hi, 0.75f);
  for (size_t i = 0; i < out.size(); ++i) {
    GT_EXPECT(out[i] >= lo - 1e-3f && out[i] <= hi + 1e-3f, "out[%zu]=%f outside [%f, %f]", i,
              out[i], lo, hi);
  }
  GT_EXPECT(out[0] != 0.0f && out[w * (h / 2) + w / 2] != 0.0f, "texture read nothing");
  GT_EXPECT(std::fabs(out[0] - 0.75f) < 0.2f, "corner %f: the border colour was not sampled",
            out[0]);
  GT_EXPECT(tex_destroy(tex) == CUDA_SUCCESS, "cuTexObjectDestroy failed");
  std::printf("texture_pitch2d: %dx%d pitch=%zu img=%p out=%p tex=0x%llx checksum(out)=%016llx OK\n",
              w, h, pitch, (void*)dimg, (void*)dout, (unsigned long long)tex,
              (unsigned long long)Checksum(out.data(), out.size() * sizeof(float)));
  GT_CHECK(cudaFree(dimg));
  GT_CHECK(cudaFree(dout));
  return 0;
}
