// add_one_ptx.h: the replay tests' kernel as PTX text, without any other
// dependency (the C API tests, which may not link kerncap's protobuf code,
// include it too). The one source of this kernel: the Python GPU test of
// kerncap.tune (client/python/tests/gpu/tune_gpu_test.py) reads the raw
// string below out of this file, so keep it one R"(...)" literal.
#ifndef KERNCAP_REPRODUCER_REPLAY_TESTING_ADD_ONE_PTX_H_
#define KERNCAP_REPRODUCER_REPLAY_TESTING_ADD_ONE_PTX_H_

namespace kerncap::replay::testing {

// add_one(unsigned long long** table, unsigned n): for i < n,
// (*table)[i] += 1 — one level of pointer indirection through device memory,
// so relocation must patch a pointer stored in a buffer, not only the
// argument. The GPU tests' kernel (replay_gpu_test, the C API's tests).
constexpr char kAddOnePtx[] = R"(
.version 7.8
.target sm_90
.address_size 64
.visible .entry add_one(.param .u64 table, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [table];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  ld.global.u64 %rd3, [%rd2];
  cvta.to.global.u64 %rd4, %rd3;
  mul.wide.u32 %rd5, %r5, 8;
  add.s64 %rd6, %rd4, %rd5;
  ld.global.u64 %rd7, [%rd6];
  add.s64 %rd7, %rd7, 1;
  st.global.u64 [%rd6], %rd7;
DONE:
  ret;
}
)";

}  // namespace kerncap::replay::testing

#endif  // KERNCAP_REPRODUCER_REPLAY_TESTING_ADD_ONE_PTX_H_
