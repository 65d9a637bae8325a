// binary_mul.cu: out = Mul(a, b), b broadcast over rows when it has one row.
#include "kcsim/elementwise.h"

namespace kcsim {

void Mul(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s) {
  elementwise::Binary<fn::Mul>(a, b, out, s);
}

}  // namespace kcsim
