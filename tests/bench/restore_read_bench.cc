// restore_read_bench: the CPU side of benchmark target P8 (replay restore
// throughput). It measures how fast CaptureSource delivers a .kcap file's
// chunk bytes into caller memory (what kerncap-replay's restore workers do
// into pinned staging), against the same threads doing plain memcpy of the
// same number of bytes: no restore can beat memory bandwidth, so the ratio
// says how much of it the read path leaves on the table.
//
// The file (default 1 GiB, --gib) holds 1 MiB chunks (--chunk_kib) of one
// region: --compressible_pct (default 25) % of them bf16-like N(0, 0.02)
// values, stored zstd -1 as the store does; the rest random bytes, stored raw
// (zstd does not pay on them). It is written next to --dir and stays in the
// page cache, so the figures are of the read path, not of the disk.
//
// The same chunks are also ingested into a kerncap store (daemon/store, the
// store's own zstd decision) next to the file, and read back through
// CaptureSource::OpenStore, the read-only path kerncap-replay takes on the
// daemon's host (--daemon / --store): "store" rows beside the "kcap" rows
// (--no_store skips it).
//
// Reports:
//   open     CaptureSource::OpenKcap / OpenStore wall time (index build;
//            pack trailers for the store)
//   read     --threads (default: hardware threads) workers take chunks in file
//            order from a shared counter and ReadChunkInto a per-thread 8 MiB
//            staging ring (as the restore pipeline does); best of --passes
//            (default 3) after one warm-up pass; also for the raw and the zstd
//            chunks alone
//   memcpy   the same threads copy the same bytes, chunk-sized, from the page
//            cache (the .kcap file mapped) into the same staging rings
//   ratio    read / memcpy
// each as wall-clock throughput and as bytes per CPU-second (user + system
// time of all threads: what the code costs, steadier than the wall time on a
// machine shared with other work); then checks every chunk read against the XXH3 of what was written, prints a
// table and one line "BENCH_JSON {...}".
//
// Usage: restore_read_bench [--gib=1] [--dir=/tmp] [--chunk_kib=1024]
//                           [--compressible_pct=25] [--threads=0] [--passes=3]
//                           [--seed=1] [--verify_digests] [--no_store]
#include <sys/mman.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "format/kcap_file.h"
#include "common/digest.h"
#include "daemon/store/store.h"
#include "nlohmann/json.hpp"
#include "reproducer/replay/core/capture_source.h"

namespace kerncap::replay {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kStagingBytes = 8u << 20;  // per thread, like a restore slot

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Options {
  double gib = 1;
  std::string dir = std::filesystem::temp_directory_path().string();
  uint32_t chunk_kib = 1024;
  int compressible_pct = 25;
  int threads = 0;
  int passes = 3;
  uint64_t seed = 1;
  bool verify_digests = false;
  bool store = true;  // also measure the store path
};

// One chunk of the file as the benchmark knows it.
struct ChunkInfo {
  std::string digest;    // SHA-256, raw bytes
  uint32_t size = 0;
  uint64_t xxh3 = 0;     // of the raw bytes (read-back check)
  bool compressible = false;
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

void FillRandom(char* p, size_t n, uint64_t seed) {
  Xorshift x{seed * 0x9E3779B97F4A7C15ull + 1};
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = x.Next();
    std::memcpy(p + i, &v, std::min<size_t>(8, n - i));
  }
}

// bf16 bit patterns of N(0, 0.02): typical weights, zstd -1 saves ~25 %.
void FillBf16(const std::vector<uint16_t>& table, char* p, size_t n, uint64_t seed) {
  Xorshift x{seed * 0x9E3779B97F4A7C15ull + 7};
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = x.Next();
    uint16_t out[4];
    for (int j = 0; j < 4; ++j) out[j] = table[(v >> (16 * j)) & 0xffff];
    std::memcpy(p + i, out, 8);
  }
}

std::vector<uint16_t> Bf16Table() {
  std::vector<uint16_t> t(65536);
  std::mt19937_64 rng(12345);
  std::normal_distribution<float> w(0.0f, 0.02f);
  for (auto& v : t) {
    const float f = w(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    v = static_cast<uint16_t>(bits >> 16);
  }
  return t;
}

// The raw bytes of a chunk; sets its digest and check hash.
std::string MakeRaw(const std::vector<uint16_t>& table, ChunkInfo* info, uint64_t seed) {
  std::string raw(info->size, '\0');
  if (info->compressible) {
    FillBf16(table, raw.data(), raw.size(), seed);
  } else {
    FillRandom(raw.data(), raw.size(), seed);
  }
  info->digest = Sha256(raw).ToBytes();
  info->xxh3 = Xxh3(raw.data(), raw.size());
  return raw;
}

// The chunk's record: zstd -1 when that pays, as the store decides, else raw.
v1::TransferFrame ChunkFrame(const ChunkInfo& info, std::string raw) {
  v1::TransferFrame f;
  v1::TransferChunk* c = f.mutable_chunk();
  c->set_digest(info.digest);
  c->set_raw_size(info.size);
  c->set_codec(v1::CODEC_RAW);
  if (info.compressible) {
    std::string z(ZSTD_compressBound(raw.size()), '\0');
    const size_t n = ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), 1);
    if (!ZSTD_isError(n) && n < raw.size()) {
      z.resize(n);
      c->set_codec(v1::CODEC_ZSTD);
      c->set_data(std::move(z));
      return f;
    }
  }
  c->set_data(std::move(raw));
  return f;
}

// Runs fn(i) for i in [0, n) on `threads` threads (dynamic distribution).
void ParallelFor(int threads, size_t n, const std::function<void(int thread, size_t i)>& fn) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(t, i);
    });
  }
  for (auto& th : pool) th.join();
}

// The chunk list of the file: sizes and which chunks are compressible.
std::vector<ChunkInfo> PlanChunks(const Options& o) {
  const uint64_t chunk = uint64_t{o.chunk_kib} << 10;
  const uint64_t total =
      std::max<uint64_t>(1, static_cast<uint64_t>(o.gib * static_cast<double>(1ull << 30)));
  const uint64_t n = (total + chunk - 1) / chunk;
  std::vector<ChunkInfo> chunks(n);
  std::mt19937_64 pick(o.seed);
  for (uint64_t i = 0; i < n; ++i) {
    chunks[i].size = static_cast<uint32_t>(std::min(chunk, total - i * chunk));
    chunks[i].compressible = static_cast<int>(pick() % 100) < o.compressible_pct;
  }
  return chunks;
}

v1::TransferFrame ManifestFrame(const std::vector<ChunkInfo>& chunks, uint32_t chunk_size) {
  v1::TransferFrame f;
  v1::CaptureManifest* m = f.mutable_manifest();
  m->set_capture_id("cap-restore-read-bench");
  v1::Region* r = m->mutable_pre()->add_regions();
  r->set_va(0x7f0000000000);
  r->set_kind(v1::REGION_DEVICE);
  uint64_t size = 0;
  for (const ChunkInfo& c : chunks) {
    size += c.size;
    r->mutable_data()->add_chunk_digests(c.digest);
  }
  r->mutable_data()->set_size(size);
  r->mutable_data()->set_chunk_size(chunk_size);
  f.set_chunks_total(chunks.size());
  return f;
}

// Writes the .kcap. The manifest record comes first and needs every digest,
// so the chunks are generated twice (deterministically, in parallel
// batches): once for their digests, once for their records; memory stays at
// one batch.
absl::Status WriteCapture(const std::string& path, const Options& o,
                          std::vector<ChunkInfo>* chunks, uint64_t* file_bytes) {
  *chunks = PlanChunks(o);
  const size_t n = chunks->size();
  const std::vector<uint16_t> table = Bf16Table();
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  auto seed = [&](size_t i) { return o.seed * 1000003 + i; };
  ParallelFor(threads, n, [&](int, size_t i) { MakeRaw(table, &(*chunks)[i], seed(i)); });

  auto writer = kcap::KcapWriter::Create(path);
  if (!writer.ok()) return writer.status();
  if (absl::Status s = (*writer)->Append(ManifestFrame(*chunks, o.chunk_kib << 10)); !s.ok()) {
    return s;
  }
  const size_t batch = static_cast<size_t>(threads) * 4;
  std::vector<v1::TransferFrame> frames;
  for (size_t b = 0; b < n; b += batch) {
    frames.assign(std::min(batch, n - b), v1::TransferFrame{});
    ParallelFor(threads, frames.size(), [&](int, size_t k) {
      ChunkInfo again = (*chunks)[b + k];
      frames[k] = ChunkFrame(again, MakeRaw(table, &again, seed(b + k)));
    });
    for (const v1::TransferFrame& f : frames) {
      if (absl::Status s = (*writer)->Append(f); !s.ok()) return s;
    }
  }
  *file_bytes = (*writer)->bytes_written() + kcap::kKcapTrailerBytes;
  return (*writer)->Finish();
}

// Ingests the same chunks (regenerated) into a new store at `store_dir` as
// one capture of one region, the way kerncapd does; returns its id.
absl::StatusOr<std::string> WriteStore(const std::string& store_dir, const Options& o,
                                       const std::vector<ChunkInfo>& chunks) {
  store::StoreOptions so;
  so.dir = store_dir;
  so.chunk_size = o.chunk_kib << 10;
  auto st = store::Store::Open(so);
  if (!st.ok()) return st.status();
  auto ingest = (*st)->BeginCapture();
  if (!ingest.ok()) return ingest.status();
  uint64_t total = 0;
  for (const ChunkInfo& c : chunks) total += c.size;
  v1::Region region;
  region.set_va(0x7f0000000000);
  region.set_kind(v1::REGION_DEVICE);
  region.mutable_data()->set_size(total);
  auto h = (*ingest)->AddRegion(ImageKind::kPre, region);
  if (!h.ok()) return h.status();
  const std::vector<uint16_t> table = Bf16Table();
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const size_t batch = static_cast<size_t>(threads) * 4;
  const uint64_t chunk = uint64_t{o.chunk_kib} << 10;
  for (size_t b = 0; b < chunks.size(); b += batch) {
    std::vector<std::shared_ptr<std::string>> raw(std::min(batch, chunks.size() - b));
    ParallelFor(threads, raw.size(), [&](int, size_t k) {
      ChunkInfo again = chunks[b + k];
      raw[k] = std::make_shared<std::string>(MakeRaw(table, &again, o.seed * 1000003 + b + k));
    });
    for (size_t k = 0; k < raw.size(); ++k) {
      std::shared_ptr<std::string> bytes = raw[k];  // kept alive until consumed
      absl::Status s = (*ingest)->WriteRegion(*h, (b + k) * chunk, bytes->data(), bytes->size(),
                                              [bytes] {});
      if (!s.ok()) return s;
    }
  }
  v1::CaptureManifest m;
  m.mutable_kernel()->set_mangled_name("_Z17restore_read_benchv");
  return (*ingest)->Commit(std::move(m));
}

// Per-thread destination memory: an 8 MiB ring the chunks land in one after
// the other, like a staging slot of the restore pipeline.
struct Staging {
  explicit Staging(int threads) : rings(static_cast<size_t>(threads)), cursor(rings.size(), 0) {
    for (auto& r : rings) {
      r.reset(new char[kStagingBytes]);
      std::memset(r.get(), 0, kStagingBytes);  // fault the pages in now
    }
  }
  char* Next(int thread, uint32_t size) {
    size_t& c = cursor[static_cast<size_t>(thread)];
    if (c + size > kStagingBytes) c = 0;
    char* p = rings[static_cast<size_t>(thread)].get() + c;
    c += size;
    return p;
  }
  std::vector<std::unique_ptr<char[]>> rings;
  std::vector<size_t> cursor;
};

// A pass's wall time and the CPU time (user + system, all threads) it took.
// Under contention from other work the wall time varies; the CPU time per
// byte says what the code costs.
struct Timing {
  double wall = -1;  // negative: the pass failed
  double cpu = 0;
};

double CpuSeconds() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const struct timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

// Times fn(thread, k) for k in [0, n) on `threads` threads.
Timing TimeParallel(int threads, size_t n, const std::function<void(int, size_t)>& fn) {
  const double c0 = CpuSeconds();
  const auto t0 = Clock::now();
  ParallelFor(threads, n, fn);
  return Timing{Seconds(t0, Clock::now()), CpuSeconds() - c0};
}

// One pass of ReadChunkInto over `which` chunks; prints the first error.
Timing ReadPass(const CaptureSource& src, const std::vector<ChunkInfo>& chunks,
                const std::vector<size_t>& which, int threads, Staging* staging) {
  std::atomic<bool> failed{false};
  Timing t = TimeParallel(threads, which.size(), [&](int t, size_t k) {
    const ChunkInfo& c = chunks[which[k]];
    absl::Status s = src.ReadChunkInto(c.digest, c.size, staging->Next(t, c.size));
    if (!s.ok() && !failed.exchange(true)) std::fprintf(stderr, "read: %s\n", s.ToString().c_str());
  });
  if (failed) t.wall = -1;
  return t;
}

// One pass of memcpy of the same sizes from the mapped file.
Timing MemcpyPass(const char* src, uint64_t src_bytes, const std::vector<ChunkInfo>& chunks,
                  const std::vector<size_t>& which, int threads, Staging* staging) {
  return TimeParallel(threads, which.size(), [&](int t, size_t k) {
    const ChunkInfo& c = chunks[which[k]];
    const uint64_t span = src_bytes > c.size ? src_bytes - c.size : 1;
    const uint64_t off = (static_cast<uint64_t>(which[k]) * c.size) % span;
    std::memcpy(staging->Next(t, c.size), src + off, c.size);
  });
}

// The shortest wall time and the least CPU time of `passes` passes, after
// one warm-up pass; wall -1 if any pass failed.
Timing Best(int passes, const std::function<Timing()>& pass) {
  if (pass().wall < 0) return Timing{};
  Timing best;
  for (int i = 0; i < passes; ++i) {
    const Timing t = pass();
    if (t.wall < 0) return Timing{};
    if (i == 0 || t.wall < best.wall) best.wall = t.wall;
    if (i == 0 || t.cpu < best.cpu) best.cpu = t.cpu;
  }
  return best;
}

uint64_t BytesOf(const std::vector<ChunkInfo>& chunks, const std::vector<size_t>& which) {
  uint64_t b = 0;
  for (size_t i : which) b += chunks[i].size;
  return b;
}

// Reads every chunk once more and compares it with what was written.
bool CheckAll(const CaptureSource& src, const std::vector<ChunkInfo>& chunks, int threads) {
  std::atomic<bool> ok{true};
  std::vector<std::string> bufs(static_cast<size_t>(threads));
  ParallelFor(threads, chunks.size(), [&](int t, size_t i) {
    std::string& b = bufs[static_cast<size_t>(t)];
    if (!src.ReadChunk(chunks[i].digest, chunks[i].size, &b).ok() ||
        Xxh3(b.data(), b.size()) != chunks[i].xxh3) {
      ok = false;
    }
  });
  return ok;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    auto val = [&](absl::string_view flag) { return a.substr(flag.size()); };
    bool ok = true;
    if (a.rfind("--gib=", 0) == 0) {
      ok = absl::SimpleAtod(val("--gib="), &o->gib) && o->gib > 0;
    } else if (a.rfind("--dir=", 0) == 0) {
      o->dir = std::string(val("--dir="));
    } else if (a.rfind("--chunk_kib=", 0) == 0) {
      ok = absl::SimpleAtoi(val("--chunk_kib="), &o->chunk_kib) && o->chunk_kib > 0 &&
           o->chunk_kib <= 4096;
    } else if (a.rfind("--compressible_pct=", 0) == 0) {
      ok = absl::SimpleAtoi(val("--compressible_pct="), &o->compressible_pct) &&
           o->compressible_pct >= 0 && o->compressible_pct <= 100;
    } else if (a.rfind("--threads=", 0) == 0) {
      ok = absl::SimpleAtoi(val("--threads="), &o->threads) && o->threads >= 0;
    } else if (a.rfind("--passes=", 0) == 0) {
      ok = absl::SimpleAtoi(val("--passes="), &o->passes) && o->passes > 0;
    } else if (a.rfind("--seed=", 0) == 0) {
      ok = absl::SimpleAtoi(val("--seed="), &o->seed);
    } else if (a == "--verify_digests") {
      o->verify_digests = true;
    } else if (a == "--no_store") {
      o->store = false;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: %s [--gib=1] [--dir=/tmp] [--chunk_kib=1024] [--compressible_pct=25] "
                   "[--threads=0] [--passes=3] [--seed=1] [--verify_digests] [--no_store]\n",
                   argv[0]);
      return false;
    }
  }
  return true;
}

// A read-only mapping of the whole file, its pages faulted in.
struct Mapping {
  const char* data = nullptr;
  uint64_t size = 0;
  ~Mapping() {
    if (data != nullptr) ::munmap(const_cast<char*>(data), size);
  }
};

bool MapFile(const std::string& path, Mapping* m) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  m->size = std::filesystem::file_size(path);
  void* p = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return false;
  m->data = static_cast<const char*>(p);
  return true;
}

int Main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return 2;
  const int threads =
      o.threads > 0 ? o.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const std::string path =
      (std::filesystem::path(o.dir) / absl::StrCat("restore_read_bench_", ::getpid(), ".kcap"))
          .string();

  // ---- write ----
  auto t0 = Clock::now();
  std::vector<ChunkInfo> chunks;
  uint64_t file_bytes = 0;
  if (absl::Status s = WriteCapture(path, o, &chunks, &file_bytes); !s.ok()) {
    std::fprintf(stderr, "write: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<size_t> all, raw, zstd;
  for (size_t i = 0; i < chunks.size(); ++i) {
    all.push_back(i);
    (chunks[i].compressible ? zstd : raw).push_back(i);
  }
  const uint64_t total = BytesOf(chunks, all);
  std::printf("file: %.2f GiB of chunk bytes in %zu chunks (%zu random/raw, %zu bf16/zstd), "
              "%.2f GiB on disk, written in %.1f s; %d threads, %u CPUs\n",
              static_cast<double>(total) / (1 << 30), chunks.size(), raw.size(), zstd.size(),
              static_cast<double>(file_bytes) / (1 << 30), Seconds(t0, Clock::now()), threads,
              std::thread::hardware_concurrency());

  // ---- store (same chunks, kerncapd's ingest) ----
  const std::string store_dir =
      (std::filesystem::path(o.dir) / absl::StrCat("restore_read_bench_", ::getpid(), ".store"))
          .string();
  std::string store_id;
  if (o.store) {
    t0 = Clock::now();
    auto id = WriteStore(store_dir, o, chunks);
    if (!id.ok()) {
      std::fprintf(stderr, "store ingest: %s\n", id.status().ToString().c_str());
      std::filesystem::remove(path);
      std::filesystem::remove_all(store_dir);
      return 1;
    }
    store_id = *id;
    std::printf("store: %s ingested in %.1f s\n", store_id.c_str(), Seconds(t0, Clock::now()));
  }
  auto cleanup = [&] {
    std::filesystem::remove(path);
    if (o.store) std::filesystem::remove_all(store_dir);
  };

  // ---- open ----
  struct Measured {
    std::string name;
    double open_s = 0;
    Timing all, raw, zstd;
    bool ok = false;
  };
  Staging staging(threads);
  auto measure = [&](const std::string& name,
                     const std::function<absl::StatusOr<std::unique_ptr<CaptureSource>>()>& open) {
    Measured m;
    m.name = name;
    const auto start = Clock::now();
    auto src = open();
    m.open_s = Seconds(start, Clock::now());
    if (!src.ok()) {
      std::fprintf(stderr, "%s open: %s\n", name.c_str(), src.status().ToString().c_str());
      return m;
    }
    (*src)->set_verify_content_digests(o.verify_digests);
    auto read = [&](const std::vector<size_t>& which) {
      if (which.empty()) return Timing{0, 0};
      return Best(o.passes, [&] { return ReadPass(**src, chunks, which, threads, &staging); });
    };
    m.all = read(all);
    m.raw = read(raw);
    m.zstd = read(zstd);
    m.ok = m.all.wall > 0 && m.raw.wall >= 0 && m.zstd.wall >= 0 &&
           CheckAll(**src, chunks, threads);
    return m;
  };
  std::vector<Measured> sources;
  sources.push_back(measure("kcap", [&] { return CaptureSource::OpenKcap(path, false); }));
  if (o.store) {
    sources.push_back(measure("store", [&] { return CaptureSource::OpenStore(store_dir, store_id); }));
  }

  // ---- memcpy baseline ----
  Mapping map;
  if (!MapFile(path, &map)) {
    std::fprintf(stderr, "mmap %s failed\n", path.c_str());
    cleanup();
    return 1;
  }
  const Timing copy = Best(o.passes, [&] {
    return MemcpyPass(map.data, map.size, chunks, all, threads, &staging);
  });
  cleanup();

  auto gbs = [](uint64_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / s / 1e9 : 0; };
  const uint64_t raw_bytes = BytesOf(chunks, raw), zstd_bytes = BytesOf(chunks, zstd);
  std::printf("\n%-36s %12s %16s\n", "measure", "wall", "per CPU-second");
  auto row = [&](const std::string& what, uint64_t bytes, const Timing& t) {
    std::printf("%-36s %7.2f GB/s %11.2f GB/s\n", what.c_str(), gbs(bytes, t.wall),
                gbs(bytes, t.cpu));
  };
  bool ok = true;
  for (const Measured& m : sources) {
    std::printf("%-36s %9.1f ms\n", (m.name + ": open (index build)").c_str(), m.open_s * 1e3);
    row(m.name + ": ReadChunkInto, all chunks", total, m.all);
    row(m.name + ": ReadChunkInto, raw chunks", raw_bytes, m.raw);
    row(m.name + ": ReadChunkInto, zstd chunks", zstd_bytes, m.zstd);
    const double ratio = copy.wall > 0 && m.all.wall > 0 ? copy.wall / m.all.wall : 0;
    const double cpu_ratio = copy.cpu > 0 && m.all.cpu > 0 ? copy.cpu / m.all.cpu : 0;
    std::printf("%-36s %11.2fx %15.2fx\n", (m.name + ": read / memcpy").c_str(), ratio, cpu_ratio);
    std::printf("%-36s %12s\n", (m.name + ": read-back check").c_str(),
                m.ok ? "verified" : "FAILED");
    ok = ok && m.ok;
  }
  row("memcpy baseline (page cache)", total, copy);

  nlohmann::json j = {
      {"bench", "restore_read"},
      {"chunk_bytes", total},
      {"file_bytes", file_bytes},
      {"chunks", chunks.size()},
      {"raw_chunks", raw.size()},
      {"zstd_chunks", zstd.size()},
      {"threads", threads},
      {"cpus", std::thread::hardware_concurrency()},
      {"verify_digests", o.verify_digests},
      {"memcpy_gbps", gbs(total, copy.wall)},
      {"memcpy_gbps_per_cpu_s", gbs(total, copy.cpu)},
      {"ok", ok},
  };
  for (const Measured& m : sources) {
    // The .kcap keys keep their old names; the store's are prefixed "store_".
    const std::string p = m.name == "kcap" ? "" : m.name + "_";
    j[p + "open_ms"] = m.open_s * 1e3;
    j[p + "read_gbps"] = gbs(total, m.all.wall);
    j[p + "read_raw_gbps"] = gbs(raw_bytes, m.raw.wall);
    j[p + "read_zstd_gbps"] = gbs(zstd_bytes, m.zstd.wall);
    j[p + "read_over_memcpy"] = copy.wall > 0 && m.all.wall > 0 ? copy.wall / m.all.wall : 0;
    j[p + "read_gbps_per_cpu_s"] = gbs(total, m.all.cpu);
    j[p + "read_raw_gbps_per_cpu_s"] = gbs(raw_bytes, m.raw.cpu);
    j[p + "read_zstd_gbps_per_cpu_s"] = gbs(zstd_bytes, m.zstd.cpu);
    j[p + "read_over_memcpy_cpu"] = copy.cpu > 0 && m.all.cpu > 0 ? copy.cpu / m.all.cpu : 0;
    j[p + "ok"] = m.ok;
  }
  std::printf("BENCH_JSON %s\n", j.dump().c_str());
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace kerncap::replay

int main(int argc, char** argv) { return kerncap::replay::Main(argc, argv); }
