// binary_max.cu: out = Max(a, b), b broadcast over rows when it has one row.
#include "kcsim/elementwise.h"

namespace kcsim {

void Max(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s) {
  elementwise::Binary<fn::Max>(a, b, out, s);
}

}  // namespace kcsim
