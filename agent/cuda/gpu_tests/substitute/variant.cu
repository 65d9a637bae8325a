// The variant substituted into substitute_app: the same kc_scale_add (same
// name, same parameters, same results; a*x+b computed exactly as the
// original does, without contraction into an FMA) but deliberately slower
// (a ~20 us spin per block), so the A/B device times tell which one ran.
extern "C" __global__ void kc_scale_add(float* out, const float* in, float a, float b, int n) {
  const long long t0 = clock64();
  while (clock64() - t0 < 40000) {
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fadd_rn(__fmul_rn(a, in[i]), b);
}
