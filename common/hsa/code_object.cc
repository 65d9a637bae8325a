#include "common/hsa/code_object.h"

#include <algorithm>
#include <cstring>

#include "llvm/BinaryFormat/ELF.h"
#include "llvm/BinaryFormat/MsgPackDocument.h"
#include "llvm/BinaryFormat/MsgPackReader.h"
#include "llvm/Object/ELF.h"
#include "llvm/Support/Error.h"

namespace kerncap::hsa {
namespace {

Status OkStatus() { return Status::Ok(); }
Status Error(std::string message) { return Status::Error(std::move(message)); }

using llvm::msgpack::DocNode;
using llvm::msgpack::Type;

std::string TakeError(llvm::Error e) { return llvm::toString(std::move(e)); }

// Typed accessors that never assert: msgpack values are untrusted.
const DocNode* Field(const DocNode& map, std::string_view key) {
  if (map.getKind() != Type::Map) return nullptr;
  auto& m = const_cast<DocNode&>(map).getMap();
  auto it = m.find(llvm::StringRef(key.data(), key.size()));
  if (it == m.end()) return nullptr;
  return &it->second;
}

std::optional<uint64_t> AsUInt(const DocNode* n) {
  if (n == nullptr) return std::nullopt;
  if (n->getKind() == Type::UInt) return n->getUInt();
  if (n->getKind() == Type::Int && n->getInt() >= 0) return static_cast<uint64_t>(n->getInt());
  return std::nullopt;
}

std::optional<std::string> AsString(const DocNode* n) {
  if (n == nullptr || n->getKind() != Type::String) return std::nullopt;
  return n->getString().str();
}

// A u32 field: absent -> nullopt (caller decides); present but not a u32 -> error.
Status U32Field(const DocNode& map, std::string_view key, std::optional<uint32_t>* out) {
  const DocNode* n = Field(map, key);
  *out = std::nullopt;
  if (n == nullptr) return OkStatus();
  std::optional<uint64_t> v = AsUInt(n);
  if (!v || *v > UINT32_MAX) return Error(std::string(key) + " is not an unsigned 32-bit integer");
  *out = static_cast<uint32_t>(*v);
  return OkStatus();
}

Status U32FieldOr0(const DocNode& map, std::string_view key, uint32_t* out) {
  std::optional<uint32_t> v;
  if (Status st = U32Field(map, key, &v); !st.ok()) return st;
  *out = v.value_or(0);
  return OkStatus();
}

Result<KernelArg> ParseArg(const DocNode& node, size_t index) {
  std::string where = "argument " + std::to_string(index) + ": ";
  if (node.getKind() != Type::Map) return Error(where + "not a map");
  KernelArg a;
  std::optional<uint32_t> offset, size;
  Status s = U32Field(node, ".offset", &offset);
  if (s.ok()) s = U32Field(node, ".size", &size);
  if (!s.ok()) return Error(where + s.message());
  if (!offset || !size) return Error(where + "missing .offset or .size");
  a.offset = *offset;
  a.size = *size;
  std::optional<std::string> kind = AsString(Field(node, ".value_kind"));
  if (!kind) return Error(where + "missing .value_kind");
  a.value_kind = *kind;
  a.address_space = AsString(Field(node, ".address_space")).value_or("");
  a.name = AsString(Field(node, ".name")).value_or("");
  a.type_name = AsString(Field(node, ".type_name")).value_or("");
  if (static_cast<uint64_t>(a.offset) + a.size > UINT32_MAX) return Error(where + "offset+size overflows");
  return a;
}

Result<KernelMetadata> ParseKernel(const DocNode& node, size_t index) {
  std::string where = "kernel " + std::to_string(index) + ": ";
  if (node.getKind() != Type::Map) return Error(where + "not a map");
  KernelMetadata k;
  std::optional<std::string> name = AsString(Field(node, ".name"));
  if (!name || name->empty()) return Error(where + "missing .name");
  k.name = *name;
  where = "kernel " + k.name + ": ";
  k.symbol = AsString(Field(node, ".symbol")).value_or(k.name + ".kd");
  Status s = U32Field(node, ".kernarg_segment_size", &k.kernarg_segment_size);
  if (s.ok()) s = U32FieldOr0(node, ".kernarg_segment_align", &k.kernarg_segment_align);
  if (s.ok()) s = U32FieldOr0(node, ".group_segment_fixed_size", &k.group_segment_fixed_size);
  if (s.ok()) s = U32FieldOr0(node, ".private_segment_fixed_size", &k.private_segment_fixed_size);
  if (s.ok()) s = U32FieldOr0(node, ".wavefront_size", &k.wavefront_size);
  if (s.ok()) s = U32FieldOr0(node, ".sgpr_count", &k.sgpr_count);
  if (s.ok()) s = U32FieldOr0(node, ".vgpr_count", &k.vgpr_count);
  if (s.ok()) s = U32FieldOr0(node, ".max_flat_workgroup_size", &k.max_flat_workgroup_size);
  if (!s.ok()) return Error(where + s.message());
  if (const DocNode* args = Field(node, ".args")) {
    if (args->getKind() != Type::Array) return Error(where + ".args is not an array");
    auto& arr = const_cast<DocNode*>(args)->getArray();
    for (size_t i = 0; i < arr.size(); ++i) {
      auto a = ParseArg(arr[i], i);
      if (!a.ok()) return Error(where + a.error());
      if (k.kernarg_segment_size && a->offset + a->size > *k.kernarg_segment_size) {
        return Error(where + "argument " + std::to_string(i) +
                     " lies beyond .kernarg_segment_size");
      }
      k.args.push_back(std::move(a.value()));
    }
  }
  return k;
}

// Note records are walked here rather than with LLVM 15's Elf_Note_Iterator,
// which reads past the buffer on crafted sizes (found by the fuzzer). Format
// (ELF gABI): u32 namesz, u32 descsz, u32 type, name[namesz] padded to the
// note alignment, desc[descsz] padded likewise. Everything is bounds-checked
// in 64-bit arithmetic against [offset, offset+size) within the file.
std::optional<std::string_view> FindNote(std::string_view elf, uint64_t offset, uint64_t size,
                                         uint64_t align, std::string* error) {
  if (offset > elf.size() || size > elf.size() - offset) {
    *error = "ELF note area lies outside the file";
    return std::nullopt;
  }
  if (align != 4 && align != 8) align = 4;
  auto pad = [align](uint64_t n) { return (n + align - 1) / align * align; };
  std::string_view area = elf.substr(offset, size);
  uint64_t pos = 0;
  while (area.size() - pos >= 12) {
    uint32_t namesz, descsz, type;
    std::memcpy(&namesz, area.data() + pos, 4);
    std::memcpy(&descsz, area.data() + pos + 4, 4);
    std::memcpy(&type, area.data() + pos + 8, 4);
    const uint64_t name_at = pos + 12;
    const uint64_t desc_at = name_at + pad(namesz);
    const uint64_t next = desc_at + pad(descsz);
    if (desc_at > area.size() || descsz > area.size() - desc_at) {
      *error = "ELF note record overruns its note area";
      return std::nullopt;
    }
    std::string_view name = area.substr(name_at, namesz);
    while (!name.empty() && name.back() == '\0') name.remove_suffix(1);
    if (type == kNtAmdgpuMetadata && name == "AMDGPU") return area.substr(desc_at, descsz);
    if (next <= pos) break;
    pos = std::min<uint64_t>(next, area.size());
  }
  return std::nullopt;
}

template <typename ELFT>
Result<std::string_view> MetadataNoteDesc(const llvm::object::ELFFile<ELFT>& f,
                                          std::string_view elf) {
  std::string error;
  auto sections = f.sections();
  if (!sections) return Error("ELF section headers: " + TakeError(sections.takeError()));
  for (const auto& shdr : *sections) {
    if (shdr.sh_type != llvm::ELF::SHT_NOTE) continue;
    if (auto d = FindNote(elf, shdr.sh_offset, shdr.sh_size, shdr.sh_addralign, &error)) return *d;
    if (!error.empty()) return Error(error);
  }
  // Stripped section headers: fall back to PT_NOTE segments.
  auto phdrs = f.program_headers();
  if (!phdrs) return Error("ELF program headers: " + TakeError(phdrs.takeError()));
  for (const auto& phdr : *phdrs) {
    if (phdr.p_type != llvm::ELF::PT_NOTE) continue;
    if (auto d = FindNote(elf, phdr.p_offset, phdr.p_filesz, phdr.p_align, &error)) return *d;
    if (!error.empty()) return Error(error);
  }
  return Error("no NT_AMDGPU_METADATA note (code object v2, or not an AMDGPU code object)");
}

Result<llvm::object::ELF64LEFile> OpenElf(std::string_view elf) {
  if (elf.size() < sizeof(llvm::ELF::Elf64_Ehdr)) return Error("too short for an ELF64 header");
  if (std::memcmp(elf.data(), "\x7f" "ELF", 4) != 0) return Error("not an ELF file");
  if (static_cast<uint8_t>(elf[llvm::ELF::EI_CLASS]) != llvm::ELF::ELFCLASS64 ||
      static_cast<uint8_t>(elf[llvm::ELF::EI_DATA]) != llvm::ELF::ELFDATA2LSB) {
    return Error("not a little-endian ELF64 file");
  }
  auto f = llvm::object::ELF64LEFile::create(llvm::StringRef(elf.data(), elf.size()));
  if (!f) return Error("ELF: " + TakeError(f.takeError()));
  if (f->getHeader().e_machine != llvm::ELF::EM_AMDGPU) return Error("ELF e_machine is not EM_AMDGPU");
  return std::move(*f);
}

// LLVM 15's msgpack::Document is not safe on arbitrary input: a map whose
// key is an array, map or extension reaches llvm_unreachable (undefined
// behaviour in release builds; found by code_object_fuzzer). So the bytes
// are first walked with the streaming msgpack::Reader, which checks lengths,
// and only accepted when every map key is a scalar, nesting stays shallow and
// the element count is bounded (metadata notes are small).
Status ValidateMsgpack(std::string_view bytes) {
  constexpr size_t kMaxDepth = 32;
  constexpr uint64_t kMaxObjects = 1u << 22;
  struct Level {
    uint64_t remaining;  // items left (map: keys + values)
    bool map;
    bool next_is_key;
  };
  std::vector<Level> stack;
  llvm::msgpack::Reader reader(llvm::MemoryBufferRef(llvm::StringRef(bytes.data(), bytes.size()), "note"));
  uint64_t objects = 0;
  do {
    llvm::msgpack::Object obj;
    llvm::Expected<bool> more = reader.read(obj);
    if (!more) return Error("metadata note is not valid msgpack: " + TakeError(more.takeError()));
    if (!*more) return Error("metadata note is truncated");
    if (++objects > kMaxObjects) return Error("metadata note has too many elements");
    bool is_key = false;
    if (!stack.empty()) {
      Level& top = stack.back();
      is_key = top.map && top.next_is_key;
      if (top.map) top.next_is_key = !top.next_is_key;
      --top.remaining;
    }
    const bool container = obj.Kind == Type::Array || obj.Kind == Type::Map;
    if (is_key && (container || obj.Kind == Type::Extension)) {
      return Error("metadata note has a map key that is not a scalar");
    }
    while (!stack.empty() && stack.back().remaining == 0) stack.pop_back();
    if (container) {
      uint64_t n = obj.Length;
      if (obj.Kind == Type::Map) n *= 2;
      if (n > bytes.size()) return Error("metadata note container length exceeds the note");
      if (n > 0) {
        if (stack.size() >= kMaxDepth) return Error("metadata note nests too deeply");
        stack.push_back(Level{n, obj.Kind == Type::Map, true});
      }
    }
  } while (!stack.empty());
  return OkStatus();
}

}  // namespace

const KernelMetadata* CodeObjectMetadata::FindKernel(std::string_view name_or_symbol) const {
  for (const KernelMetadata& k : kernels) {
    if (k.name == name_or_symbol || k.symbol == name_or_symbol) return &k;
  }
  return nullptr;
}

Result<CodeObjectMetadata> ParseMetadataNote(std::string_view msgpack) {
  if (msgpack.empty()) return Error("metadata note is empty");
  if (Status st = ValidateMsgpack(msgpack); !st.ok()) return st;
  llvm::msgpack::Document doc;
  if (!doc.readFromBlob(llvm::StringRef(msgpack.data(), msgpack.size()), /*Multi=*/false)) {
    return Error("metadata note is not valid msgpack");
  }
  const DocNode& root = doc.getRoot();
  if (root.getKind() != Type::Map) return Error("metadata root is not a map");
  CodeObjectMetadata md;
  if (const DocNode* v = Field(root, "amdhsa.version")) {
    if (v->getKind() != Type::Array) return Error("amdhsa.version is not an array");
    auto& arr = const_cast<DocNode*>(v)->getArray();
    for (size_t i = 0; i < arr.size(); ++i) {
      auto n = AsUInt(&arr[i]);
      if (!n || *n > UINT32_MAX) return Error("amdhsa.version element is not an integer");
      md.version.push_back(static_cast<uint32_t>(*n));
    }
  } else {
    return Error("missing amdhsa.version");
  }
  md.target = AsString(Field(root, "amdhsa.target")).value_or("");
  if (const DocNode* ks = Field(root, "amdhsa.kernels")) {
    if (ks->getKind() != Type::Array) return Error("amdhsa.kernels is not an array");
    auto& arr = const_cast<DocNode*>(ks)->getArray();
    for (size_t i = 0; i < arr.size(); ++i) {
      auto k = ParseKernel(arr[i], i);
      if (!k.ok()) return k.status();
      md.kernels.push_back(std::move(k.value()));
    }
  }
  return md;
}

Result<CodeObjectMetadata> ParseCodeObjectMetadata(std::string_view elf) {
  auto f = OpenElf(elf);
  if (!f.ok()) return f.status();
  auto desc = MetadataNoteDesc(*f, elf);
  if (!desc.ok()) return desc.status();
  return ParseMetadataNote(*desc);
}

Result<CodeObjectSymbols> ParseCodeObjectSymbols(std::string_view elf) {
  auto f = OpenElf(elf);
  if (!f.ok()) return f.status();
  auto sections = f->sections();
  if (!sections) return Error("ELF section headers: " + TakeError(sections.takeError()));
  // Prefer .symtab (all symbols); .dynsym has the exported subset.
  const llvm::object::ELF64LE::Shdr* symtab = nullptr;
  for (const auto& s : *sections) {
    if (s.sh_type == llvm::ELF::SHT_SYMTAB) symtab = &s;
  }
  if (symtab == nullptr) {
    for (const auto& s : *sections) {
      if (s.sh_type == llvm::ELF::SHT_DYNSYM) symtab = &s;
    }
  }
  CodeObjectSymbols out;
  if (symtab == nullptr) return out;
  auto strtab = f->getStringTableForSymtab(*symtab, *sections);
  if (!strtab) return Error("ELF symbol string table: " + TakeError(strtab.takeError()));
  auto syms = f->symbols(symtab);
  if (!syms) return Error("ELF symbols: " + TakeError(syms.takeError()));
  for (const auto& sym : *syms) {
    if (sym.getType() != llvm::ELF::STT_OBJECT || sym.st_shndx == llvm::ELF::SHN_UNDEF) continue;
    auto name = sym.getName(*strtab);
    if (!name) return Error("ELF symbol name: " + TakeError(name.takeError()));
    if (name->empty()) continue;
    CodeObjectVariable v{name->str(), sym.st_value, sym.st_size};
    if (name->endswith(".kd")) {
      out.kernel_descriptors.push_back(std::move(v));
    } else if (sym.st_size > 0 && sym.getBinding() != llvm::ELF::STB_LOCAL) {
      out.variables.push_back(std::move(v));
    }
  }
  return out;
}

Result<KernelDescriptor> ParseKernelDescriptor(std::string_view b) {
  if (b.size() < kKernelDescriptorSize) return Error("kernel descriptor shorter than 64 bytes");
  auto u32 = [&](size_t off) {
    uint32_t v;
    std::memcpy(&v, b.data() + off, 4);
    return v;
  };
  KernelDescriptor d;
  d.group_segment_fixed_size = u32(0);
  d.private_segment_fixed_size = u32(4);
  d.kernarg_size = u32(8);
  std::memcpy(&d.kernel_code_entry_byte_offset, b.data() + 16, 8);
  d.compute_pgm_rsrc3 = u32(44);
  d.compute_pgm_rsrc1 = u32(48);
  d.compute_pgm_rsrc2 = u32(52);
  std::memcpy(&d.kernel_code_properties, b.data() + 56, 2);
  return d;
}

std::string GfxArchOf(std::string_view target) {
  size_t p = target.find("gfx");
  if (p == std::string_view::npos) return "";
  size_t e = target.find(':', p);
  return std::string(target.substr(p, e == std::string_view::npos ? e : e - p));
}

}  // namespace kerncap::hsa
