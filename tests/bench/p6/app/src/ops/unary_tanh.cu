// unary_tanh.cu: out = Tanh(in).
#include "kcsim/elementwise.h"

namespace kcsim {

void Tanh(const Buffer& in, const Buffer& out, cudaStream_t s) {
  elementwise::Unary<fn::Tanh>(in, out, s);
}

}  // namespace kcsim
