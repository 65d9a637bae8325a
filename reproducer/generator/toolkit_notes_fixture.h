// toolkit_notes_fixture.h (tests only): minimal EM_CUDA ELF images holding
// the notes ptxas writes (.note.nv.tkinfo / .note.nv.cuinfo, byte formats in
// toolkit_notes.h), for tests that need a cubin with a known toolkit and no
// nvcc.
#ifndef KERNCAP_REPRODUCER_GENERATOR_TOOLKIT_NOTES_FIXTURE_H_
#define KERNCAP_REPRODUCER_GENERATOR_TOOLKIT_NOTES_FIXTURE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kerncap::repro::testing {

template <typename T>
void Put(std::string* s, T v) {
  s->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

inline void Pad4(std::string* s) {
  while (s->size() % 4 != 0) s->push_back('\0');
}

inline std::string Note(const std::string& owner, uint32_t type, const std::string& desc) {
  std::string n;
  Put<uint32_t>(&n, static_cast<uint32_t>(owner.size() + 1));
  Put<uint32_t>(&n, static_cast<uint32_t>(desc.size()));
  Put<uint32_t>(&n, type);
  n += owner;
  n.push_back('\0');
  Pad4(&n);
  n += desc;
  Pad4(&n);
  return n;
}

// The tkinfo descriptor ptxas writes: format 2, five string offsets, strings.
inline std::string TkInfo(const std::vector<std::string>& strings, std::vector<uint32_t> offsets = {}) {
  std::string area;
  std::vector<uint32_t> at;
  for (const std::string& s : strings) {
    at.push_back(static_cast<uint32_t>(area.size()));
    area += s;
    area.push_back('\0');
  }
  if (offsets.empty()) offsets = at;
  std::string d;
  Put<uint32_t>(&d, 2);
  for (uint32_t o : offsets) Put<uint32_t>(&d, o);
  return d + area;
}

// A minimal ELF64 (EM_CUDA) holding the given note sections.
inline std::string Elf(const std::vector<std::pair<std::string, std::string>>& notes) {
  std::string shstr("\0.shstrtab\0", 11);
  std::vector<uint32_t> names;
  for (const auto& [name, body] : notes) {
    names.push_back(static_cast<uint32_t>(shstr.size()));
    shstr += name;
    shstr.push_back('\0');
  }
  std::string data;  // section contents after the 64-byte header
  const uint64_t shstr_off = 64;
  data += shstr;
  Pad4(&data);
  std::vector<std::pair<uint64_t, uint64_t>> where;
  for (const auto& [name, body] : notes) {
    where.emplace_back(64 + data.size(), body.size());
    data += body;
    Pad4(&data);
  }
  while (data.size() % 8 != 0) data.push_back('\0');
  const uint64_t shoff = 64 + data.size();
  std::string e("\x7f" "ELF\x02\x01\x01", 7);
  e.resize(16, '\0');
  Put<uint16_t>(&e, 2);    // ET_EXEC
  Put<uint16_t>(&e, 190);  // EM_CUDA
  Put<uint32_t>(&e, 1);
  Put<uint64_t>(&e, 0);
  Put<uint64_t>(&e, 0);
  Put<uint64_t>(&e, shoff);
  Put<uint32_t>(&e, 0);
  Put<uint16_t>(&e, 64);
  Put<uint16_t>(&e, 56);
  Put<uint16_t>(&e, 0);
  Put<uint16_t>(&e, 64);
  Put<uint16_t>(&e, static_cast<uint16_t>(2 + notes.size()));
  Put<uint16_t>(&e, 1);
  e += data;
  auto shdr = [&e](uint32_t name, uint32_t type, uint64_t off, uint64_t size, uint64_t align) {
    Put<uint32_t>(&e, name);
    Put<uint32_t>(&e, type);
    Put<uint64_t>(&e, 0);
    Put<uint64_t>(&e, 0);
    Put<uint64_t>(&e, off);
    Put<uint64_t>(&e, size);
    Put<uint32_t>(&e, 0);
    Put<uint32_t>(&e, 0);
    Put<uint64_t>(&e, align);
    Put<uint64_t>(&e, 0);
  };
  shdr(0, 0, 0, 0, 0);
  shdr(1, 3, shstr_off, shstr.size(), 1);
  for (size_t i = 0; i < notes.size(); ++i) shdr(names[i], 7, where[i].first, where[i].second, 4);
  return e;
}

inline const std::vector<std::string> kPtxas13 = {
    "", "ptxas", "Cuda compilation tools, release 13.0, V13.0.88",
    "Build cuda_13.0.r13.0/compiler.36424714_0", "-lineinfo  -arch sm_90 -m 64 "};

inline std::string CuInfo(uint16_t ptx_arch, uint16_t toolkit) {
  std::string d;
  Put<uint16_t>(&d, 2);
  Put<uint16_t>(&d, ptx_arch);
  Put<uint16_t>(&d, toolkit);
  Put<uint16_t>(&d, 0);
  return d;
}

}  // namespace kerncap::repro::testing

#endif  // KERNCAP_REPRODUCER_GENERATOR_TOOLKIT_NOTES_FIXTURE_H_
