// code_object_fuzzer.cc: libFuzzer entry for the AMDGPU code object reader.
// The input is tried both as a whole ELF code object and as a bare msgpack
// metadata note; any crash, hang or sanitizer report is a bug (inputs are
// untrusted: they come from whatever the application loaded).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/hsa/code_object.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto md = kerncap::hsa::ParseMetadataNote(in);
  (void)md.ok();
  auto co = kerncap::hsa::ParseCodeObjectMetadata(in);
  (void)co.ok();
  auto syms = kerncap::hsa::ParseCodeObjectSymbols(in);
  (void)syms.ok();
  auto kd = kerncap::hsa::ParseKernelDescriptor(in);
  (void)kd.ok();
  return 0;
}
