#include "agent/hsa/kernel_registry.h"

#include <cxxabi.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "agent/core/log.h"

namespace kerncap::agent::hsa {
namespace {

struct FindCodeObject {
  const hsa_ven_amd_loader_1_03_pfn_t* loader;
  uint64_t kernel_object;
  hsa_loaded_code_object_t found{0};
  uint64_t base = 0, size = 0;
};

hsa_status_t FindCodeObjectCb(hsa_executable_t, hsa_loaded_code_object_t lco, void* data) {
  auto* f = static_cast<FindCodeObject*>(data);
  uint64_t base = 0, size = 0;
  if (f->loader->hsa_ven_amd_loader_loaded_code_object_get_info(
          lco, HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_BASE, &base) != HSA_STATUS_SUCCESS ||
      f->loader->hsa_ven_amd_loader_loaded_code_object_get_info(
          lco, HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_SIZE, &size) != HSA_STATUS_SUCCESS) {
    return HSA_STATUS_SUCCESS;
  }
  if (f->kernel_object >= base && f->kernel_object - base < size) {
    f->found = lco;
    f->base = base;
    f->size = size;
    return HSA_STATUS_INFO_BREAK;
  }
  return HSA_STATUS_SUCCESS;
}

struct SymbolScan {
  const CoreApiTable* core;
  uint64_t kernel_object;
  KernelRecord* record;
  uint32_t symbol_kernarg = 0;
};

std::string SymbolName(const CoreApiTable* core, hsa_executable_symbol_t sym) {
  uint32_t len = 0;
  if (core->hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH, &len) !=
          HSA_STATUS_SUCCESS ||
      len == 0 || len > 65536) {
    return "";
  }
  std::string name(len, '\0');
  if (core->hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_NAME, name.data()) !=
      HSA_STATUS_SUCCESS) {
    return "";
  }
  name.resize(strnlen(name.c_str(), len));
  return name;
}

hsa_status_t ScanSymbolCb(hsa_executable_t, hsa_executable_symbol_t sym, void* data) {
  auto* s = static_cast<SymbolScan*>(data);
  hsa_symbol_kind_t kind;
  if (s->core->hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &kind) !=
      HSA_STATUS_SUCCESS) {
    return HSA_STATUS_SUCCESS;
  }
  if (kind == HSA_SYMBOL_KIND_KERNEL) {
    uint64_t obj = 0;
    if (s->core->hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
                                                   &obj) == HSA_STATUS_SUCCESS &&
        obj == s->kernel_object) {
      s->record->symbol_name = SymbolName(s->core, sym);
      uint32_t ks = 0;
      if (s->core->hsa_executable_symbol_get_info_fn(
              sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &ks) == HSA_STATUS_SUCCESS) {
        s->symbol_kernarg = ks;
      }
    }
  } else if (kind == HSA_SYMBOL_KIND_VARIABLE) {
    ModuleVariable v;
    v.name = SymbolName(s->core, sym);
    uint32_t size = 0;
    hsa_variable_segment_t seg = HSA_VARIABLE_SEGMENT_GLOBAL;
    s->core->hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS,
                                               &v.address);
    s->core->hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, &size);
    s->core->hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SEGMENT,
                                               &seg);
    v.size = size;
    v.constant = seg == HSA_VARIABLE_SEGMENT_READONLY;
    // Skip empty, unresolved and absurd (> 1 GiB) variables.
    if (!v.name.empty() && v.address != 0 && v.size > 0 && v.size <= (1ull << 30)) {
      s->record->variables.push_back(std::move(v));
    }
  }
  return HSA_STATUS_SUCCESS;
}

Result<std::string> ReadCodeObjectFile(int fd, uint64_t size_hint) {
  if (fd < 0) return Error("no file descriptor");
  std::string bytes;
  char buf[1 << 16];
  off_t off = 0;
  while (true) {
    ssize_t n = pread(fd, buf, sizeof(buf), off);
    if (n < 0) return Error("reading the code object file failed");
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    off += n;
    if (bytes.size() > (1ull << 32)) return Error("code object file larger than 4 GiB");
  }
  (void)size_hint;
  return bytes;
}

}  // namespace

std::string Demangle(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) {
    std::free(d);
    return mangled;
  }
  std::string out(d);
  std::free(d);
  return out;
}

std::vector<ArgumentDesc> ArgumentsOf(const KernelMetadata& md) {
  std::vector<ArgumentDesc> out;
  for (const KernelArg& a : md.args) {
    ArgumentDesc d;
    d.offset = a.offset;
    d.size = a.size;
    d.value_kind = a.value_kind;
    d.type_name = a.type_name;
    if (a.hidden()) {
      d.kind = ArgumentKind::kHidden;
      // Agents before value_kind travelled named hidden arguments by their
      // kind; keep doing so (the metadata has no name for them).
      d.name = a.name.empty() ? a.value_kind : a.name;
    } else {
      d.kind = (a.value_kind == "global_buffer" || a.value_kind == "dynamic_shared_pointer")
                   ? ArgumentKind::kPointer
                   : ArgumentKind::kValue;
      d.name = a.name;
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::shared_ptr<const KernelRecord> KernelRegistry::Get(uint64_t kernel_object) {
  std::lock_guard lock(mu_);
  auto it = by_object_.find(kernel_object);
  if (it != by_object_.end()) return it->second;
  std::shared_ptr<const KernelRecord> r = Resolve(kernel_object);
  by_object_[kernel_object] = r;
  return r;
}

std::shared_ptr<const std::string> KernelRegistry::Intern(std::string bytes) {
  const uint64_t key = CodeObjectKey(bytes);
  auto range = interned_.equal_range(key);
  for (auto it = range.first; it != range.second;) {
    auto sp = it->second.lock();
    if (!sp) {
      it = interned_.erase(it);
      continue;
    }
    if (*sp == bytes) return sp;
    ++it;
  }
  auto sp = std::make_shared<const std::string>(std::move(bytes));
  interned_.emplace(key, sp);
  return sp;
}

std::shared_ptr<const LoadedCodeObject> KernelRegistry::CodeObjectFor(uint64_t executable,
                                                                      uint64_t kernel_object) {
  if (!tables_->has_loader) return nullptr;
  const auto& loader = tables_->loader;
  FindCodeObject f{&loader, kernel_object};
  loader.hsa_ven_amd_loader_executable_iterate_loaded_code_objects(hsa_executable_t{executable},
                                                                   FindCodeObjectCb, &f);
  if (f.found.handle == 0) return nullptr;
  auto key = std::make_pair(executable, f.found.handle);
  auto it = loaded_.find(key);
  if (it != loaded_.end()) return it->second;

  auto lco = std::make_shared<LoadedCodeObject>();
  lco->executable = executable;
  lco->load_base = f.base;
  lco->load_size = f.size;
  loader.hsa_ven_amd_loader_loaded_code_object_get_info(
      f.found, HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_DELTA, &lco->load_delta);
  uint32_t storage = HSA_VEN_AMD_LOADER_CODE_OBJECT_STORAGE_TYPE_NONE;
  loader.hsa_ven_amd_loader_loaded_code_object_get_info(
      f.found, HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_CODE_OBJECT_STORAGE_TYPE, &storage);
  std::string bytes;
  if (storage == HSA_VEN_AMD_LOADER_CODE_OBJECT_STORAGE_TYPE_MEMORY) {
    uint64_t base = 0, size = 0;
    loader.hsa_ven_amd_loader_loaded_code_object_get_info(
        f.found, HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_CODE_OBJECT_STORAGE_MEMORY_BASE, &base);
    loader.hsa_ven_amd_loader_loaded_code_object_get_info(
        f.found, HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_CODE_OBJECT_STORAGE_MEMORY_SIZE, &size);
    if (base != 0 && size > 0 && size < (1ull << 32)) {
      bytes.assign(reinterpret_cast<const char*>(base), size);
    }
  } else if (storage == HSA_VEN_AMD_LOADER_CODE_OBJECT_STORAGE_TYPE_FILE) {
    int fd = -1;
    loader.hsa_ven_amd_loader_loaded_code_object_get_info(
        f.found, HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_CODE_OBJECT_STORAGE_FILE, &fd);
    auto b = ReadCodeObjectFile(fd, f.size);
    if (b.ok()) bytes = std::move(b.value());
  }
  if (!bytes.empty()) {
    lco->code.bytes = Intern(std::move(bytes));
    lco->code.key = CodeObjectKey(*lco->code.bytes);
    lco->code.format = CodeObjectFormat::kHsaco;
    char name[64];
    std::snprintf(name, sizeof(name), "hsaco-%016llx",
                  static_cast<unsigned long long>(lco->code.key));
    lco->code.name = name;
    std::string_view view(*lco->code.bytes);
    auto md = ParseCodeObjectMetadata(view);
    if (md.ok()) {
      lco->metadata = std::move(md.value());
    } else {
      lco->metadata_error = md.error();
    }
    auto syms = ParseCodeObjectSymbols(view);
    if (syms.ok()) lco->symbols = std::move(syms.value());
  } else {
    lco->metadata_error = "the code object's bytes are not available from the loader";
  }
  loaded_[key] = lco;
  return lco;
}

std::shared_ptr<KernelRecord> KernelRegistry::Resolve(uint64_t kernel_object) {
  auto r = std::make_shared<KernelRecord>();
  r->kernel_object = kernel_object;
  const CoreApiTable* core = &tables_->core;
  hsa_executable_t exec{0};
  if (tables_->has_loader &&
      tables_->loader.hsa_ven_amd_loader_query_executable(
          reinterpret_cast<const void*>(kernel_object), &exec) == HSA_STATUS_SUCCESS) {
    r->executable = exec.handle;
  }
  SymbolScan scan{core, kernel_object, r.get()};
  if (exec.handle != 0 && core->hsa_executable_iterate_symbols_fn != nullptr) {
    core->hsa_executable_iterate_symbols_fn(exec, ScanSymbolCb, &scan);
  }
  r->mangled_name = r->symbol_name;
  if (r->mangled_name.size() > 3 &&
      r->mangled_name.compare(r->mangled_name.size() - 3, 3, ".kd") == 0) {
    r->mangled_name.resize(r->mangled_name.size() - 3);
  }
  if (r->mangled_name.empty()) {
    char name[48];
    std::snprintf(name, sizeof(name), "kernel@0x%llx", static_cast<unsigned long long>(kernel_object));
    r->mangled_name = name;
  }
  r->demangled_name = Demangle(r->mangled_name);

  if (exec.handle != 0) r->code_object = CodeObjectFor(exec.handle, kernel_object);
  if (r->code_object && r->code_object->metadata) {
    const CodeObjectMetadata& md = *r->code_object->metadata;
    r->arch = GfxArchOf(md.target);
    const KernelMetadata* k = md.FindKernel(r->symbol_name);
    if (k == nullptr) k = md.FindKernel(r->mangled_name);
    if (k != nullptr) r->metadata = *k;
  }

  // Kernarg segment size, most trusted first. Tensile-style assembly kernels
  // report 0 from the symbol query; never guess (a wrong size corrupts replay).
  if (scan.symbol_kernarg > 0) {
    r->kernarg_size = scan.symbol_kernarg;
    r->kernarg_source = "symbol";
  } else if (r->metadata && r->metadata->kernarg_segment_size && *r->metadata->kernarg_segment_size > 0) {
    r->kernarg_size = *r->metadata->kernarg_segment_size;
    r->kernarg_source = "metadata";
  } else {
    const void* host = nullptr;
    if (tables_->has_loader &&
        tables_->loader.hsa_ven_amd_loader_query_host_address(
            reinterpret_cast<const void*>(kernel_object), &host) == HSA_STATUS_SUCCESS &&
        host != nullptr) {
      auto kd = ParseKernelDescriptor(
          std::string_view(static_cast<const char*>(host), kKernelDescriptorSize));
      if (kd.ok() && kd->kernarg_size > 0) {
        r->kernarg_size = kd->kernarg_size;
        r->kernarg_source = "descriptor";
      }
    }
    if (r->kernarg_size == 0) {
      const char* env = std::getenv("KERNCAP_KERNARG_SIZE");
      if (env != nullptr && std::atoi(env) > 0) {
        r->kernarg_size = static_cast<uint32_t>(std::atoi(env));
        r->kernarg_source = "env";
      }
    }
    if (r->kernarg_size == 0 && !(r->metadata && r->metadata->args.empty() &&
                                  r->metadata->kernarg_segment_size)) {
      r->kernarg_error =
          "kernarg segment size unknown (symbol reports 0, no metadata or kernel descriptor "
          "value; set KERNCAP_KERNARG_SIZE)";
    }
  }
  return r;
}

namespace {

struct CensusScan {
  const CoreApiTable* core;
  uint64_t executable;
  std::vector<KernelRegistry::LoadedKernel>* out;
};

hsa_status_t CensusSymbolCb(hsa_executable_t, hsa_executable_symbol_t sym, void* data) {
  auto* s = static_cast<CensusScan*>(data);
  hsa_symbol_kind_t kind;
  if (s->core->hsa_executable_symbol_get_info_fn(sym, HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &kind) ==
          HSA_STATUS_SUCCESS &&
      kind == HSA_SYMBOL_KIND_KERNEL) {
    std::string name = SymbolName(s->core, sym);
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".kd") == 0) name.resize(name.size() - 3);
    if (!name.empty()) s->out->push_back(KernelRegistry::LoadedKernel{s->executable, name});
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t CollectExecutable(hsa_executable_t exec, void* data) {
  static_cast<std::vector<uint64_t>*>(data)->push_back(exec.handle);
  return HSA_STATUS_SUCCESS;
}

}  // namespace

std::vector<KernelRegistry::LoadedKernel> KernelRegistry::LoadedKernels() const {
  std::vector<LoadedKernel> out;
  const CoreApiTable* core = &tables_->core;
  if (!tables_->has_loader || core->hsa_executable_iterate_symbols_fn == nullptr ||
      core->hsa_executable_symbol_get_info_fn == nullptr) {
    return out;
  }
  std::vector<uint64_t> executables;
  tables_->loader.hsa_ven_amd_loader_iterate_executables(CollectExecutable, &executables);
  for (uint64_t e : executables) {
    CensusScan scan{core, e, &out};
    core->hsa_executable_iterate_symbols_fn(hsa_executable_t{e}, CensusSymbolCb, &scan);
  }
  return out;
}

void KernelRegistry::ForgetExecutable(uint64_t executable) {
  std::lock_guard lock(mu_);
  for (auto it = by_object_.begin(); it != by_object_.end();) {
    it = it->second->executable == executable ? by_object_.erase(it) : std::next(it);
  }
  for (auto it = loaded_.begin(); it != loaded_.end();) {
    it = it->first.first == executable ? loaded_.erase(it) : std::next(it);
  }
}

void KernelRegistry::Clear() {
  std::lock_guard lock(mu_);
  by_object_.clear();
  loaded_.clear();
  interned_.clear();
}

size_t KernelRegistry::size() const {
  std::lock_guard lock(mu_);
  return by_object_.size();
}

size_t KernelRegistry::code_objects() const {
  std::lock_guard lock(mu_);
  return loaded_.size();
}

}  // namespace kerncap::agent::hsa
