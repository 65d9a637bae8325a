// internal_linkage_fixture.h: a capture whose module variables have
// internal linkage, and the same unit "rebuilt in another folder", for the
// CPU tests on the fake driver (replay_session_test, serve's fake test).
//
// scale(float* out, const float* in, unsigned n), one block of n threads:
//   out[i] = scale_v * in[i]; counter += n
// scale_v and counter carry nvcc's per-compile module id in their names
// (real symbols of nvcc 13.0: an anonymous-namespace __device__ float and an
// -rdc `static __device__ unsigned`); the capture holds scale_v = 3 and
// counter = 10, neither their initial values, so a replay that does not
// restore them computes something else.
#ifndef KERNCAP_REPRODUCER_REPLAY_TESTING_INTERNAL_LINKAGE_FIXTURE_H_
#define KERNCAP_REPRODUCER_REPLAY_TESTING_INTERNAL_LINKAGE_FIXTURE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kerncap/v1/manifest.pb.h"
#include "reproducer/replay/core/replay_test_util.h"
#include "reproducer/replay/testing/elf_builder.h"
#include "reproducer/replay/testing/fake_cuda.h"

namespace kerncap::replay::testing {

// Compile A (the application) and compile B (the reproducer's rebuild).
inline constexpr char kScaleA[] =
    "_ZN30_INTERNAL_bd0d3510_4_k_cu_kern32_GLOBAL__N__bd0d3510_4_k_cu_kern7scale_vE";
inline constexpr char kScaleB[] =
    "_ZN30_INTERNAL_082a8982_4_k_cu_kern32_GLOBAL__N__082a8982_4_k_cu_kern7scale_vE";
inline constexpr char kCounterA[] = "__nv_static_21__bd0d3510_4_k_cu_kern_counter";
inline constexpr char kCounterB[] = "__nv_static_21__082a8982_4_k_cu_kern_counter";
inline constexpr char kAnonKernelA[] = "_ZN32_GLOBAL__N__bd0d3510_4_k_cu_kern11anon_kernelEPi";
inline constexpr char kAnonKernelB[] = "_ZN32_GLOBAL__N__082a8982_4_k_cu_kern11anon_kernelEPi";

inline constexpr uint64_t kScaleOutVa = 0x7f2c00000000;
inline constexpr uint64_t kScaleInVa = 0x7f2c00200000;
inline constexpr uint64_t kScaleSpareVa = 0x7f2c00400000;  // never touched by scale
inline constexpr uint64_t kScaleVarVa = 0x7f2d00000000;
inline constexpr uint64_t kCounterVarVa = 0x7f2d00000100;
inline constexpr uint32_t kScaleN = 256;

// The fake driver's scale: finds its module's variables under either name.
inline double ScaleKernel(fake::FakeCuda& cuda, const fake::Launch& l) {
  uint64_t out = 0, in = 0;
  uint32_t n = 0;
  if (l.args.size() < 20) return -1;
  std::memcpy(&out, l.args.data(), 8);
  std::memcpy(&in, l.args.data() + 8, 8);
  std::memcpy(&n, l.args.data() + 16, 4);
  auto scale_at = cuda.GlobalOf(l, kScaleB);
  if (!scale_at) scale_at = cuda.GlobalOf(l, kScaleA);
  float scale = 0;
  if (scale_at) cuda.Read(*scale_at, &scale, 4);
  std::vector<float> v(n);
  if (!cuda.Read(in, v.data(), n * 4ull)) return -1;
  for (float& x : v) x *= scale;
  if (!cuda.Write(out, v.data(), n * 4ull)) return -1;
  auto counter_at = cuda.GlobalOf(l, kCounterB);
  if (!counter_at) counter_at = cuda.GlobalOf(l, kCounterA);
  if (counter_at) {
    uint32_t c = 0;
    cuda.Read(*counter_at, &c, 4);
    c += n;
    cuda.Write(*counter_at, &c, 4);
  }
  return 0.5;
}

inline std::string AsBytes(const void* p, size_t n) {
  return std::string(static_cast<const char*>(p), n);
}

// A cubin of `kernel` with `variables` (the code object of compile A or B).
inline std::string ScaleCubin(std::vector<ElfVariable> variables,
                              const std::string& kernel = "scale",
                              const std::string& code = "kerncap test cubin") {
  ElfSpec spec;
  spec.variables = std::move(variables);
  spec.kernels = {kernel};
  spec.code = code;
  return BuildTestCubin(spec);
}

// The capture (of compile A). `counter_after`: what the post image says
// (10 + kScaleN is right). `spare`: add a device region scale never touches.
inline v1::CaptureManifest ScaleCapture(KcapBuilder& b, uint32_t counter_after,
                                        const std::string& kernel = "scale",
                                        bool spare = false) {
  std::vector<float> in(kScaleN), out(kScaleN, -1.0f), post(kScaleN);
  for (uint32_t i = 0; i < kScaleN; ++i) {
    in[i] = static_cast<float>(i) + 0.5f;
    post[i] = 3.0f * in[i];
  }
  const float scale = 3.0f;
  const uint32_t counter = 10;
  v1::CaptureManifest m;
  m.set_capture_id("cap-internal");
  m.set_post_complete(true);
  m.mutable_kernel()->set_mangled_name(kernel);
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  auto add = [&](uint64_t va, v1::RegionKind kind, const std::string& name,
                 const std::string& pre, const std::string& after) {
    v1::Region* r = m.mutable_pre()->add_regions();
    r->set_va(va);
    r->set_kind(kind);
    r->set_name(name);
    *r->mutable_data() = b.Add(pre);
    *m.mutable_post()->add_regions() = b.Diff(*r, pre, after);
  };
  add(kScaleOutVa, v1::REGION_DEVICE, "", AsBytes(out.data(), kScaleN * 4),
      AsBytes(post.data(), kScaleN * 4));
  add(kScaleInVa, v1::REGION_DEVICE, "", AsBytes(in.data(), kScaleN * 4),
      AsBytes(in.data(), kScaleN * 4));
  add(kScaleVarVa, v1::REGION_MODULE_GLOBAL, kScaleA, AsBytes(&scale, 4), AsBytes(&scale, 4));
  add(kCounterVarVa, v1::REGION_MODULE_GLOBAL, kCounterA, AsBytes(&counter, 4),
      AsBytes(&counter_after, 4));
  if (spare) {
    const std::string bytes(4096, '\x33');
    add(kScaleSpareVa, v1::REGION_DEVICE, "", bytes, bytes);
  }
  v1::CodeObject* c = m.add_code_objects();
  c->set_format(v1::CODE_OBJECT_CUBIN);
  c->set_name("k.cubin");
  *c->mutable_data() = b.Add(ScaleCubin({{kScaleA, 4}, {kCounterA, 4}}, kernel));
  m.mutable_launch()->add_grid(1);
  m.mutable_launch()->add_block(kScaleN);
  std::string blob(20, '\0');
  std::memcpy(blob.data(), &kScaleOutVa, 8);
  std::memcpy(blob.data() + 8, &kScaleInVa, 8);
  std::memcpy(blob.data() + 16, &kScaleN, 4);
  m.set_argument_blob(blob);
  for (uint32_t off : {0u, 8u, 16u}) {
    v1::Argument* a = m.add_arguments();
    a->set_offset(off);
    a->set_size(off == 16 ? 4 : 8);
  }
  return m;
}

}  // namespace kerncap::replay::testing

#endif  // KERNCAP_REPRODUCER_REPLAY_TESTING_INTERNAL_LINKAGE_FIXTURE_H_
