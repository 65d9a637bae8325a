// unary_relu.cu: out = Relu(in).
#include "kcsim/elementwise.h"

namespace kcsim {

void Relu(const Buffer& in, const Buffer& out, cudaStream_t s) {
  elementwise::Unary<fn::Relu>(in, out, s);
}

}  // namespace kcsim
