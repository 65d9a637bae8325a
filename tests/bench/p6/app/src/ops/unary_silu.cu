// unary_silu.cu: out = Silu(in).
#include "kcsim/elementwise.h"

namespace kcsim {

void Silu(const Buffer& in, const Buffer& out, cudaStream_t s) {
  elementwise::Unary<fn::Silu>(in, out, s);
}

}  // namespace kcsim
