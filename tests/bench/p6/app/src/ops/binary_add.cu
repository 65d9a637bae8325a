// binary_add.cu: out = Add(a, b), b broadcast over rows when it has one row.
#include "kcsim/elementwise.h"

namespace kcsim {

void Add(const Buffer& a, const Buffer& b, const Buffer& out, cudaStream_t s) {
  elementwise::Binary<fn::Add>(a, b, out, s);
}

}  // namespace kcsim
