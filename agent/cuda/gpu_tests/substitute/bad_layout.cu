// A variant with another parameter layout (an extra int): the agent must
// refuse it (its arguments would be read wrongly) and substitute nothing.
extern "C" __global__ void kc_scale_add(float* out, const float* in, float a, float b, int n,
                                        int extra) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * in[i] + b + static_cast<float>(extra);
}
