#include "common/cuda/cubin_elf.h"

#include <elf.h>

#include <cstring>
#include <set>
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

// See the header: 12-bit opcodes of texture / surface instructions, sm_70+.
bool IsTextureOpcode(uint32_t op, uint32_t sm) {
  switch (op) {
    case 0x361: case 0xb60: case 0xf60:  // TEX
    case 0x367: case 0xb66: case 0xf66:  // TLD
    case 0x364: case 0xb63: case 0xf63:  // TLD4
    case 0x36a: case 0xb69: case 0xf69:  // TMML
    case 0x36d: case 0xb6c: case 0xf6c:  // TXD
    case 0x370: case 0xb6f: case 0xf6f:  // TXQ
      return true;
    case 0xd61: case 0xd67: case 0xd64: case 0xd6d:  // sm_100+ register-handle forms
      return sm >= 100;
    default:
      return false;
  }
}

bool IsSurfaceOpcode(uint32_t op) {
  switch (op) {
    case 0x998: case 0x99a: case 0xb99: case 0xf99:  // SULD
    case 0x99c: case 0x99e: case 0xb9d: case 0xf9d:  // SUST
    case 0x3a0: case 0x59f: case 0xf9f:              // SURED
    case 0x394: case 0x396:                          // SUATOM
      return true;
    default:
      return false;
  }
}

// The texture/surface instructions of one .text section (sm_70+ encoding).
TextureUse ScanText(std::string_view text, uint32_t sm) {
  TextureUse use;
  use.known = true;
  for (size_t p = 0; p + 16 <= text.size(); p += 16) {
    uint64_t lo;
    std::memcpy(&lo, text.data() + p, sizeof(lo));
    const uint32_t op = static_cast<uint32_t>(lo & 0xfff);
    use.texture |= IsTextureOpcode(op, sm);
    use.surface |= IsSurfaceOpcode(op);
  }
  return use;
}

// The 128-bit encoding scanned above: sm_70 .. sm_121.
bool KnownEncoding(uint32_t sm) { return sm >= 70 && sm <= 121; }

// Bit 4 of st_other marks a CUDA entry function (a kernel).
constexpr unsigned char kCudaEntry = 0x10;

}  // namespace

TextureUse KernelTextureUse(const CubinInfo& info, const std::string& kernel) {
  auto it = info.texture_use.find(kernel);
  return it == info.texture_use.end() ? TextureUse{} : it->second;
}

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
  info.sm = (eh.e_flags >> 8) & 0xff;
  const bool scan_code = KnownEncoding(info.sm);
  // Texture use per function section; which sections hold kernels.
  std::map<std::string, uint16_t> kernel_sections;  // kernel -> section index
  std::set<uint16_t> function_sections;              // of non-entry functions
  std::map<uint16_t, TextureUse> scanned;
  auto scan = [&](uint16_t index) -> const TextureUse& {
    auto it = scanned.find(index);
    if (it == scanned.end()) {
      TextureUse use;  // unknown unless the section can be read
      std::string_view text = section_bytes(sh[index]);
      if (scan_code && sh[index].sh_type == SHT_PROGBITS && !text.empty()) {
        use = ScanText(text, info.sm);
      }
      it = scanned.emplace(index, use).first;
    }
    return it->second;
  };
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
        if ((sym.st_other & kCudaEntry) != 0) {
          kernel_sections[std::string(name)] = sym.st_shndx;
        } else {
          function_sections.insert(sym.st_shndx);
        }
      }
    }
  }
  // Functions with a section of their own (-rdc, not inlined) may be called
  // by any kernel; local helpers placed inside a kernel's section (the
  // compiler's slow paths) are that kernel's code only.
  for (const auto& [kernel, index] : kernel_sections) function_sections.erase(index);
  TextureUse callees;
  callees.known = true;
  for (uint16_t index : function_sections) {
    const TextureUse& use = scan(index);
    callees.known = callees.known && use.known;
    callees.texture = callees.texture || use.texture;
    callees.surface = callees.surface || use.surface;
  }
  for (const auto& [kernel, index] : kernel_sections) {
    TextureUse use = scan(index);
    use.known = use.known && callees.known;
    use.texture = use.texture || callees.texture;
    use.surface = use.surface || callees.surface;
    info.texture_use[kernel] = use;
  }
  return info;
}

}  // namespace kerncap::cubin
