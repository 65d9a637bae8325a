#include "reproducer/generator/kernel_code.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#ifdef KERNCAP_GENERATOR_HAVE_LLVM
#include "llvm/Object/ELFObjectFile.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/MemoryBuffer.h"
#endif

namespace kerncap::repro {

#ifdef KERNCAP_GENERATOR_HAVE_LLVM
namespace {

// The object file over `elf` (not copied: `elf` must outlive it).
absl::StatusOr<std::unique_ptr<llvm::object::ObjectFile>> OpenObject(std::string_view elf) {
  llvm::MemoryBufferRef ref(llvm::StringRef(elf.data(), elf.size()), "code-object");
  auto obj = llvm::object::ObjectFile::createObjectFile(ref);
  if (!obj) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an object file: ", llvm::toString(obj.takeError())));
  }
  return std::move(*obj);
}

struct SymbolCode {
  llvm::object::SectionRef section;
  llvm::StringRef code;  // the function's bytes within the section
};

// The first symbol named `symbol` that lies in a readable section, with its
// bytes; symbols without a section or value are passed over.
absl::StatusOr<SymbolCode> FindSymbolCode(const llvm::object::ELFObjectFileBase& elf,
                                          const std::string& symbol) {
  for (const llvm::object::ELFSymbolRef sym : elf.symbols()) {
    auto name = sym.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name != symbol) continue;
    auto section = sym.getSection();
    auto value = sym.getValue();
    if (!section || !value || *section == elf.section_end()) {
      if (!section) llvm::consumeError(section.takeError());
      if (!value) llvm::consumeError(value.takeError());
      continue;
    }
    auto contents = (*section)->getContents();
    if (!contents) {
      llvm::consumeError(contents.takeError());
      continue;
    }
    const uint64_t base = (*section)->getAddress();
    const uint64_t size = sym.getSize();
    if (*value < base || *value - base > contents->size() ||
        size > contents->size() - (*value - base)) {
      return absl::InvalidArgumentError(
          absl::StrCat("symbol ", symbol, " lies outside its section"));
    }
    return SymbolCode{**section, contents->substr(*value - base, size)};
  }
  return absl::NotFoundError(absl::StrCat("no symbol ", symbol));
}

}  // namespace

absl::StatusOr<std::string> KernelCodeBytes(std::string_view elf, const std::string& symbol) {
  auto obj = OpenObject(elf);
  if (!obj.ok()) return obj.status();
  const auto* elf_obj = llvm::dyn_cast<llvm::object::ELFObjectFileBase>(obj->get());
  if (elf_obj == nullptr) return absl::InvalidArgumentError("not an ELF file");
  auto found = FindSymbolCode(*elf_obj, symbol);
  if (!found.ok()) return found.status();
  return found->code.str();
}

absl::StatusOr<KernelPrint> KernelFingerprint(std::string_view elf, const std::string& symbol) {
  using namespace llvm::object;  // NOLINT: local to this function
  auto obj = OpenObject(elf);
  if (!obj.ok()) return obj.status();
  const auto* elf64 = llvm::dyn_cast<ELF64LEObjectFile>(obj->get());
  if (elf64 == nullptr) return absl::InvalidArgumentError("not a 64-bit little-endian ELF file");
  auto found = FindSymbolCode(*elf64, symbol);
  if (!found.ok()) return found.status();
  KernelPrint fp;
  const auto* shdr = elf64->getSection(found->section.getRawDataRefImpl());
  // sh_info of a cubin's .text.<kernel>: the register count in its top
  // byte, above the index of the kernel's symbol (which depends on what
  // else the unit defines, so it is not compared).
  fp.code = found->code.str();
  fp.flags = shdr->sh_flags;
  fp.registers = static_cast<uint64_t>(shdr->sh_info) >> 24;
  for (const SectionRef s : elf64->sections()) {
    auto name = s.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      continue;
    }
    if (*name == ".nv.shared." + symbol) fp.shared_bytes = static_cast<int64_t>(s.getSize());
    if (*name == ".nv.constant0." + symbol) {
      fp.constant0_bytes = static_cast<int64_t>(s.getSize());
    }
    if (*name != ".rel.text." + symbol && *name != ".rela.text." + symbol) continue;
    for (const RelocationRef r : s.relocations()) {
      std::string target;
      auto sym = r.getSymbol();
      if (sym != elf64->symbol_end()) {
        auto n = sym->getName();
        if (n) {
          target = n->str();
        } else {
          llvm::consumeError(n.takeError());
        }
      }
      fp.relocations.push_back(absl::StrCat(r.getOffset(), ":", r.getType(), ":", target));
    }
  }
  return fp;
}
#else
absl::StatusOr<std::string> KernelCodeBytes(std::string_view, const std::string&) {
  return absl::UnimplementedError("this build has no ELF reader (LLVM 15 missing at build time)");
}

absl::StatusOr<KernelPrint> KernelFingerprint(std::string_view, const std::string&) {
  return absl::UnimplementedError("this build has no ELF reader (LLVM 15 missing at build time)");
}
#endif

std::string DescribeDifference(const KernelPrint& a, const KernelPrint& b) {
  std::vector<std::string> parts;
  auto bytes = [](int64_t n) { return n < 0 ? std::string("none") : absl::StrCat(n, " bytes"); };
  if (a.code != b.code) {
    parts.push_back(
        a.code.size() == b.code.size()
            ? absl::StrCat("the code (", a.code.size(), " bytes each, different)")
            : absl::StrCat("the code (", a.code.size(), " vs ", b.code.size(), " bytes)"));
  }
  if (a.registers != b.registers) {
    parts.push_back(absl::StrCat("the register count (", a.registers, " vs ", b.registers, ")"));
  }
  if (a.flags != b.flags) parts.push_back("the code section's flags");
  if (a.shared_bytes != b.shared_bytes) {
    parts.push_back(absl::StrCat("the kernel's static shared memory (", bytes(a.shared_bytes),
                                 " vs ", bytes(b.shared_bytes), ")"));
  }
  if (a.constant0_bytes != b.constant0_bytes) {
    parts.push_back(absl::StrCat("its constant bank 0 (", bytes(a.constant0_bytes), " vs ",
                                 bytes(b.constant0_bytes), ")"));
  }
  if (a.relocations != b.relocations) {
    parts.push_back(
        absl::StrCat("its relocations (", a.relocations.size(), " vs ", b.relocations.size(), ")"));
  }
  return parts.empty() ? "nothing" : absl::StrJoin(parts, ", ");
}

}  // namespace kerncap::repro
