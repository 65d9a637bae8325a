// binary_min.cu: out = Min(a, b), b broadcast over rows when it has one row.
#include "kcsim/elementwise.h"

namespace kcsim {

void Min(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s) {
  elementwise::Binary<fn::Min>(a, b, out, s);
}

}  // namespace kcsim
