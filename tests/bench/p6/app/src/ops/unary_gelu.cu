// unary_gelu.cu: out = Gelu(in).
#include "kcsim/elementwise.h"

namespace kcsim {

void Gelu(const Buffer& in, const Buffer& out, cudaStream_t s) {
  elementwise::Unary<fn::Gelu>(in, out, s);
}

}  // namespace kcsim
