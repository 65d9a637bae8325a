// repro_wrap_cubin: wraps a cubin built by a real project into a synthetic
// capture (.kcap) of one of its kernels, the way repro_generator_e2e_test
// wraps the cubins it compiles (replay::testing::KcapBuilder): kernel
// identity, architecture, the code object, a 1x1x1 launch; no memory. Enough
// for `kerncapctl repro` and `make recompile` (not for a replay). Used by
// tests/real_projects/run_real_projects.sh.
//
//   repro_wrap_cubin --cubin=K.cubin --kernel=MATCH --arch=sm_90 --out=K.kcap
//
// MATCH picks the kernel among the cubin's function symbols: the symbol
// itself, else the one whose demangled identifier is MATCH, else the first
// (sorted) whose demangled name contains MATCH. Prints the chosen mangled and
// demangled names (two lines).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/digest.h"
#include "common/file_util.h"
#include "llvm/Demangle/Demangle.h"
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"
#include "reproducer/generator/source_locator.h"
#include "reproducer/replay/core/replay_test_util.h"

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "repro_wrap_cubin: %s\n", msg.c_str());
  return 2;
}

std::string Flag(int argc, char** argv, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (absl::StartsWith(argv[i], prefix)) return std::string(argv[i] + prefix.size());
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cubin = Flag(argc, argv, "cubin"), match = Flag(argc, argv, "kernel"),
                    arch = Flag(argc, argv, "arch"), out = Flag(argc, argv, "out");
  if (cubin.empty() || match.empty() || arch.empty() || out.empty()) {
    return Fail("usage: --cubin=FILE --kernel=MATCH --arch=sm_XX --out=FILE.kcap");
  }
  auto code = kerncap::ReadFile(cubin);
  if (!code.ok()) return Fail(std::string(code.status().message()));
  auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(code->data(), code->size()),
                                                 "cubin", false);
  auto obj = llvm::object::ObjectFile::createObjectFile(buffer->getMemBufferRef());
  if (!obj) return Fail(cubin + ": " + llvm::toString(obj.takeError()));
  std::vector<std::pair<std::string, std::string>> functions;  // mangled, demangled
  for (const llvm::object::SymbolRef& sym : (*obj)->symbols()) {
    auto type = sym.getType();
    auto name = sym.getName();
    if (!type || !name) {
      if (!type) llvm::consumeError(type.takeError());
      if (!name) llvm::consumeError(name.takeError());
      continue;
    }
    if (*type != llvm::object::SymbolRef::ST_Function) continue;
    functions.emplace_back(name->str(), llvm::demangle(name->str()));
  }
  std::sort(functions.begin(), functions.end());
  const std::pair<std::string, std::string>* pick = nullptr;
  for (int pass = 0; pass < 3 && pick == nullptr; ++pass) {
    for (const auto& f : functions) {
      const bool ok = pass == 0   ? f.first == match
                      : pass == 1 ? kerncap::repro::KernelIdentifier(f.second) == match
                                  : absl::StrContains(f.second, match);
      if (ok) {
        pick = &f;
        break;
      }
    }
  }
  if (pick == nullptr) return Fail("no function symbol of " + cubin + " matches " + match);

  kerncap::replay::testing::KcapBuilder b(1 << 20);
  kerncap::v1::CaptureManifest m;
  m.set_format_version(1);
  m.set_capture_id("cap-" + kerncap::Sha256(*code).ToHex().substr(0, 12));
  m.set_source(kerncap::v1::SOURCE_AGENT);
  m.mutable_kernel()->set_mangled_name(pick->first);
  m.mutable_kernel()->set_demangled_name(pick->second);
  m.mutable_kernel()->set_platform(kerncap::v1::PLATFORM_CUDA);
  m.mutable_kernel()->set_arch(arch);
  m.mutable_device()->set_arch(arch);
  for (int i = 0; i < 3; ++i) {
    m.mutable_launch()->add_grid(1);
    m.mutable_launch()->add_block(1);
  }
  kerncap::v1::CodeObject* co = m.add_code_objects();
  co->set_digest(kerncap::Sha256(*code).ToBytes());
  co->set_format(kerncap::v1::CODE_OBJECT_CUBIN);
  *co->mutable_data() = b.Add(*code);
  m.mutable_kernel()->set_code_object_digest(co->digest());
  absl::Status st = b.Write(out, m);
  if (!st.ok()) return Fail(std::string(st.message()));
  std::printf("%s\n%s\n", pick->first.c_str(), pick->second.c_str());
  return 0;
}
