// pointer_structs: arguments that hide device pointers. (1) batched T**: an
// array of per-batch pointers in device memory; (2) a struct of pointers
// passed by value. Capture targets: "batched_axpy" and "struct_args".
#include <vector>

#include "gpu_test_util.h"

constexpr int kBatch = 8;
constexpr int kN = 4096;

__global__ void batched_axpy(float** xs, float** ys, float a, int n) {
  int b = blockIdx.y;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ys[b][i] += a * xs[b][i];
}

struct Buffers {
  const int* in;
  int* out;
  int* counter;
  int n;
  int bias;
};

__global__ void struct_args(Buffers buf) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < buf.n) {
    buf.out[i] = buf.in[i] * 2 + buf.bias;
    atomicAdd(buf.counter, 1);
  }
}

int main() {
  SkipIfNoGpu("pointer_structs");
  std::vector<float*> hx(kBatch), hy(kBatch);
  std::vector<float> init(kN);
  for (int i = 0; i < kN; ++i) init[i] = static_cast<float>(i % 13);
  for (int b = 0; b < kBatch; ++b) {
    GT_CHECK(cudaMalloc(&hx[b], kN * sizeof(float)));
    GT_CHECK(cudaMalloc(&hy[b], kN * sizeof(float)));
    GT_CHECK(cudaMemcpy(hx[b], init.data(), kN * sizeof(float), cudaMemcpyHostToDevice));
    GT_CHECK(cudaMemset(hy[b], 0, kN * sizeof(float)));
  }
  float **dxs, **dys;
  GT_CHECK(cudaMalloc(&dxs, kBatch * sizeof(float*)));
  GT_CHECK(cudaMalloc(&dys, kBatch * sizeof(float*)));
  GT_CHECK(cudaMemcpy(dxs, hx.data(), kBatch * sizeof(float*), cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemcpy(dys, hy.data(), kBatch * sizeof(float*), cudaMemcpyHostToDevice));
  batched_axpy<<<dim3((kN + 255) / 256, kBatch), 256>>>(dxs, dys, 1.5f, kN);
  GT_CHECK(cudaGetLastError());
  std::vector<float> y(kN);
  for (int b = 0; b < kBatch; ++b) {
    GT_CHECK(cudaMemcpy(y.data(), hy[b], kN * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < kN; ++i) GT_EXPECT(y[i] == 1.5f * init[i], "y[%d][%d]", b, i);
  }

  Buffers buf;
  std::vector<int> in(kN);
  for (int i = 0; i < kN; ++i) in[i] = i;
  int *din, *dout, *dcounter;
  GT_CHECK(cudaMalloc(&din, kN * sizeof(int)));
  GT_CHECK(cudaMalloc(&dout, kN * sizeof(int)));
  GT_CHECK(cudaMalloc(&dcounter, sizeof(int)));
  GT_CHECK(cudaMemcpy(din, in.data(), kN * sizeof(int), cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemset(dcounter, 0, sizeof(int)));
  buf.in = din;
  buf.out = dout;
  buf.counter = dcounter;
  buf.n = kN;
  buf.bias = 7;
  struct_args<<<(kN + 255) / 256, 256>>>(buf);
  GT_CHECK(cudaGetLastError());
  std::vector<int> out(kN);
  int counter = 0;
  GT_CHECK(cudaMemcpy(out.data(), dout, kN * sizeof(int), cudaMemcpyDeviceToHost));
  GT_CHECK(cudaMemcpy(&counter, dcounter, sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < kN; ++i) GT_EXPECT(out[i] == 2 * i + 7, "out[%d]", i);
  GT_EXPECT(counter == kN, "counter %d", counter);
  std::printf("pointer_structs: batched_axpy over %d batches via T** (%p), struct_args by value "
              "(in=%p out=%p counter=%p) OK\n",
              kBatch, (void*)dxs, (void*)din, (void*)dout, (void*)dcounter);
  return 0;
}
