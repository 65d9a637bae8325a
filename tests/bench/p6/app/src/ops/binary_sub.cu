// binary_sub.cu: out = Sub(a, b), b broadcast over rows when it has one row.
#include "kcsim/elementwise.h"

namespace kcsim {

void Sub(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s) {
  elementwise::Binary<fn::Sub>(a, b, out, s);
}

}  // namespace kcsim
