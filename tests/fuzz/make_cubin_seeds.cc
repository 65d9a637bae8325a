// make_cubin_seeds: writes small hand-made ELF64 cubins (the layout
// common/cuda/cubin_elf.h describes: kernels in .text.<name> with the entry
// bit, a separately placed device function, __device__ and __constant__
// variables, sm_90 in e_flags, texture and surface opcodes) as seeds for
// cubin_fuzzer. Built by code, not committed: run_fuzzers.sh writes them at
// test time, beside the real cubins it compiles with nvcc when there is one.
#include <elf.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/cuda/cubin_elf.h"

namespace {

struct Section {
  std::string name;
  uint32_t type = SHT_PROGBITS;
  std::string bytes;
  uint64_t nobits_size = 0;
  uint32_t link = 0;
  uint64_t entsize = 0;
};

// One 128-bit instruction whose low 12 bits are `opcode`.
std::string Instruction(uint32_t opcode) {
  std::string ins(16, '\0');
  const uint64_t lo = opcode;
  std::memcpy(ins.data(), &lo, sizeof(lo));
  return ins;
}

std::string Bytes(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

std::string MakeCubin(uint32_t sm, bool rdc) {
  // Section indices: 0 null, 1 .shstrtab, 2 .strtab, 3 .symtab, 4 .text.kern,
  // 5 .text.helper, 6 .nv.global, 7 .nv.constant3.
  std::vector<Section> s(8);
  s[4] = {".text.kern", SHT_PROGBITS,
          Instruction(0x918) + Instruction(0xf60) + Instruction(0x94d), 0, 0, 0};
  s[5] = {".text.helper", SHT_PROGBITS, Instruction(0xf99) + Instruction(0x918), 0, 0, 0};
  s[6] = {".nv.global", SHT_NOBITS, "", 256, 0, 0};
  s[7] = {".nv.constant3", SHT_PROGBITS, std::string(16, '\x01'), 0, 0, 0};
  std::string strtab(1, '\0');
  auto add_str = [](std::string& table, const std::string& name) {
    const uint32_t at = static_cast<uint32_t>(table.size());
    table += name;
    table.push_back('\0');
    return at;
  };
  std::string syms(sizeof(Elf64_Sym), '\0');  // symbol 0
  auto add_sym = [&](const std::string& name, int bind, int type, unsigned char other,
                     uint16_t shndx, uint64_t size) {
    Elf64_Sym sym{};
    sym.st_name = add_str(strtab, name);
    sym.st_info = static_cast<unsigned char>(ELF64_ST_INFO(bind, type));
    sym.st_other = other;
    sym.st_shndx = shndx;
    sym.st_size = size;
    syms += Bytes(&sym, sizeof(sym));
  };
  const int var_type = rdc ? 13 : STT_OBJECT;  // STT_CUDA_OBJECT in relocatable cubins
  add_sym("_Z4kernPf", STB_GLOBAL, STT_FUNC, 0x10, 4, 48);
  add_sym("_Z6helperv", STB_GLOBAL, STT_FUNC, 0, 5, 32);
  add_sym("g_counter", STB_GLOBAL, var_type, 0, 6, 256);
  add_sym("_ZN12_GLOBAL__N_15tableE", STB_LOCAL, var_type, 0, 7, 16);
  s[2] = {".strtab", SHT_STRTAB, strtab, 0, 0, 0};
  s[3] = {".symtab", SHT_SYMTAB, syms, 0, 2, sizeof(Elf64_Sym)};
  std::string shstr(1, '\0');
  std::vector<uint32_t> names(s.size(), 0);
  s[1] = {".shstrtab", SHT_STRTAB, "", 0, 0, 0};
  for (size_t i = 1; i < s.size(); ++i) names[i] = add_str(shstr, s[i].name);
  s[1].bytes = shstr;

  std::string image(sizeof(Elf64_Ehdr), '\0');
  std::vector<Elf64_Shdr> sh(s.size());
  for (size_t i = 1; i < s.size(); ++i) {
    while (image.size() % 16 != 0) image.push_back('\0');
    sh[i].sh_name = names[i];
    sh[i].sh_type = s[i].type;
    sh[i].sh_offset = image.size();
    sh[i].sh_size = s[i].type == SHT_NOBITS ? s[i].nobits_size : s[i].bytes.size();
    sh[i].sh_link = s[i].link;
    sh[i].sh_entsize = s[i].entsize;
    sh[i].sh_addralign = 16;
    image += s[i].bytes;
  }
  while (image.size() % 8 != 0) image.push_back('\0');
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = rdc ? ET_REL : ET_EXEC;
  eh.e_machine = 190;  // EM_CUDA
  eh.e_version = EV_CURRENT;
  eh.e_flags = (sm & 0xff) << 8;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<uint16_t>(sh.size());
  eh.e_shstrndx = 1;
  eh.e_shoff = image.size();
  for (const Elf64_Shdr& h : sh) image += Bytes(&h, sizeof(h));
  std::memcpy(image.data(), &eh, sizeof(eh));
  return image;
}

// A seed the parser refuses starts the fuzzer nowhere: check each one.
bool Parses(const std::string& image, bool scanned) {
  auto info = kerncap::cubin::ParseCubin(image);
  if (!info.ok() || info->kernels.size() != 2 || info->variables.size() != 2) return false;
  const kerncap::cubin::TextureUse use = kerncap::cubin::KernelTextureUse(*info, "_Z4kernPf");
  return !scanned || (use.known && use.texture && use.surface);
}

bool Write(const std::string& path, const std::string& bytes) {
  if (!Parses(bytes, path.find("sm60") == std::string::npos)) {
    std::fprintf(stderr, "make_cubin_seeds: %s does not parse as intended\n", path.c_str());
    return false;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::printf("%s (%zu bytes)\n", path.c_str(), bytes.size());
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_cubin_seeds DIR (an existing folder)\n");
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = Write(dir + "/handmade_sm90", MakeCubin(90, false)) &&
            Write(dir + "/handmade_sm80_rdc", MakeCubin(80, true)) &&
            Write(dir + "/handmade_sm100", MakeCubin(100, false)) &&
            Write(dir + "/handmade_sm60", MakeCubin(60, false));  // code not scanned
  return ok ? 0 : 1;
}
