// elf_builder.h: minimal CUDA-like ELF cubins for the replay's CPU tests:
// a symbol table with module variables (in .nv.global / .nv.constant3) and
// kernels (STT_FUNC in .text.<name>), laid out as nvcc's cubins are, so that
// the replay's symbol listing (common/cuda/cubin_elf.h) and the fake driver
// read them. Not loadable by a real driver (no code).
#ifndef KERNCAP_REPRODUCER_REPLAY_TESTING_ELF_BUILDER_H_
#define KERNCAP_REPRODUCER_REPLAY_TESTING_ELF_BUILDER_H_

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kerncap::replay::testing {

struct ElfVariable {
  std::string name;
  uint64_t size = 0;
  bool constant = false;
  bool local = true;
};

struct ElfSpec {
  std::vector<ElfVariable> variables;
  std::vector<std::string> kernels;
  // Bytes placed in every .text section: two specs differing only here give
  // two different images with the same symbols (a variant and its original).
  std::string code = "kerncap test cubin";
};

inline std::string BuildTestCubin(const ElfSpec& spec) {
  std::string shstr(1, '\0'), str(1, '\0');
  auto add_name = [](std::string* table, const std::string& n) {
    const uint32_t at = static_cast<uint32_t>(table->size());
    *table += n;
    table->push_back('\0');
    return at;
  };
  struct Section {
    std::string name;
    uint32_t type;
    uint64_t flags;
    std::string data;   // PROGBITS/STRTAB/SYMTAB bytes
    uint64_t size = 0;  // NOBITS size
    uint32_t link = 0, info = 0;
    uint64_t entsize = 0;
  };
  std::vector<Section> sections(1);  // [0] SHT_NULL
  sections.push_back({".shstrtab", SHT_STRTAB, 0, "", 0});
  sections.push_back({".strtab", SHT_STRTAB, 0, "", 0});
  sections.push_back({".symtab", SHT_SYMTAB, 0, "", 0, 2, 0, sizeof(Elf64_Sym)});
  const uint16_t kGlobal = 4, kConstant = 5;
  sections.push_back({".nv.global", SHT_NOBITS, SHF_ALLOC | SHF_WRITE, "", 0});
  sections.push_back({".nv.constant3", SHT_PROGBITS, SHF_ALLOC, "", 0});
  std::vector<Elf64_Sym> locals, globals;
  for (const ElfVariable& v : spec.variables) {
    Section& s = sections[v.constant ? kConstant : kGlobal];
    const uint64_t offset = v.constant ? s.data.size() : s.size;
    if (v.constant) {
      s.data.append(v.size, '\0');
    } else {
      s.size += v.size;
    }
    Elf64_Sym sym = {};
    sym.st_name = add_name(&str, v.name);
    sym.st_info = ELF64_ST_INFO(v.local ? STB_LOCAL : STB_GLOBAL, STT_OBJECT);
    sym.st_shndx = v.constant ? kConstant : kGlobal;
    sym.st_value = offset;
    sym.st_size = v.size;
    (v.local ? locals : globals).push_back(sym);
  }
  for (const std::string& k : spec.kernels) {
    Elf64_Sym sym = {};
    sym.st_name = add_name(&str, k);
    sym.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    sym.st_shndx = static_cast<uint16_t>(sections.size());
    sym.st_size = spec.code.size();
    globals.push_back(sym);
    sections.push_back({".text." + k, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, spec.code, 0});
  }
  std::string& symtab = sections[3].data;
  symtab.assign(sizeof(Elf64_Sym), '\0');
  for (const auto* list : {&locals, &globals}) {
    for (const Elf64_Sym& s : *list) {
      symtab.append(reinterpret_cast<const char*>(&s), sizeof(s));
    }
  }
  sections[3].info = static_cast<uint32_t>(1 + locals.size());
  std::vector<uint32_t> name_at;
  for (const Section& s : sections) name_at.push_back(s.name.empty() ? 0 : add_name(&shstr, s.name));
  sections[1].data = shstr;
  sections[2].data = str;

  std::string out(sizeof(Elf64_Ehdr), '\0');
  std::vector<Elf64_Shdr> headers(sections.size());
  for (size_t i = 1; i < sections.size(); ++i) {
    const Section& s = sections[i];
    while (out.size() % 8 != 0) out.push_back('\0');
    Elf64_Shdr& h = headers[i];
    h.sh_name = name_at[i];
    h.sh_type = s.type;
    h.sh_flags = s.flags;
    h.sh_offset = out.size();
    h.sh_size = s.type == SHT_NOBITS ? s.size : s.data.size();
    h.sh_link = s.link;
    h.sh_info = s.info;
    h.sh_addralign = 8;
    h.sh_entsize = s.entsize;
    if (s.type != SHT_NOBITS) out += s.data;
  }
  while (out.size() % 8 != 0) out.push_back('\0');
  Elf64_Ehdr eh = {};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_EXEC;
  eh.e_machine = 190;  // EM_CUDA
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<uint16_t>(headers.size());
  eh.e_shstrndx = 1;
  eh.e_shoff = out.size();
  for (const Elf64_Shdr& h : headers) out.append(reinterpret_cast<const char*>(&h), sizeof(h));
  std::memcpy(out.data(), &eh, sizeof(eh));
  return out;
}

}  // namespace kerncap::replay::testing

#endif  // KERNCAP_REPRODUCER_REPLAY_TESTING_ELF_BUILDER_H_
