#include "common/cuda/cubin_elf.h"

#include <elf.h>

#include <cstring>
#include <string>
#include <utility>

namespace kerncap::cubin {
namespace {

using link::LinkResult;
using link::LinkStatus;

LinkStatus Error(std::string message) { return LinkStatus::Error(std::move(message)); }

// The symbol type nvcc gives variables in relocatable cubins (-rdc, not yet
// linked): STT_LOPROC, "STT_CUDA_OBJECT" in NVIDIA's tools.
constexpr int kSttCudaObject = 13;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A NUL-terminated string at `offset` of a string table, or empty if out of bounds.
std::string_view StrAt(std::string_view table, uint64_t offset) {
  if (offset >= table.size()) return {};
  std::string_view rest = table.substr(offset);
  size_t nul = rest.find('\0');
  if (nul == std::string_view::npos) return {};
  return rest.substr(0, nul);
}

}  // namespace

bool IsElf(std::string_view image) {
  return image.size() >= SELFMAG && std::memcmp(image.data(), ELFMAG, SELFMAG) == 0;
}

LinkResult<CubinInfo> ParseCubin(std::string_view image) {
  if (!IsElf(image)) return Error("not an ELF image");
  if (image.size() < sizeof(Elf64_Ehdr)) return Error("truncated ELF header");
  Elf64_Ehdr eh;
  std::memcpy(&eh, image.data(), sizeof(eh));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return Error("not a 64-bit ELF");
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) return Error("unexpected section header size");
  if (eh.e_shoff > image.size() ||
      static_cast<uint64_t>(eh.e_shnum) * sizeof(Elf64_Shdr) > image.size() - eh.e_shoff) {
    return Error("section headers out of bounds");
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!sh.empty()) std::memcpy(sh.data(), image.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));

  auto section_bytes = [&](const Elf64_Shdr& s) -> std::string_view {
    if (s.sh_type == SHT_NOBITS || s.sh_offset > image.size() ||
        s.sh_size > image.size() - s.sh_offset) {
      return {};
    }
    return image.substr(s.sh_offset, s.sh_size);
  };
  if (eh.e_shstrndx >= sh.size()) return Error("bad section name table index");
  std::string_view shstr = section_bytes(sh[eh.e_shstrndx]);

  CubinInfo info;
  for (const Elf64_Shdr& symtab : sh) {
    if (symtab.sh_type != SHT_SYMTAB) continue;
    if (symtab.sh_entsize != sizeof(Elf64_Sym) || symtab.sh_link >= sh.size()) {
      return Error("malformed symbol table");
    }
    std::string_view syms = section_bytes(symtab);
    std::string_view strtab = section_bytes(sh[symtab.sh_link]);
    size_t count = syms.size() / sizeof(Elf64_Sym);
    for (size_t i = 1; i < count; ++i) {
      Elf64_Sym sym;
      std::memcpy(&sym, syms.data() + i * sizeof(Elf64_Sym), sizeof(sym));
      if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= sh.size()) continue;
      std::string_view name = StrAt(strtab, sym.st_name);
      if (name.empty()) continue;
      std::string_view section = StrAt(shstr, sh[sym.st_shndx].sh_name);
      int type = ELF64_ST_TYPE(sym.st_info);
      if (type == STT_OBJECT || type == kSttCudaObject) {
        bool global = StartsWith(section, ".nv.global");
        bool constant = section == ".nv.constant3";
        if (!global && !constant) continue;
        info.variables.push_back(CubinVariable{std::string(name), std::string(section),
                                               sym.st_size, constant,
                                               ELF64_ST_BIND(sym.st_info) == STB_LOCAL});
      } else if (type == STT_FUNC && StartsWith(section, ".text.")) {
        info.kernels.emplace_back(name);
      }
    }
  }
  return info;
}

}  // namespace kerncap::cubin
