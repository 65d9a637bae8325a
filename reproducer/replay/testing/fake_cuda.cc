#include "reproducer/replay/testing/fake_cuda.h"

#include <elf.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/cuda/cubin_elf.h"
#include "reproducer/replay/core/compare_abi.h"

namespace kerncap::replay::fake {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGranularity = 2 * kMiB;
const CUcontext kContext = reinterpret_cast<CUcontext>(0x1c0);

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string HexAddr(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

struct Buffer {
  explicit Buffer(uint64_t size) : bytes(size, 0) {}
  std::vector<uint8_t> bytes;
};

struct Mapping {
  uint64_t size = 0;
  std::shared_ptr<Buffer> buf;
  uint64_t offset = 0;
};

struct Module {
  uint64_t id = 0;
  std::string image;
  std::map<std::string, std::pair<uint64_t, uint64_t>> globals;  // name -> va, size
  std::set<std::string> functions;
  std::map<std::string, uint64_t> launch_counts;
};

struct Function {
  uint64_t module = 0;
  std::string name;
  std::map<int, int> attributes;
};

// ---- PTX: the entries and module-scope variables (with sizes) -------------

uint64_t PtxTypeSize(std::string_view t) {
  static const std::pair<const char*, uint64_t> kTypes[] = {
      {".b8", 1},  {".u8", 1},  {".s8", 1},  {".b16", 2}, {".u16", 2}, {".s16", 2}, {".f16", 2},
      {".b32", 4}, {".u32", 4}, {".s32", 4}, {".f32", 4}, {".b64", 8}, {".u64", 8}, {".s64", 8},
      {".f64", 8}};
  for (const auto& [name, size] : kTypes) {
    if (t == name) return size;
  }
  return 0;
}

void ParsePtxStatement(const std::string& st, Module* m) {
  std::vector<std::string> tok;
  {
    std::string cur;
    for (char c : st) {
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        if (!cur.empty()) tok.push_back(cur);
        cur.clear();
      } else {
        cur.push_back(c);
      }
    }
    if (!cur.empty()) tok.push_back(cur);
  }
  size_t i = 0;
  bool external = false;
  while (i < tok.size() && (tok[i] == ".visible" || tok[i] == ".weak" || tok[i] == ".extern")) {
    external |= tok[i] == ".extern";
    ++i;
  }
  if (i >= tok.size()) return;
  if (tok[i] == ".entry" && i + 1 < tok.size()) {
    m->functions.insert(tok[i + 1].substr(0, tok[i + 1].find('(')));
    return;
  }
  if ((tok[i] != ".global" && tok[i] != ".const") || external) return;
  uint64_t elem = 0;
  for (++i; i < tok.size(); ++i) {
    if (tok[i] == ".align") {
      ++i;
      continue;
    }
    if (tok[i][0] == '.') {
      if (uint64_t s = PtxTypeSize(tok[i])) elem = s;
      continue;
    }
    std::string name = tok[i];
    uint64_t count = 1;
    std::string rest;
    for (size_t j = i; j < tok.size(); ++j) rest += tok[j];
    const size_t cut = name.find_first_of("[=;");
    name = name.substr(0, cut);
    for (size_t at = rest.find('['); at != std::string::npos && rest.find('=') > at;
         at = rest.find('[', at + 1)) {
      count *= std::strtoull(rest.c_str() + at + 1, nullptr, 10);
    }
    if (elem > 0 && !name.empty()) m->globals[name] = {0, elem * count};
    return;
  }
}

void ParsePtx(const std::string& text, Module* m) {
  std::string head;
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
      if (depth == 0) head.push_back('\n');
      continue;
    }
    if (c == '{') {
      ++depth;
      continue;
    }
    if (c == '}') {
      if (depth > 0 && --depth == 0) {
        size_t j = i + 1;
        while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j]))) ++j;
        if (j >= text.size() || text[j] != ';') {
          ParsePtxStatement(head, m);
          head.clear();
        }
      }
      continue;
    }
    if (depth > 0) continue;
    if (c == ';') {
      ParsePtxStatement(head, m);
      head.clear();
      continue;
    }
    if (c == '\n') {
      // Line directives without ';'.
      const size_t first = head.find_first_not_of(" \t\r\n");
      if (first != std::string::npos &&
          (head.compare(first, 8, ".version") == 0 || head.compare(first, 7, ".target") == 0 ||
           head.compare(first, 13, ".address_size") == 0)) {
        head.clear();
        continue;
      }
    }
    head.push_back(c);
  }
}

// The length of an ELF image from its headers.
uint64_t ElfLength(const void* image) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, image, sizeof(eh));
  uint64_t end = eh.e_shoff + static_cast<uint64_t>(eh.e_shnum) * eh.e_shentsize;
  const auto* base = static_cast<const char*>(image);
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, base + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof(sh));
    if (sh.sh_type != SHT_NOBITS) end = std::max<uint64_t>(end, sh.sh_offset + sh.sh_size);
  }
  return end;
}

const char* ErrorName(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_UNSUPPORTED_LIMIT: return "CUDA_ERROR_UNSUPPORTED_LIMIT";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    default: return "CUDA_ERROR_UNKNOWN";
  }
}

}  // namespace

struct FakeCuda::State {
  std::map<uint64_t, uint64_t> reservations;  // va -> size
  std::vector<std::pair<uint64_t, uint64_t>> refused;
  uint64_t next_va = 0x500000000000ull;
  std::map<uint64_t, std::shared_ptr<Buffer>> handles;
  uint64_t next_handle = 1;
  std::map<uint64_t, Mapping> mappings;  // every kind of device memory, by start
  std::set<uint64_t> allocations;        // cuMemAlloc'd starts (their own mapping)
  uint64_t next_alloc = 0x600000000000ull;
  std::map<uint64_t, uint64_t> host;     // registered host memory: start -> size
  std::map<uint64_t, std::unique_ptr<Module>> modules;
  uint64_t next_module = 1;
  std::vector<std::unique_ptr<Function>> functions;
  std::map<std::string, Kernel> kernels;
  std::map<std::pair<std::string, std::string>, Kernel> image_kernels;
  std::map<uint64_t, double> events;
  uint64_t next_event = 1;
  uint64_t next_stream = 1;
  std::map<uint64_t, uint64_t> windows;  // stream -> access-policy window bytes
  double clock = 0;
  std::vector<std::string> log;
  std::vector<std::string> launches;
  uint64_t persisting_limit = 0;
  uint64_t persisting_resets = 0;
  bool persisting_supported = true;
  double memset_ms_per_mib = 0.25;
  double add_one_ms = 1.0;
  uint64_t free_bytes = 64ull << 30;   // cuMemGetInfo
  uint64_t total_bytes = 80ull << 30;
  CUresult sticky = CUDA_SUCCESS;

  uint8_t* Locate(uint64_t va, uint64_t n) {
    auto it = mappings.upper_bound(va);
    if (it != mappings.begin()) {
      --it;
      if (va >= it->first && va - it->first + n <= it->second.size) {
        return it->second.buf->bytes.data() + it->second.offset + (va - it->first);
      }
    }
    auto h = host.upper_bound(va);
    if (h != host.begin()) {
      --h;
      if (va >= h->first && va - h->first + n <= h->second) return reinterpret_cast<uint8_t*>(va);
    }
    return nullptr;
  }
  uint64_t Alloc(uint64_t size) {
    const uint64_t va = next_alloc;
    next_alloc += RoundUp(std::max<uint64_t>(size, 1), kGranularity);
    mappings[va] = Mapping{size, std::make_shared<Buffer>(size), 0};
    allocations.insert(va);
    return va;
  }
  void Advance(uint64_t bytes) { clock += memset_ms_per_mib * static_cast<double>(bytes) / kMiB; }
};

FakeCuda::FakeCuda() { Reset(); }

FakeCuda& FakeCuda::Get() {
  static FakeCuda* f = new FakeCuda();
  return *f;
}

FakeCuda::State& FakeCuda::state() { return *state_; }

void FakeCuda::Reset() {
  std::lock_guard<std::recursive_mutex> l(mu_);
  state_ = std::make_unique<State>();
  state_->kernels["add_one"] = AddOneKernel();
  state_->kernels[KC_COMPARE_KERNEL_NAME] = CompareKernel();
}

void FakeCuda::SetKernel(const std::string& function, Kernel k) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  state_->kernels[function] = std::move(k);
}

void FakeCuda::SetKernelForImage(const std::string& image, const std::string& function, Kernel k) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  state_->image_kernels[{image, function}] = std::move(k);
}

void FakeCuda::RefuseAddress(uint64_t va, uint64_t size) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  state_->refused.emplace_back(va, size);
}

void FakeCuda::set_persisting_l2_supported(bool on) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  state_->persisting_supported = on;
}

void FakeCuda::set_memset_ms_per_mib(double ms) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  state_->memset_ms_per_mib = ms;
}

void FakeCuda::set_mem_info(uint64_t free_bytes, uint64_t total_bytes) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  state_->free_bytes = free_bytes;
  state_->total_bytes = total_bytes;
}

uint64_t FakeCuda::allocated_bytes() {
  std::lock_guard<std::recursive_mutex> l(mu_);
  uint64_t n = 0;
  for (uint64_t va : state_->allocations) {
    auto it = state_->mappings.find(va);
    if (it != state_->mappings.end()) n += it->second.size;
  }
  return n;
}

void FakeCuda::set_add_one_ms(double ms) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  state_->add_one_ms = ms;
}

bool FakeCuda::Read(uint64_t va, void* out, size_t n) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  uint8_t* p = state_->Locate(va, n);
  if (p == nullptr) return false;
  std::memcpy(out, p, n);
  return true;
}

bool FakeCuda::Write(uint64_t va, const void* in, size_t n) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  uint8_t* p = state_->Locate(va, n);
  if (p == nullptr) return false;
  std::memcpy(p, in, n);
  return true;
}

std::optional<uint64_t> FakeCuda::ReadU64(uint64_t va) {
  uint64_t v = 0;
  if (!Read(va, &v, 8)) return std::nullopt;
  return v;
}

bool FakeCuda::WriteU64(uint64_t va, uint64_t v) { return Write(va, &v, 8); }

std::optional<std::pair<uint64_t, uint64_t>> FakeCuda::Global(uint64_t module,
                                                              const std::string& name) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  auto m = state_->modules.find(module);
  if (m == state_->modules.end()) return std::nullopt;
  auto g = m->second->globals.find(name);
  if (g == m->second->globals.end()) return std::nullopt;
  return g->second;
}

std::optional<uint64_t> FakeCuda::GlobalOf(const Launch& launch, const std::string& name) {
  auto g = Global(launch.module, name);
  if (!g) return std::nullopt;
  return g->first;
}

std::vector<std::string> FakeCuda::log() {
  std::lock_guard<std::recursive_mutex> l(mu_);
  return state_->log;
}

void FakeCuda::clear_log() {
  std::lock_guard<std::recursive_mutex> l(mu_);
  state_->log.clear();
}

uint64_t FakeCuda::persisting_l2_limit() {
  std::lock_guard<std::recursive_mutex> l(mu_);
  return state_->persisting_limit;
}

uint64_t FakeCuda::persisting_l2_resets() {
  std::lock_guard<std::recursive_mutex> l(mu_);
  return state_->persisting_resets;
}

uint64_t FakeCuda::stream_window_bytes(CUstream stream) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  auto it = state_->windows.find(reinterpret_cast<uint64_t>(stream));
  return it == state_->windows.end() ? 0 : it->second;
}

double FakeCuda::clock_ms() {
  std::lock_guard<std::recursive_mutex> l(mu_);
  return state_->clock;
}

size_t FakeCuda::loaded_modules() {
  std::lock_guard<std::recursive_mutex> l(mu_);
  return state_->modules.size();
}

std::vector<std::string> FakeCuda::launches() {
  std::lock_guard<std::recursive_mutex> l(mu_);
  return state_->launches;
}

Kernel AddOneKernel() {
  return [](FakeCuda& cuda, const Launch& launch) -> double {
    uint64_t table = 0;
    uint32_t n = 0;
    if (launch.args.size() >= 12) {
      std::memcpy(&table, launch.args.data(), 8);
      std::memcpy(&n, launch.args.data() + 8, 4);
    } else if (launch.params != nullptr) {  // kernelParams: one pointer per parameter
      std::memcpy(&table, launch.params[0], 8);
      std::memcpy(&n, launch.params[1], 4);
    } else {
      return -1;
    }
    std::optional<uint64_t> data = cuda.ReadU64(table);
    if (!data) return -1;
    std::vector<uint64_t> v(n);
    if (!cuda.Read(*data, v.data(), n * 8ull)) return -1;
    for (uint64_t& x : v) ++x;
    if (!cuda.Write(*data, v.data(), n * 8ull)) return -1;
    std::lock_guard<std::recursive_mutex> l(cuda.mu());
    return cuda.state().add_one_ms;
  };
}

Kernel CompareKernel() {
  return [](FakeCuda& cuda, const Launch& l) -> double {
    if (l.params == nullptr) return -1;
    uint64_t tiles = 0, regions = 0, stats = 0;
    std::memcpy(&tiles, l.params[0], 8);
    std::memcpy(&regions, l.params[1], 8);
    std::memcpy(&stats, l.params[2], 8);
    for (unsigned b = 0; b < l.grid[0]; ++b) {
      KcCompareTile t;
      KcCompareRegion r;
      KcCompareStats s;
      if (!cuda.Read(tiles + b * sizeof(t), &t, sizeof(t)) ||
          !cuda.Read(regions + t.region * sizeof(r), &r, sizeof(r)) ||
          !cuda.Read(stats + t.region * sizeof(s), &s, sizeof(s))) {
        return -1;
      }
      std::string a(t.length, '\0'), e(t.length, '\0');
      if (!cuda.Read(r.actual + t.offset, a.data(), t.length) ||
          !cuda.Read(r.expected + t.offset, e.data(), t.length)) {
        return -1;
      }
      const uint32_t es = r.elem_size == 0 ? 1 : r.elem_size;
      for (uint64_t off = 0; off + es <= t.length; off += es) {
        uint32_t bytes = 0;
        for (uint32_t k = 0; k < es; ++k) bytes += a[off + k] != e[off + k];
        if (bytes == 0) continue;
        ++s.differing;
        ++s.failing;
        s.bytes_differing += bytes;
        const uint64_t inv = ~(t.offset + off);
        s.first_diff_inv = std::max(s.first_diff_inv, inv);
        s.first_fail_inv = std::max(s.first_fail_inv, inv);
      }
      cuda.Write(stats + t.region * sizeof(s), &s, sizeof(s));
    }
    return 0.01;
  };
}

}  // namespace kerncap::replay::fake

// ---- the driver API --------------------------------------------------------

using kerncap::replay::fake::FakeCuda;
using kerncap::replay::fake::Function;
using kerncap::replay::fake::Kernel;
using kerncap::replay::fake::Launch;
using kerncap::replay::fake::Module;

namespace {

FakeCuda& F() { return FakeCuda::Get(); }
FakeCuda::State& S() { return F().state(); }
using Lock = std::lock_guard<std::recursive_mutex>;
#define KC_FAKE_LOCK Lock lock_(F().mu())

void Log(std::string s) { S().log.push_back(std::move(s)); }

CUresult Copy(uint64_t dst, const void* src, size_t n, const char* what) {
  if (S().sticky != CUDA_SUCCESS) return S().sticky;
  uint8_t* p = S().Locate(dst, n);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(p, src, n);
  S().Advance(n);
  Log(std::string(what) + " " + kerncap::replay::fake::HexAddr(dst) + " " + std::to_string(n));
  return CUDA_SUCCESS;
}

CUresult CopyOut(void* dst, uint64_t src, size_t n) {
  if (S().sticky != CUDA_SUCCESS) return S().sticky;
  uint8_t* p = S().Locate(src, n);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::memmove(dst, p, n);
  return CUDA_SUCCESS;
}

template <typename T>
CUresult Fill(uint64_t dst, T value, size_t count, const char* what) {
  if (S().sticky != CUDA_SUCCESS) return S().sticky;
  uint8_t* p = S().Locate(dst, count * sizeof(T));
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) std::memcpy(p + i * sizeof(T), &value, sizeof(T));
  S().Advance(count * sizeof(T));
  Log(std::string(what) + " " + kerncap::replay::fake::HexAddr(dst) + " " +
      std::to_string(count * sizeof(T)));
  return CUDA_SUCCESS;
}

CUresult LoadModule(CUmodule* module, const void* image) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto m = std::make_unique<Module>();
  const char* p = static_cast<const char*>(image);
  if (std::memcmp(p, ELFMAG, SELFMAG) == 0) {
    m->image.assign(p, kerncap::replay::fake::ElfLength(image));
    auto info = kerncap::cubin::ParseCubin(m->image);
    if (!info.ok()) return CUDA_ERROR_INVALID_IMAGE;
    for (const auto& v : info->variables) m->globals[v.name] = {0, v.size};
    for (const auto& k : info->kernels) m->functions.insert(k);
  } else if (std::strstr(p, ".version") != nullptr) {
    m->image.assign(p);
    kerncap::replay::fake::ParsePtx(m->image, m.get());
  } else {
    return CUDA_ERROR_INVALID_IMAGE;
  }
  for (auto& [name, g] : m->globals) g.first = S().Alloc(g.second);
  m->id = S().next_module++;
  Log("load_module " + std::to_string(m->id));
  *module = reinterpret_cast<CUmodule>(m->id);
  S().modules[m->id] = std::move(m);
  return CUDA_SUCCESS;
}

CUresult RunLaunch(CUfunction f, Launch launch, CUstream stream) {
  if (S().sticky != CUDA_SUCCESS) return S().sticky;
  auto* fn = reinterpret_cast<Function*>(f);
  if (fn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  auto mi = S().modules.find(fn->module);
  if (mi == S().modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  Module& m = *mi->second;
  launch.function = fn->name;
  launch.module = m.id;
  launch.image = &m.image;
  launch.launches_of_function = m.launch_counts[fn->name]++;
  Kernel k;
  if (auto it = S().image_kernels.find({m.image, fn->name}); it != S().image_kernels.end()) {
    k = it->second;
  } else if (auto it2 = S().kernels.find(fn->name); it2 != S().kernels.end()) {
    k = it2->second;
  }
  Log("launch " + fn->name);
  S().launches.push_back(fn->name + "@" + std::to_string(m.id));
  const double ms = k ? k(F(), launch) : 1.0;
  if (ms < 0) {
    S().sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    return S().sticky;
  }
  S().clock += ms;
  (void)stream;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

void kc_fake_cuda_reset(void) { F().Reset(); }
void kc_fake_cuda_set_add_one_ms(double ms) { F().set_add_one_ms(ms); }
unsigned long long kc_fake_cuda_persisting_l2_limit(void) { return F().persisting_l2_limit(); }

#define KC_FAKE_EXPORT __attribute__((visibility("default")))

KC_FAKE_EXPORT CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }
KC_FAKE_EXPORT CUresult CUDAAPI cuDriverGetVersion(int* v) {
  if (v) *v = 13000;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_VALUE;
  *d = 0;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuDeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  std::snprintf(name, static_cast<size_t>(len), "Fake GPU");
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute a, CUdevice) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *pi = 50 << 20; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: *pi = 30 << 20; break;
    default: *pi = 0;
  }
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) {
  *c = kerncap::replay::fake::kContext;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
KC_FAKE_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
KC_FAKE_EXPORT CUresult CUDAAPI cuCtxSynchronize(void) {
  KC_FAKE_LOCK;
  return S().sticky;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* g, const CUmemAllocationProp*,
                                                              CUmemAllocationGranularity_flags) {
  *g = kerncap::replay::fake::kGranularity;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t,
                                                    CUdeviceptr addr, unsigned long long) {
  KC_FAKE_LOCK;
  auto free_at = [&](uint64_t va) {
    for (const auto& [r, n] : S().refused) {
      if (va < r + n && r < va + size) return false;
    }
    for (const auto& [r, n] : S().reservations) {
      if (va < r + n && r < va + size) return false;
    }
    return true;
  };
  uint64_t va = addr;
  if (va == 0 || !free_at(va)) {
    do {
      va = S().next_va;
      S().next_va += kerncap::replay::fake::RoundUp(size, 32ull << 20);
    } while (!free_at(va));
  }
  S().reservations[va] = size;
  *ptr = va;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t) {
  KC_FAKE_LOCK;
  S().reservations.erase(ptr);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* h, size_t size,
                                            const CUmemAllocationProp*, unsigned long long) {
  KC_FAKE_LOCK;
  *h = S().next_handle++;
  S().handles[*h] = std::make_shared<kerncap::replay::fake::Buffer>(size);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle h) {
  KC_FAKE_LOCK;
  S().handles.erase(h);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                         CUmemGenericAllocationHandle h, unsigned long long) {
  KC_FAKE_LOCK;
  auto it = S().handles.find(h);
  if (it == S().handles.end() || it->second->bytes.size() < offset + size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  bool reserved = false;
  for (const auto& [r, n] : S().reservations) reserved |= ptr >= r && ptr + size <= r + n;
  if (!reserved) return CUDA_ERROR_INVALID_VALUE;
  S().mappings[ptr] = kerncap::replay::fake::Mapping{size, it->second, offset};
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t) {
  KC_FAKE_LOCK;
  S().mappings.erase(ptr);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) {
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  KC_FAKE_LOCK;
  return Copy(dst, src, n, "htod");
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  KC_FAKE_LOCK;
  return CopyOut(dst, src, n);
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n) {
  KC_FAKE_LOCK;
  return Fill<uint8_t>(dst, v, n, "memset8");
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n,
                                                  CUstream) {
  KC_FAKE_LOCK;
  return Copy(dst, src, n, "htod");
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n,
                                                CUstream) {
  KC_FAKE_LOCK;
  return Fill<uint8_t>(dst, v, n, "memset8");
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n,
                                                 CUstream) {
  KC_FAKE_LOCK;
  return Fill<uint32_t>(dst, v, n, "memset32");
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t size) {
  KC_FAKE_LOCK;
  *p = S().Alloc(size);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  KC_FAKE_LOCK;
  if (!S().allocations.erase(p)) return CUDA_ERROR_INVALID_VALUE;
  S().mappings.erase(p);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemHostRegister(void* p, size_t size, unsigned int) {
  KC_FAKE_LOCK;
  S().host[reinterpret_cast<uint64_t>(p)] = size;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemHostUnregister(void* p) {
  KC_FAKE_LOCK;
  return S().host.erase(reinterpret_cast<uint64_t>(p)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer(CUdeviceptr* d, void* p, unsigned int) {
  KC_FAKE_LOCK;
  if (S().Locate(reinterpret_cast<uint64_t>(p), 1) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *d = reinterpret_cast<uint64_t>(p);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemAllocHost(void** pp, size_t size) {
  KC_FAKE_LOCK;
  const size_t n = kerncap::replay::fake::RoundUp(std::max<size_t>(size, 1), 4096);
  void* p = std::aligned_alloc(4096, n);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0, n);
  S().host[reinterpret_cast<uint64_t>(p)] = n;
  *pp = p;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemFreeHost(void* p) {
  KC_FAKE_LOCK;
  S().host.erase(reinterpret_cast<uint64_t>(p));
  std::free(p);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  KC_FAKE_LOCK;
  return LoadModule(module, image);
}
KC_FAKE_EXPORT CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image,
                                                   unsigned int, CUjit_option*, void**) {
  KC_FAKE_LOCK;
  return LoadModule(module, image);
}
KC_FAKE_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  KC_FAKE_LOCK;
  auto it = S().modules.find(reinterpret_cast<uint64_t>(hmod));
  if (it == S().modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  for (const auto& [name, g] : it->second->globals) {
    S().allocations.erase(g.first);
    S().mappings.erase(g.first);
  }
  Log("unload_module " + std::to_string(it->first));
  S().modules.erase(it);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule hmod,
                                                    const char* name) {
  KC_FAKE_LOCK;
  auto it = S().modules.find(reinterpret_cast<uint64_t>(hmod));
  if (it == S().modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (!it->second->functions.count(name)) return CUDA_ERROR_NOT_FOUND;
  auto fn = std::make_unique<Function>();
  fn->module = it->first;
  fn->name = name;
  *f = reinterpret_cast<CUfunction>(fn.get());
  S().functions.push_back(std::move(fn));
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr* dptr, size_t* bytes, CUmodule hmod,
                                                  const char* name) {
  KC_FAKE_LOCK;
  auto it = S().modules.find(reinterpret_cast<uint64_t>(hmod));
  if (it == S().modules.end()) return CUDA_ERROR_INVALID_HANDLE;
  auto g = it->second->globals.find(name);
  if (g == it->second->globals.end()) return CUDA_ERROR_NOT_FOUND;
  if (dptr) *dptr = g->second.first;
  if (bytes) *bytes = g->second.second;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  KC_FAKE_LOCK;
  reinterpret_cast<Function*>(f)->attributes[a] = v;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int* v, CUfunction_attribute a, CUfunction f) {
  KC_FAKE_LOCK;
  auto& attrs = reinterpret_cast<Function*>(f)->attributes;
  auto it = attrs.find(a);
  *v = it == attrs.end() ? 0 : it->second;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction f, CUfunc_cache config) {
  KC_FAKE_LOCK;
  Log("cache_config " + reinterpret_cast<Function*>(f)->name + " " +
      std::to_string(static_cast<int>(config)));
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                               unsigned int gz, unsigned int bx, unsigned int by,
                                               unsigned int bz, unsigned int shared,
                                               CUstream stream, void** params, void** extra) {
  KC_FAKE_LOCK;
  Launch l;
  l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
  l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
  l.shared_bytes = shared;
  l.params = params;
  for (size_t i = 0; extra != nullptr && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      const size_t* size = nullptr;
      for (size_t j = 0; extra[j] != CU_LAUNCH_PARAM_END; j += 2) {
        if (extra[j] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = static_cast<const size_t*>(extra[j + 1]);
      }
      if (size != nullptr) l.args.assign(static_cast<const char*>(extra[i + 1]), *size);
    }
  }
  return RunLaunch(f, std::move(l), stream);
}
KC_FAKE_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f,
                                                 void** params, void** extra) {
  Launch l;
  {
    KC_FAKE_LOCK;
    l.grid[0] = c->gridDimX, l.grid[1] = c->gridDimY, l.grid[2] = c->gridDimZ;
    l.block[0] = c->blockDimX, l.block[1] = c->blockDimY, l.block[2] = c->blockDimZ;
    l.shared_bytes = c->sharedMemBytes;
    for (unsigned i = 0; i < c->numAttrs; ++i) {
      if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
        l.cluster[0] = c->attrs[i].value.clusterDim.x;
        l.cluster[1] = c->attrs[i].value.clusterDim.y;
        l.cluster[2] = c->attrs[i].value.clusterDim.z;
      }
      if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE) l.cooperative = true;
    }
  }
  if (extra != nullptr) {
    const CUresult r =
        cuLaunchKernel(f, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                       l.shared_bytes, c->hStream, params, extra);
    return r;
  }
  KC_FAKE_LOCK;
  l.params = params;
  return RunLaunch(f, std::move(l), c->hStream);
}
KC_FAKE_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) {
  KC_FAKE_LOCK;
  *s = reinterpret_cast<CUstream>(S().next_stream++);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  KC_FAKE_LOCK;
  S().windows.erase(reinterpret_cast<uint64_t>(s));
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream) {
  KC_FAKE_LOCK;
  return S().sticky;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream) {
  KC_FAKE_LOCK;
  return S().sticky;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) {
  KC_FAKE_LOCK;
  *e = reinterpret_cast<CUevent>(S().next_event++);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent e) {
  KC_FAKE_LOCK;
  S().events.erase(reinterpret_cast<uint64_t>(e));
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuEventRecord(CUevent e, CUstream) {
  KC_FAKE_LOCK;
  S().events[reinterpret_cast<uint64_t>(e)] = S().clock;
  Log("event");
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent) {
  KC_FAKE_LOCK;
  return S().sticky;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  KC_FAKE_LOCK;
  auto a = S().events.find(reinterpret_cast<uint64_t>(start));
  auto b = S().events.find(reinterpret_cast<uint64_t>(end));
  if (a == S().events.end() || b == S().events.end()) return CUDA_ERROR_INVALID_HANDLE;
  *ms = static_cast<float>(b->second - a->second);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult r, const char** s) {
  *s = kerncap::replay::fake::ErrorName(r);
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult r, const char** s) {
  *s = r == CUDA_SUCCESS ? "no error" : "fake driver error";
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  KC_FAKE_LOCK;
  uint8_t* from = S().Locate(src, n);
  if (from == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<uint8_t> tmp(from, from + n);
  return Copy(dst, tmp.data(), n, "dtod");
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                                  CUstream) {
  return cuMemcpyDtoD(dst, src, n);
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream) {
  KC_FAKE_LOCK;
  return CopyOut(dst, src, n);
}
KC_FAKE_EXPORT CUresult CUDAAPI cuMemGetInfo(size_t* free_bytes, size_t* total) {
  KC_FAKE_LOCK;
  *free_bytes = S().free_bytes;
  *total = S().total_bytes;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value) {
  KC_FAKE_LOCK;
  if (limit != CU_LIMIT_PERSISTING_L2_CACHE_SIZE) return CUDA_SUCCESS;
  if (!S().persisting_supported) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  S().persisting_limit = value;
  Log("set_limit persisting_l2 " + std::to_string(value));
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuCtxGetLimit(size_t* value, CUlimit limit) {
  KC_FAKE_LOCK;
  if (limit != CU_LIMIT_PERSISTING_L2_CACHE_SIZE) {
    *value = 0;
    return CUDA_SUCCESS;
  }
  if (!S().persisting_supported) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  *value = S().persisting_limit;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuCtxResetPersistingL2Cache(void) {
  KC_FAKE_LOCK;
  if (!S().persisting_supported) return CUDA_ERROR_NOT_SUPPORTED;
  ++S().persisting_resets;
  Log("reset_persisting_l2");
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuStreamSetAttribute(CUstream s, CUstreamAttrID attr,
                                                     const CUstreamAttrValue* value) {
  KC_FAKE_LOCK;
  if (attr == CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW) {
    S().windows[reinterpret_cast<uint64_t>(s)] = value->accessPolicyWindow.num_bytes;
    Log("stream_window " + std::to_string(value->accessPolicyWindow.num_bytes));
  }
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuStreamGetAttribute(CUstream s, CUstreamAttrID attr,
                                                     CUstreamAttrValue* out) {
  KC_FAKE_LOCK;
  std::memset(out, 0, sizeof(*out));
  if (attr == CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW) {
    auto it = S().windows.find(reinterpret_cast<uint64_t>(s));
    out->accessPolicyWindow.num_bytes = it == S().windows.end() ? 0 : it->second;
  }
  return CUDA_SUCCESS;
}

// Texture and surface objects: handles only (the fake's kernels are C++
// functions that do not sample textures; replay_texture_objects_test checks
// the descriptors the replay passes with its own stand-in).
KC_FAKE_EXPORT CUresult CUDAAPI cuTexObjectCreate(CUtexObject* t, const CUDA_RESOURCE_DESC*,
                                                  const CUDA_TEXTURE_DESC*,
                                                  const CUDA_RESOURCE_VIEW_DESC*) {
  static std::atomic<CUtexObject> next{0x1000};
  *t = next++;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuTexObjectDestroy(CUtexObject) { return CUDA_SUCCESS; }
KC_FAKE_EXPORT CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject* t, const CUDA_RESOURCE_DESC*) {
  static std::atomic<CUsurfObject> next{0x2000};
  *t = next++;
  return CUDA_SUCCESS;
}
KC_FAKE_EXPORT CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject) { return CUDA_SUCCESS; }

}  // extern "C"
