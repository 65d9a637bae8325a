// store_ingest_bench: ingest throughput and size of the store on a synthetic
// GPU memory image, against `zstd -1 -T0` on the same bytes.
//
// Image (default 4 GiB, --gib): 25 % zeros, 40 % bf16-like N(0, 0.02) values,
// 15 % exact repeats of earlier bf16 buffers (same weights in two
// allocations), 10 % fp32 ReLU outputs max(0, N(0,1)), 10 % random bytes;
// cut into regions of realistic allocation sizes (2 MiB .. 256 MiB, some
// not chunk multiples), shuffled.
//
// Reports, in one run:
//   1. first ingest: store throughput vs zstd (ratio; target >= 1.0x) and
//      stored bytes vs zstd's output bytes (target <=)
//   2. second ingest of the same image: stored-byte growth (target < 1 %) and
//      throughput relative to the first ingest (target >= 3x)
//   3. read-back throughput (ReadChunkList of every region, checked)
// then prints a table and one JSON line.
//
// --random: the whole image is random bytes (incompressible, nothing to
// dedup): what the store absorbs of a first capture of such memory, commit
// included (the GPU benchmarks' P1d storage reference,
// deploy/gpu/run_benchmarks.sh).
//
// Usage: store_ingest_bench [--gib=4] [--dir=/tmp] [--chunk_kib=1024]
//                           [--workers=0] [--seed=1] [--no_zstd] [--random]
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/log.h"
#include "daemon/store/store.h"
#include "nlohmann/json.hpp"

namespace kerncap::store {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

enum class Kind { kZero, kBf16, kRepeat, kRelu, kRandom };
const char* KindName(Kind k) {
  switch (k) {
    case Kind::kZero:
      return "zeros";
    case Kind::kBf16:
      return "bf16";
    case Kind::kRepeat:
      return "repeat";
    case Kind::kRelu:
      return "relu";
    case Kind::kRandom:
      return "random";
  }
  return "?";
}

struct Region {
  uint64_t va = 0;
  uint64_t offset = 0;  // in the image buffer
  uint64_t size = 0;
  Kind kind = Kind::kZero;
  int repeat_of = -1;
};

struct Xorshift {
  uint64_t s;
  uint64_t Next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};

// 2^16-entry tables of distribution samples; each generated value picks one
// with 16 random bits, so values follow the distribution exactly as well as
// an empirical sample of 65536 draws does.
struct Tables {
  std::vector<uint16_t> bf16;      // N(0, 0.02) as bf16 bit patterns
  std::vector<float> relu_normal;  // N(0, 1)
  Tables() : bf16(65536), relu_normal(65536) {
    std::mt19937_64 rng(12345);
    std::normal_distribution<float> w(0.0f, 0.02f), a(0.0f, 1.0f);
    for (auto& v : bf16) {
      float f = w(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      v = static_cast<uint16_t>(bits >> 16);  // truncate to bf16
    }
    for (auto& v : relu_normal) v = a(rng);
  }
};

void Fill(const Tables& t, const Region& r, char* base, uint64_t seed) {
  char* p = base + r.offset;
  Xorshift x{seed * 0x9E3779B97F4A7C15ull + 1};
  switch (r.kind) {
    case Kind::kZero:
      std::memset(p, 0, r.size);
      break;
    case Kind::kBf16:
      for (uint64_t i = 0; i + 8 <= r.size; i += 8) {
        uint64_t v = x.Next();
        uint16_t out[4];
        for (int j = 0; j < 4; ++j) out[j] = t.bf16[(v >> (16 * j)) & 0xffff];
        std::memcpy(p + i, out, 8);
      }
      break;
    case Kind::kRelu:
      for (uint64_t i = 0; i + 8 <= r.size; i += 8) {
        uint64_t v = x.Next();
        float out[2];
        for (int j = 0; j < 2; ++j) {
          float f = t.relu_normal[(v >> (32 * j)) & 0xffff];
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          // Full-entropy low mantissa bits, as real activations have.
          bits = (bits & ~0xffffu) | ((v >> (32 * j + 16)) & 0xffff);
          std::memcpy(&f, &bits, 4);
          out[j] = f > 0 ? f : 0.0f;
        }
        std::memcpy(p + i, out, 8);
      }
      break;
    case Kind::kRandom:
      for (uint64_t i = 0; i + 8 <= r.size; i += 8) {
        uint64_t v = x.Next();
        std::memcpy(p + i, &v, 8);
      }
      break;
    case Kind::kRepeat:
      break;  // copied after the originals are filled
  }
}

// Builds the region layout: per-kind byte budgets filled with allocations
// of realistic sizes, then shuffled; repeats copy earlier bf16 regions.
std::vector<Region> Layout(uint64_t total, uint64_t seed, bool random_only) {
  std::mt19937_64 rng(seed);
  const std::vector<uint64_t> sizes = {
      2ull << 20,  4ull << 20,  (3ull << 20) + 4096, 8ull << 20,   16ull << 20,
      32ull << 20, 64ull << 20, (96ull << 20) + 512, 128ull << 20, 256ull << 20};
  struct Budget {
    Kind kind;
    double share;
  };
  std::vector<Region> regions;
  std::vector<int> bf16_regions;
  const std::vector<Budget> budgets =
      random_only ? std::vector<Budget>{{Kind::kRandom, 1.0}}
                  : std::vector<Budget>{{Kind::kZero, 0.25},
                                        {Kind::kBf16, 0.40},
                                        {Kind::kRelu, 0.10},
                                        {Kind::kRandom, 0.10}};
  for (Budget b : budgets) {
    uint64_t left = static_cast<uint64_t>(b.share * static_cast<double>(total));
    while (left > 0) {
      uint64_t s = std::min(left, sizes[rng() % sizes.size()]);
      if (left - s < (1 << 20)) s = left;  // no crumbs
      Region r;
      r.kind = b.kind;
      r.size = s;
      if (b.kind == Kind::kBf16) bf16_regions.push_back(static_cast<int>(regions.size()));
      regions.push_back(r);
      left -= s;
    }
  }
  // 15 %: whole-buffer repeats of earlier bf16 regions.
  uint64_t left = random_only ? 0 : static_cast<uint64_t>(0.15 * static_cast<double>(total));
  std::shuffle(bf16_regions.begin(), bf16_regions.end(), rng);
  for (size_t i = 0; left > 0 && !bf16_regions.empty(); i = (i + 1) % bf16_regions.size()) {
    const Region& src = regions[bf16_regions[i]];
    if (src.size > left) {
      if (i + 1 == bf16_regions.size()) break;
      continue;
    }
    Region r;
    r.kind = Kind::kRepeat;
    r.size = src.size;
    r.repeat_of = bf16_regions[i];
    regions.push_back(r);
    left -= src.size;
  }
  // Shuffle, keeping each repeat after its original.
  std::vector<size_t> order(regions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<size_t> pos(regions.size());
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = i;
  for (size_t i = 0; i < regions.size(); ++i) {
    if (regions[i].kind == Kind::kRepeat && pos[i] < pos[regions[i].repeat_of]) {
      std::swap(order[pos[i]], order[pos[regions[i].repeat_of]]);
      std::swap(pos[i], pos[regions[i].repeat_of]);
    }
  }
  std::vector<Region> out;
  std::vector<int> new_index(regions.size());
  for (size_t i : order) {
    new_index[i] = static_cast<int>(out.size());
    out.push_back(regions[i]);
  }
  uint64_t off = 0, va = 0x7f0000000000ull;
  for (Region& r : out) {
    if (r.repeat_of >= 0) r.repeat_of = new_index[r.repeat_of];
    r.offset = off;
    r.va = va;
    off += r.size;
    va += (r.size + (2 << 20) - 1) / (2 << 20) * (2 << 20) + (2 << 20);
  }
  return out;
}

// Bytes of every file in the store directory: packs, manifests, refs and
// catalog, so growth on re-ingest counts the metadata a capture costs.
uint64_t DirBytes(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) n += it->file_size(ec);
  }
  return n;
}

struct ZstdResult {
  double seconds = 0;
  uint64_t out_bytes = 0;
  bool ok = false;
};

// Pipes the image through `zstd -1 -T0 -c` and counts its output.
ZstdResult RunZstd(const char* data, uint64_t size) {
  ZstdResult res;
  int in_pipe[2], out_pipe[2];
  if (::pipe(in_pipe) != 0 || ::pipe(out_pipe) != 0) return res;
  const auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in_pipe[0], 0);
    ::dup2(out_pipe[1], 1);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) ::close(fd);
    ::execlp("zstd", "zstd", "-1", "-T0", "-q", "-c", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  std::thread writer([&] {
    uint64_t off = 0;
    while (off < size) {
      ssize_t n = ::write(in_pipe[1], data + off, std::min<uint64_t>(size - off, 1 << 20));
      if (n <= 0) break;
      off += static_cast<uint64_t>(n);
    }
    ::close(in_pipe[1]);
  });
  std::vector<char> buf(1 << 20);
  while (true) {
    ssize_t n = ::read(out_pipe[0], buf.data(), buf.size());
    if (n <= 0) break;
    res.out_bytes += static_cast<uint64_t>(n);
  }
  writer.join();
  ::close(out_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  res.seconds = Seconds(start, Clock::now());
  res.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return res;
}

double CpuSeconds() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return tv(ru.ru_utime) + tv(ru.ru_stime);
}

struct IngestResult {
  double seconds = 0;
  double cpu_seconds = 0;  // user + sys of this process during the ingest
  std::string id;
  v1::CaptureStats stats;
};

IngestResult Ingest(Store& store, const std::vector<Region>& regions, const char* base) {
  IngestResult r;
  const double cpu0 = CpuSeconds();
  const auto start = Clock::now();
  auto ingest = store.BeginCapture();
  if (!ingest.ok()) {
    std::fprintf(stderr, "BeginCapture: %s\n", ingest.status().ToString().c_str());
    std::exit(1);
  }
  for (const Region& reg : regions) {
    v1::Region pr;
    pr.set_va(reg.va);
    pr.set_kind(v1::REGION_DEVICE);
    pr.mutable_data()->set_size(reg.size);
    auto h = (*ingest)->AddRegion(ImageKind::kPre, pr);
    absl::Status st = h.status();
    if (st.ok()) st = (*ingest)->WriteRegion(*h, 0, base + reg.offset, reg.size, nullptr);
    if (!st.ok()) {
      std::fprintf(stderr, "ingest: %s\n", st.ToString().c_str());
      std::exit(1);
    }
  }
  v1::CaptureManifest m;
  m.mutable_kernel()->set_mangled_name("bench_kernel");
  auto id = (*ingest)->Commit(std::move(m));
  if (!id.ok()) {
    std::fprintf(stderr, "commit: %s\n", id.status().ToString().c_str());
    std::exit(1);
  }
  r.seconds = Seconds(start, Clock::now());
  r.cpu_seconds = CpuSeconds() - cpu0;
  r.id = *id;
  r.stats = store.GetManifest(*id)->stats();
  return r;
}

int Main(int argc, char** argv) {
  double gib = 4;
  std::string dir_root = std::filesystem::temp_directory_path().string();
  uint32_t chunk_kib = 1024;
  int workers = 0;
  uint64_t seed = 1;
  bool run_zstd = true;
  bool random_only = false;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    auto val = [&](absl::string_view flag) -> absl::string_view { return a.substr(flag.size()); };
    if (a.rfind("--gib=", 0) == 0) {
      if (!absl::SimpleAtod(val("--gib="), &gib) || gib <= 0) return 2;
    } else if (a.rfind("--dir=", 0) == 0) {
      dir_root = std::string(val("--dir="));
    } else if (a.rfind("--chunk_kib=", 0) == 0) {
      if (!absl::SimpleAtoi(val("--chunk_kib="), &chunk_kib)) return 2;
    } else if (a.rfind("--workers=", 0) == 0) {
      if (!absl::SimpleAtoi(val("--workers="), &workers)) return 2;
    } else if (a.rfind("--seed=", 0) == 0) {
      if (!absl::SimpleAtoi(val("--seed="), &seed)) return 2;
    } else if (a == "--no_zstd") {
      run_zstd = false;
    } else if (a == "--random") {
      random_only = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--gib=4] [--dir=/tmp] [--chunk_kib=1024] [--workers=0] "
                   "[--seed=1] [--no_zstd] [--random]\n",
                   argv[0]);
      return 2;
    }
  }
  log::SetMinLevel(log::Level::kWarn);
  const uint64_t total = static_cast<uint64_t>(gib * static_cast<double>(1ull << 30));

  // ---- build the image ----
  auto t0 = Clock::now();
  std::vector<Region> regions = Layout(total, seed, random_only);
  uint64_t image_size = 0;
  for (const Region& r : regions) image_size += r.size;
  std::unique_ptr<char[]> image(new char[image_size]);
  {
    Tables tables;
    const unsigned nthreads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> threads;
    std::atomic<size_t> next{0};
    for (unsigned t = 0; t < nthreads; ++t) {
      threads.emplace_back([&] {
        for (size_t i; (i = next.fetch_add(1)) < regions.size();) {
          Fill(tables, regions[i], image.get(), seed * 1000003 + i);
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const Region& r : regions) {
      if (r.kind == Kind::kRepeat) {
        std::memcpy(image.get() + r.offset, image.get() + regions[r.repeat_of].offset, r.size);
      }
    }
  }
  uint64_t by_kind[5] = {};
  for (const Region& r : regions) by_kind[static_cast<int>(r.kind)] += r.size;
  std::printf("image: %.2f GiB in %zu regions (", static_cast<double>(image_size) / (1 << 30),
              regions.size());
  for (int k = 0; k < 5; ++k) {
    std::printf("%s%s %.0f%%", k ? ", " : "", KindName(static_cast<Kind>(k)),
                100.0 * static_cast<double>(by_kind[k]) / static_cast<double>(image_size));
  }
  std::printf("), built in %.1f s; %u CPUs\n", Seconds(t0, Clock::now()),
              std::thread::hardware_concurrency());
  std::fflush(stdout);

  // ---- zstd baseline ----
  ZstdResult z;
  if (run_zstd) {
    z = RunZstd(image.get(), image_size);
    if (!z.ok) std::fprintf(stderr, "warning: zstd subprocess failed\n");
  }

  // ---- store ----
  std::string tmpl = dir_root + "/kc-bench-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  StoreOptions opts;
  opts.dir = dir + "/store";
  opts.chunk_size = chunk_kib << 10;
  opts.workers = workers;
  auto store = Store::Open(opts);
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().ToString().c_str());
    return 1;
  }
  IngestResult first = Ingest(**store, regions, image.get());
  const uint64_t stored1 = DirBytes(opts.dir);
  IngestResult second = Ingest(**store, regions, image.get());
  const uint64_t stored2 = DirBytes(opts.dir);

  // ---- read back ----
  uint64_t max_region = 0;
  for (const Region& r : regions) max_region = std::max(max_region, r.size);
  std::unique_ptr<char[]> out(new char[max_region]);
  auto manifest = (*store)->GetManifest(first.id);
  bool readback_ok = manifest.ok();
  double read_seconds = 0;
  for (int i = 0; readback_ok && i < manifest->pre().regions_size(); ++i) {
    const auto& list = manifest->pre().regions(i).data();
    auto rs = Clock::now();
    absl::Status st = (*store)->ReadChunkList(list, out.get(), list.size());
    read_seconds += Seconds(rs, Clock::now());
    if (!st.ok() || std::memcmp(out.get(), image.get() + regions[i].offset, list.size()) != 0) {
      std::fprintf(stderr, "read-back mismatch in region %d: %s\n", i, st.ToString().c_str());
      readback_ok = false;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);

  // ---- report ----
  const double gb = static_cast<double>(image_size) / 1e9;
  const double store_gbs = gb / first.seconds;
  const double zstd_gbs = z.ok ? gb / z.seconds : 0;
  const double speed_ratio = z.ok ? store_gbs / zstd_gbs : 0;
  const double growth = static_cast<double>(stored2 - stored1) / static_cast<double>(stored1);
  const double second_ratio = first.seconds / second.seconds;
  const double read_gbs = gb / read_seconds;
  auto pass = [](bool b) { return b ? "PASS" : "FAIL"; };
  std::printf("\n%-34s %14s %14s %10s\n", "measure", "value", "target", "result");
  std::printf("%-34s %11.3f GB/s %14s %10s\n", "store ingest #1 throughput", store_gbs, "", "");
  if (z.ok) {
    std::printf("%-34s %11.3f GB/s %14s %10s\n", "zstd -1 -T0 throughput", zstd_gbs, "", "");
    std::printf("%-34s %13.2fx %14s %10s\n", "store / zstd throughput", speed_ratio, ">= 1.0x",
                pass(speed_ratio >= 1.0));
    std::printf("%-34s %11.1f MiB %14s %10s\n", "zstd output", z.out_bytes / 1048576.0, "", "");
  }
  std::printf("%-34s %11.1f MiB %14s %10s\n", "store bytes on disk (all files)",
              stored1 / 1048576.0, z.ok ? "<= zstd" : "", z.ok ? pass(stored1 <= z.out_bytes) : "");
  std::printf("%-34s %13.2fx %14s %10s\n", "store compression (logical/stored)",
              static_cast<double>(image_size) / static_cast<double>(stored1), "", "");
  std::printf("%-34s %11.3f GB/s %14s %10s\n", "store ingest #2 throughput", gb / second.seconds,
              "", "");
  std::printf("%-34s %13.2fx %14s %10s\n", "ingest #2 / #1 speed", second_ratio, ">= 3x",
              pass(second_ratio >= 3.0));
  std::printf("%-34s %12.4f%% %14s %10s\n", "stored-byte growth on #2", 100 * growth, "< 1%",
              pass(growth < 0.01));
  std::printf("%-34s %11.3f GB/s %14s %10s\n", "read-back throughput", read_gbs, "",
              readback_ok ? "verified" : "MISMATCH");
  std::printf("ingest #1 used %.2f CPU cores on average (%.1f s CPU in %.1f s)\n",
              first.cpu_seconds / first.seconds, first.cpu_seconds, first.seconds);
  std::printf(
      "ingest #1 stats: zero %.1f MiB, new raw %.1f MiB, new stored %.1f MiB, dedup %.1f "
      "MiB, %llu chunks, %.2f s\n",
      first.stats.zero_bytes() / 1048576.0, first.stats.new_raw_bytes() / 1048576.0,
      first.stats.new_stored_bytes() / 1048576.0, first.stats.dedup_bytes() / 1048576.0,
      static_cast<unsigned long long>(first.stats.chunk_count()), first.seconds);

  nlohmann::json j = {
      {"bench", "store_ingest"},
      {"image_bytes", image_size},
      {"regions", regions.size()},
      {"chunk_size", opts.chunk_size},
      {"cpus", std::thread::hardware_concurrency()},
      {"store_ingest1_gbps", store_gbs},
      {"store_ingest1_seconds", first.seconds},
      {"store_ingest1_cpu_cores", first.cpu_seconds / first.seconds},
      {"store_stored_bytes", stored1},
      {"zstd_gbps", zstd_gbs},
      {"zstd_seconds", z.seconds},
      {"zstd_out_bytes", z.out_bytes},
      {"throughput_ratio_vs_zstd", speed_ratio},
      {"store_ingest2_gbps", gb / second.seconds},
      {"ingest2_speedup", second_ratio},
      {"stored_growth_fraction", growth},
      {"readback_gbps", read_gbs},
      {"readback_ok", readback_ok},
  };
  std::printf("%s\n", j.dump().c_str());
  return readback_ok ? 0 : 1;
}

}  // namespace
}  // namespace kerncap::store

int main(int argc, char** argv) { return kerncap::store::Main(argc, argv); }
