// capi_test_fixture.h: the synthetic capture the C API tests use (C++ unit
// and GPU tests, and through replay_capi_fixture the Python tests).
//
// add_one(unsigned long long** table, unsigned n): for i < n,
// (*table)[i] += 1: pre region 0 (the table) holds one pointer to region 1
// (n u64 values i*3); the post image says each value gained `golden_delta`
// (1 is right). The code object is PTX (sm_90), so the GPU tests need no
// toolkit on the GPU machine.
//
// `rich` adds what only the CPU tests look at (the kernel cannot use them):
// a pinned host region, a module variable "kc_scale", a kernarg region, a
// by-value u64 argument that points nowhere, a demangled name, Triton JIT
// metadata, dynamic shared memory, a cluster, launch attributes and the
// captured device identity.
#ifndef KERNCAP_REPRODUCER_REPLAY_CAPI_CAPI_TEST_FIXTURE_H_
#define KERNCAP_REPRODUCER_REPLAY_CAPI_CAPI_TEST_FIXTURE_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "reproducer/replay/core/replay_test_util.h"

namespace kerncap::replay::testing {

constexpr uint64_t kCapiTableVa = 0x7f3b00000000;  // holds one pointer
constexpr uint64_t kCapiDataVa = 0x7f3b00200000;   // kCapiN u64 values
constexpr uint32_t kCapiN = 100000;
// rich only:
constexpr uint64_t kCapiHostVa = 0x7f3c00001000;
constexpr uint64_t kCapiGlobalVa = 0x7f3d00000400;
constexpr uint64_t kCapiKernargVa = 0x7f3e00000000;
constexpr uint64_t kCapiByValue = 0x1234567890abcdefull;  // in no region

struct CapiFixtureOptions {
  uint64_t golden_delta = 1;
  bool rich = false;
  // With rich: the by-value u64 at offset 16 is declared a texture object (a
  // linear float texture over the first 4 KiB of the data region).
  bool texture = false;
};

inline absl::Status WriteCapiFixture(const std::string& path, const CapiFixtureOptions& o) {
  KcapBuilder b(64 << 10);
  AddOneCaptureSpec spec;
  spec.capture_id = "cap-capi-selftest";
  spec.table_va = kCapiTableVa;
  spec.data_va = kCapiDataVa;
  spec.n = kCapiN;
  spec.golden_delta = o.golden_delta;
  spec.typed_arguments = true;
  v1::CaptureManifest m = AddOneCapture(b, spec);
  v1::LaunchConfig* l = m.mutable_launch();
  std::string blob = m.argument_blob();
  if (o.rich) {
    m.mutable_kernel()->set_demangled_name("add_one(unsigned long long**, unsigned int)");
    m.mutable_kernel()->set_arch("sm_90");
    m.mutable_kernel()->set_jit_metadata_json(
        R"({"name":"add_one","num_warps":8,"signature":{"table":"*u64","n":"u32"}})");
    m.mutable_device()->set_ordinal(0);
    m.mutable_device()->set_name("NVIDIA H200");
    m.mutable_device()->set_arch("sm_90");
    l->add_grid(2);  // grid [391, 2, 1]
    l->set_shared_mem_bytes(4096);
    l->add_cluster(2);
    l->add_cluster(1);
    l->add_cluster(1);
    (*l->mutable_attributes())["func.max_dynamic_shared_size_bytes"] = 4096;
    v1::Region* h = m.mutable_pre()->add_regions();  // index 2
    h->set_va(kCapiHostVa);
    h->set_kind(v1::REGION_HOST_PINNED);
    *h->mutable_data() = b.Add(std::string(256, '\x5a'));
    v1::Region* g = m.mutable_pre()->add_regions();  // index 3
    g->set_va(kCapiGlobalVa);
    g->set_kind(v1::REGION_MODULE_GLOBAL);
    g->set_name("kc_scale");
    *g->mutable_data() = b.Add(std::string("\x00\x00\x80\x3f", 4));  // 1.0f
    v1::Region* k = m.mutable_pre()->add_regions();  // index 4
    k->set_va(kCapiKernargVa);
    k->set_kind(v1::REGION_KERNARG);
    *k->mutable_data() = b.Add(std::string(32, '\x01'));
    // A by-value u64 at offset 16 (after 4 bytes of padding) and one that
    // points 16 bytes into the data region.
    blob.resize(32, '\0');
    std::memcpy(blob.data() + 16, &kCapiByValue, 8);
    const uint64_t inside = kCapiDataVa + 16;
    std::memcpy(blob.data() + 24, &inside, 8);
    v1::Argument* a2 = m.add_arguments();
    a2->set_offset(16);
    a2->set_size(8);
    a2->set_kind(v1::ARG_BY_VALUE);
    a2->set_name("seed");
    a2->set_type_name("unsigned long long");
    v1::Argument* a3 = m.add_arguments();
    a3->set_offset(24);
    a3->set_size(8);
    a3->set_name("cursor");
    if (o.texture) {
      v1::TextureObject* tex = m.add_texture_objects();
      tex->set_type(v1::TextureObject::TEXTURE_OBJECT);
      tex->set_handle(kCapiByValue);
      tex->add_argument_offsets(16);
      v1::TextureResource* r = tex->mutable_resource();
      r->set_type(v1::TextureResource::RESOURCE_LINEAR);
      r->set_device_ptr(kCapiDataVa);
      r->set_format(0x20);  // CU_AD_FORMAT_FLOAT
      r->set_num_channels(1);
      r->set_size_bytes(4096);
    }
  }
  m.set_argument_blob(blob);
  return b.Write(path, m);
}

}  // namespace kerncap::replay::testing

#endif  // KERNCAP_REPRODUCER_REPLAY_CAPI_CAPI_TEST_FIXTURE_H_
