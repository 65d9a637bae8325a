// unary_square.cu: out = Square(in).
#include "kcsim/elementwise.h"

namespace kcsim {

void Square(const Buffer& in, const Buffer& out, cudaStream_t s) {
  elementwise::Unary<fn::Square>(in, out, s);
}

}  // namespace kcsim
