// The device_snapshot capture path (capture_orchestrator.h) against a fake
// device whose memory, snapshot allocations and compare live in host memory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/core/capture_orchestrator.h"
#include "agent/core/capture_service.h"
#include "agent/core/device_snapshot.h"
#include "agent/testing/fake_transport.h"
#include "gtest/gtest.h"

namespace kerncap::agent {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// Device memory: the application's regions plus the agent's allocations,
// each a host buffer at a fake device address.
struct FakeHbm {
  std::map<uint64_t, std::string> buffers;  // base -> bytes
  std::vector<RegionDesc> regions;
  uint64_t total = 16 * kGiB;
  uint64_t free = 16 * kGiB;  // what FreeMemory reports
  uint64_t allocated = 0;     // agent allocations live now
  uint64_t peak_allocated = 0;
  int allocations = 0;
  int fail_allocation_at = 0;  // the n-th Allocate fails (1-based)
  uint64_t next = 0x900000000000;
  int diff_calls = 0;
  int reads_to_host = 0;
  int live_reads = 0;  // DispatchSource::ReadRegion (the host path's reads)
  uint64_t live_read_bytes = 0;
  int fingerprint_calls = 0;
  bool fail_fingerprint = false;
  int read_delay_ms = 0;  // each ReadToHost (a drain that takes its time)

  void Add(uint64_t va, std::string bytes) {
    regions.push_back(RegionDesc{va, bytes.size(), RegionKind::kDevice, 0, ""});
    buffers[va] = std::move(bytes);
  }
  std::string& At(uint64_t va) { return buffers.at(va); }
  // The buffer holding [addr, addr+n), and the offset into it.
  Result<std::pair<std::string*, uint64_t>> Resolve(uint64_t addr, uint64_t n) {
    auto it = buffers.upper_bound(addr);
    if (it == buffers.begin()) return Error("address not on the fake device");
    --it;
    const uint64_t off = addr - it->first;
    if (off + n > it->second.size()) return Error("range outside its buffer");
    return std::make_pair(&it->second, off);
  }
};

class FakeOps : public DeviceSnapshotOps {
 public:
  explicit FakeOps(FakeHbm* hbm) : hbm_(hbm) {}
  Status FreeMemory(uint64_t* free_bytes, uint64_t* total_bytes) override {
    *free_bytes = hbm_->free;
    *total_bytes = hbm_->total;
    return OkStatus();
  }
  Result<uint64_t> Allocate(uint64_t bytes) override {
    if (++hbm_->allocations == hbm_->fail_allocation_at) return Error("out of memory (injected)");
    const uint64_t base = hbm_->next;
    hbm_->next += (bytes + 0xfffff) & ~0xfffffull;
    hbm_->buffers[base] = std::string(bytes, '\xee');
    sizes_[base] = bytes;
    hbm_->allocated += bytes;
    hbm_->peak_allocated = std::max(hbm_->peak_allocated, hbm_->allocated);
    return base;
  }
  void Free(uint64_t buffer) override {
    hbm_->allocated -= sizes_.at(buffer);
    sizes_.erase(buffer);
    hbm_->buffers.erase(buffer);
  }
  Status Copy(uint64_t dst, uint64_t src, uint64_t bytes) override {
    auto d = hbm_->Resolve(dst, bytes);
    auto s = hbm_->Resolve(src, bytes);
    if (!d.ok() || !s.ok()) return Error("copy outside device memory");
    std::memcpy(d->first->data() + d->second, s->first->data() + s->second, bytes);
    return OkStatus();
  }
  Status DiffChunks(uint64_t a, uint64_t b, uint64_t bytes, uint64_t chunk,
                    std::vector<uint8_t>* differ) override {
    ++hbm_->diff_calls;
    auto x = hbm_->Resolve(a, bytes);
    auto y = hbm_->Resolve(b, bytes);
    if (!x.ok() || !y.ok()) return Error("compare outside device memory");
    differ->assign((bytes + chunk - 1) / chunk, 0);
    for (uint64_t c = 0; c < differ->size(); ++c) {
      const uint64_t off = c * chunk, n = std::min(chunk, bytes - off);
      (*differ)[c] = std::memcmp(x->first->data() + x->second + off,
                                 y->first->data() + y->second + off, n) != 0;
    }
    return OkStatus();
  }
  // The reference fingerprints of the fake device's bytes (fail_fingerprint:
  // the backend cannot, as on unaligned memory).
  Status Fingerprint(uint64_t src, uint64_t bytes, uint64_t chunk,
                     std::vector<link::ChunkFingerprint>* fps) override {
    ++hbm_->fingerprint_calls;
    if (hbm_->fail_fingerprint) return Error("cannot fingerprint (injected)");
    auto s = hbm_->Resolve(src, bytes);
    if (!s.ok()) return Error("fingerprint outside device memory");
    *fps = link::FingerprintChunks(s->first->data() + s->second, bytes, chunk);
    return OkStatus();
  }
  Status Sync() override { return OkStatus(); }
  Status ReadToHost(uint64_t src, void* dst, size_t bytes) override {
    ++hbm_->reads_to_host;
    if (hbm_->read_delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(hbm_->read_delay_ms));
    }
    auto s = hbm_->Resolve(src, bytes);
    if (!s.ok()) return Error("read outside device memory");
    std::memcpy(dst, s->first->data() + s->second, bytes);
    return OkStatus();
  }
  Status BindDrainThread() override {
    ++bound_;
    return OkStatus();
  }
  int bound_ = 0;

 private:
  FakeHbm* hbm_;
  std::map<uint64_t, uint64_t> sizes_;
};

class SnapshotSource : public DispatchSource {
 public:
  SnapshotSource(FakeHbm* hbm, bool offer_snapshot) : hbm_(hbm), ops_(hbm), offer_(offer_snapshot) {}
  Status Quiesce() override { return OkStatus(); }
  Result<std::vector<RegionDesc>> Regions() override { return hbm_->regions; }
  Result<std::vector<CodeObjectRef>> CodeObjects() override {
    CodeObjectRef c;
    c.name = "mod";
    c.bytes = std::make_shared<const std::string>("ELF");
    c.key = CodeObjectKey(*c.bytes);
    return std::vector<CodeObjectRef>{c};
  }
  Status ReadRegion(const RegionDesc& region, uint64_t offset, void* dst, size_t size) override {
    ++hbm_->live_reads;
    hbm_->live_read_bytes += size;
    std::memcpy(dst, hbm_->At(region.va).data() + offset, size);
    return OkStatus();
  }
  Status WaitForDispatch() override { return OkStatus(); }
  DeviceSnapshotOps* snapshot_ops() override { return offer_ ? &ops_ : nullptr; }

 private:
  FakeHbm* hbm_;
  FakeOps ops_;
  bool offer_;
};

std::string Pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 13 + (i >> 9));
  return s;
}

CaptureHeader Header() {
  CaptureHeader h;
  h.arm_id = "arm-1";
  h.kernel.demangled_name = "k";
  return h;
}

SnapshotPolicy Policy(uint64_t margin) {
  SnapshotPolicy p;
  p.margin_min_bytes = margin;
  p.margin_fraction = 0;
  return p;
}

constexpr uint64_t kChunk = 1024;

// Two regions; the "kernel" writes two chunks of the first one.
void AddRegions(FakeHbm* hbm) {
  hbm->Add(0x7f0000000000, Pattern(10 * kChunk + 100, 1));  // 11 chunks, the last short
  hbm->Add(0x7f0000100000, Pattern(3000, 2));
}
void RunKernel(FakeHbm* hbm) {
  std::string& a = hbm->At(0x7f0000000000);
  a[2 * kChunk + 5] ^= 0x5a;
  a[10 * kChunk + 99] ^= 0x01;  // the short last chunk
}

TEST(DeviceSnapshotTest, SnapshotPathSendsOnlyChangedPostChunksAndFreesItsMemory) {
  FakeTransport transport(/*slot_size=*/4 * kChunk, /*slot_count=*/2);
  transport.set_chunk_size(kChunk);
  FakeHbm hbm;
  AddRegions(&hbm);
  const std::string pre0 = hbm.At(0x7f0000000000), pre1 = hbm.At(0x7f0000100000);
  CaptureOrchestrator orch(&transport, Policy(1 * kGiB));
  auto pending = orch.Before(std::make_unique<SnapshotSource>(&hbm, true), Header(), "args");
  ASSERT_TRUE(pending.ok()) << pending.error();
  EXPECT_EQ(hbm.reads_to_host, 0) << "nothing crosses to the host inside the gate";
  RunKernel(&hbm);
  std::unique_ptr<PendingCapture> drain;
  auto stats = orch.After(std::move(pending.value()), true, &drain);
  ASSERT_TRUE(stats.ok()) << stats.error();
  ASSERT_NE(drain, nullptr);
  EXPECT_TRUE(drain->needs_drain());
  EXPECT_EQ(stats->path, CapturePath::kDeviceSnapshot);
  EXPECT_TRUE(transport.committed().empty());
  EXPECT_EQ(hbm.reads_to_host, 0);

  // The application runs on and changes memory again: the capture must not see it.
  const std::string post0 = hbm.At(0x7f0000000000);
  hbm.At(0x7f0000000000).assign(hbm.At(0x7f0000000000).size(), 'Z');
  hbm.At(0x7f0000100000).assign(3000, 'Z');

  auto drained = CaptureOrchestrator::Drain(std::move(drain), 0.5);
  ASSERT_TRUE(drained.ok()) << drained.error();
  EXPECT_EQ(hbm.live_reads, 0);
  ASSERT_EQ(transport.committed().size(), 1u);
  const FakeCapture& cap = transport.committed()[0];
  ASSERT_EQ(cap.pre.size(), 2u);
  ASSERT_EQ(cap.post.size(), 2u);
  EXPECT_EQ(cap.pre[0].bytes, pre0);
  EXPECT_EQ(cap.pre[1].bytes, pre1);
  EXPECT_EQ(cap.post[0].bytes, post0);
  EXPECT_EQ(cap.post[1].bytes, pre1);
  EXPECT_EQ(cap.code_objects.size(), 1u);
  // 11 + 3 post chunks, 2 changed.
  EXPECT_EQ(cap.unchanged_chunks, 12u);
  EXPECT_EQ(drained->post_bytes, kChunk + 100);
  EXPECT_EQ(drained->pcie_bytes, pre0.size() + pre1.size() + kChunk + 100);
  EXPECT_EQ(cap.timing.path, CapturePath::kDeviceSnapshot);
  EXPECT_DOUBLE_EQ(cap.timing.held_seconds, 0.5);
  EXPECT_EQ(cap.timing.pcie_bytes, drained->pcie_bytes);
  EXPECT_EQ(hbm.allocated, 0u) << "snapshot memory freed once drained";
  EXPECT_EQ(hbm.peak_allocated, 10 * kChunk + 256 + 3072 + kChunk + 256);
  EXPECT_EQ(transport.free_slots(), 2);
}

TEST(DeviceSnapshotTest, TooLittleFreeDeviceMemoryFallsBackToTheHostPath) {
  FakeTransport transport(4 * kChunk, 2);
  transport.set_chunk_size(kChunk);
  FakeHbm hbm;
  AddRegions(&hbm);
  hbm.free = 1 * kGiB + 1000;  // the snapshot (~14 KiB) fits, but not with the margin
  const std::string pre0 = hbm.At(0x7f0000000000);
  CaptureOrchestrator orch(&transport, Policy(1 * kGiB));
  auto pending = orch.Before(std::make_unique<SnapshotSource>(&hbm, true), Header(), "");
  ASSERT_TRUE(pending.ok()) << pending.error();
  RunKernel(&hbm);
  std::unique_ptr<PendingCapture> drain;
  auto stats = orch.After(std::move(pending.value()), true, &drain);
  ASSERT_TRUE(stats.ok()) << stats.error();
  EXPECT_EQ(drain, nullptr) << "the host path finishes inside After";
  EXPECT_EQ(stats->path, CapturePath::kHost);
  EXPECT_NE(stats->path_reason.find("free device memory too small"), std::string::npos)
      << stats->path_reason;
  EXPECT_EQ(hbm.allocations, 0);
  ASSERT_EQ(transport.committed().size(), 1u);
  const FakeCapture& cap = transport.committed()[0];
  EXPECT_EQ(cap.pre[0].bytes, pre0);
  EXPECT_EQ(cap.post[0].bytes, hbm.At(0x7f0000000000));
  EXPECT_EQ(cap.unchanged_chunks, 0u);
  EXPECT_EQ(cap.timing.path, CapturePath::kHost);
}

TEST(DeviceSnapshotTest, FailedSnapshotAllocationAndTransportsWithoutUnchangedUseTheHostPath) {
  for (int variant = 0; variant < 3; ++variant) {
    FakeTransport transport(4 * kChunk, 2);
    if (variant != 1) transport.set_chunk_size(kChunk);
    FakeHbm hbm;
    AddRegions(&hbm);
    if (variant == 0) hbm.fail_allocation_at = 1;
    CaptureOrchestrator orch(&transport,
                             variant == 2 ? SnapshotPolicy::HostOnly() : Policy(1 * kGiB));
    auto pending = orch.Before(std::make_unique<SnapshotSource>(&hbm, true), Header(), "");
    ASSERT_TRUE(pending.ok()) << pending.error();
    RunKernel(&hbm);
    auto stats = orch.After(std::move(pending.value()), true);
    ASSERT_TRUE(stats.ok()) << stats.error();
    EXPECT_EQ(stats->path, CapturePath::kHost) << variant;
    const char* why[] = {"allocating the snapshot failed", "does not take unchanged chunks",
                         "disabled"};
    EXPECT_NE(stats->path_reason.find(why[variant]), std::string::npos) << stats->path_reason;
    ASSERT_EQ(transport.committed().size(), 1u);
    EXPECT_EQ(transport.committed()[0].post[0].bytes, hbm.At(0x7f0000000000));
    EXPECT_EQ(hbm.allocated, 0u);
  }
}

TEST(DeviceSnapshotTest, NoRoomForTheChangedChunksSendsThemFromLiveMemoryInTheGate) {
  FakeTransport transport(4 * kChunk, 2);
  transport.set_chunk_size(kChunk);
  FakeHbm hbm;
  AddRegions(&hbm);
  hbm.fail_allocation_at = 2;  // the post buffer
  const std::string pre0 = hbm.At(0x7f0000000000);
  CaptureOrchestrator orch(&transport, Policy(1 * kGiB));
  auto pending = orch.Before(std::make_unique<SnapshotSource>(&hbm, true), Header(), "");
  ASSERT_TRUE(pending.ok()) << pending.error();
  RunKernel(&hbm);
  std::unique_ptr<PendingCapture> drain;
  auto stats = orch.After(std::move(pending.value()), true, &drain);
  ASSERT_TRUE(stats.ok()) << stats.error();
  ASSERT_NE(drain, nullptr);
  const std::string post0 = hbm.At(0x7f0000000000);
  hbm.At(0x7f0000000000).assign(post0.size(), 'Z');  // after the release: not captured
  auto drained = CaptureOrchestrator::Drain(std::move(drain), 0.1);
  ASSERT_TRUE(drained.ok()) << drained.error();
  const FakeCapture& cap = transport.committed().at(0);
  EXPECT_EQ(cap.pre[0].bytes, pre0);
  EXPECT_EQ(cap.post[0].bytes, post0);
  EXPECT_EQ(cap.unchanged_chunks, 12u);
  EXPECT_NE(cap.timing.path_reason.find("live memory"), std::string::npos);
  EXPECT_EQ(hbm.allocated, 0u);
}

TEST(DeviceSnapshotTest, MarginComesFromTheDeviceSizeOrTheEnvironment) {
  SnapshotPolicy p;
  EXPECT_EQ(p.Margin(16 * kGiB), 2 * kGiB);
  EXPECT_EQ(p.Margin(140 * kGiB), 7 * kGiB);
  std::string why;
  EXPECT_TRUE(p.Fits(24 * kGiB, 40 * kGiB, 140 * kGiB, &why)) << why;
  EXPECT_FALSE(p.Fits(24 * kGiB, 30 * kGiB, 140 * kGiB, &why));
  EXPECT_FALSE(p.Fits(24 * kGiB, 20 * kGiB, 140 * kGiB, &why));
  setenv("KERNCAP_AGENT_SNAPSHOT_MARGIN_MIB", "100", 1);
  EXPECT_EQ(SnapshotPolicy::FromEnv().Margin(140 * kGiB), 100ull << 20);
  unsetenv("KERNCAP_AGENT_SNAPSHOT_MARGIN_MIB");
  setenv("KERNCAP_AGENT_SNAPSHOT", "0", 1);
  EXPECT_FALSE(SnapshotPolicy::FromEnv().enabled);
  unsetenv("KERNCAP_AGENT_SNAPSHOT");
}

// A FakeTransport whose End, like the daemon link's, returns before the verdict.
class AsyncFakeTransport : public FakeTransport {
 public:
  AsyncFakeTransport() : FakeTransport(4 * kChunk, 2) { set_chunk_size(kChunk); }
  bool AsyncEnd() const override { return true; }
};

TEST(DeviceSnapshotTest, ServiceReleasesTheApplicationBeforeTheDrain) {
  CaptureService service;
  service.SetSnapshotPolicy(Policy(1 * kGiB));
  AsyncFakeTransport t;
  service.SetTransport(&t);
  FakeHbm hbm;
  AddRegions(&hbm);
  auto source = std::make_unique<SnapshotSource>(&hbm, true);
  auto c = service.Begin(&t, std::move(source), Header(), "", std::chrono::steady_clock::now());
  ASSERT_TRUE(c.ok()) << c.error();
  RunKernel(&hbm);
  const std::string post0 = hbm.At(0x7f0000000000);
  int released = 0;
  // Runs before the drain thread starts: the application changing memory
  // right after its release is not in the capture.
  service.End(&t, std::move(c.value()), true, [&] {
    ++released;
    hbm.At(0x7f0000000000).assign(post0.size(), 'Z');
  });
  EXPECT_EQ(released, 1);
  ASSERT_TRUE(service.WaitForDrain(10000));
  ASSERT_EQ(t.committed().size(), 1u);
  EXPECT_EQ(t.committed()[0].post[0].bytes, post0);
  EXPECT_EQ(service.last_capture().path, CapturePath::kDeviceSnapshot);
  EXPECT_EQ(hbm.allocated, 0u);
  EXPECT_EQ(service.captures_failed(), 0u);
}

// The vendor runtime registers its exit handler when it initializes, before
// any launch; an application that returns from main right after the captured
// launch must not have the runtime torn down under the drain.
CaptureService* g_exit_service = nullptr;
void FakeRuntimeTeardown() {
  std::fprintf(stderr, g_exit_service->WaitForDrain(0) ? "runtime teardown after the drain\n"
                                                       : "runtime teardown during the drain\n");
}

TEST(DeviceSnapshotDeathTest, ExitRunsTheRuntimeTeardownOnlyAfterTheDrain) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: no drain before
  EXPECT_EXIT(
      {
        std::atexit(FakeRuntimeTeardown);
        // Leaked: the drain thread uses them while the process exits.
        auto* service = new CaptureService();
        g_exit_service = service;
        service->SetSnapshotPolicy(Policy(1 * kGiB));
        auto* t = new AsyncFakeTransport();
        service->SetTransport(t);
        auto* hbm = new FakeHbm();
        AddRegions(hbm);
        hbm->read_delay_ms = 50;  // every slot of the drain
        auto c = service->Begin(t, std::make_unique<SnapshotSource>(hbm, true), Header(), "",
                                std::chrono::steady_clock::now());
        if (!c.ok()) std::abort();
        RunKernel(hbm);
        service->End(t, std::move(c.value()), true, [] {});
        std::exit(t->committed().empty() ? 0 : 3);  // still draining when exit begins
      },
      ::testing::ExitedWithCode(0), "runtime teardown after the drain");
}

}  // namespace
}  // namespace kerncap::agent

namespace kerncap::agent {
namespace {

// Fingerprints ("chunk_fingerprints"): what crosses PCIe is what the daemon
// does not hold yet, and the images the daemon assembles stay exact.
struct FingerprintRun {
  std::string pre0, pre1, post0, post1;
  CaptureStatsSummary stats;
};

FingerprintRun CaptureOnce(FakeTransport& transport, FakeHbm& hbm, const SnapshotPolicy& policy,
                           void (*kernel)(FakeHbm*)) {
  FingerprintRun run;
  run.pre0 = hbm.At(0x7f0000000000);
  run.pre1 = hbm.At(0x7f0000100000);
  CaptureOrchestrator orch(&transport, policy);
  auto pending = orch.Before(std::make_unique<SnapshotSource>(&hbm, true), Header(), "");
  EXPECT_TRUE(pending.ok()) << pending.error();
  if (!pending.ok()) return run;
  kernel(&hbm);
  run.post0 = hbm.At(0x7f0000000000);
  run.post1 = hbm.At(0x7f0000100000);
  auto stats = orch.After(std::move(pending.value()), true);
  EXPECT_TRUE(stats.ok()) << stats.error();
  if (stats.ok()) run.stats = *stats;
  return run;
}

void SecondKernel(FakeHbm* hbm) { hbm->At(0x7f0000000000)[7 * kChunk + 1] ^= 0x33; }

void ExpectExact(const FakeCapture& cap, const FingerprintRun& run) {
  ASSERT_EQ(cap.pre.size(), 2u);
  ASSERT_EQ(cap.post.size(), 2u);
  EXPECT_EQ(cap.pre[0].bytes, run.pre0);
  EXPECT_EQ(cap.pre[1].bytes, run.pre1);
  EXPECT_EQ(cap.post[0].bytes, run.post0);
  EXPECT_EQ(cap.post[1].bytes, run.post1);
}

TEST(FingerprintCaptureTest, HostPathSendsOnlyNewChunksAndChangedPostChunks) {
  FakeTransport transport(4 * kChunk, 2);
  transport.set_chunk_size(kChunk);
  transport.enable_fingerprints(true);
  FakeHbm hbm;
  AddRegions(&hbm);
  hbm.free = 0;  // no room for a snapshot: the host path
  FingerprintRun first = CaptureOnce(transport, hbm, Policy(1 * kGiB), RunKernel);
  ASSERT_EQ(transport.committed().size(), 1u);
  ExpectExact(transport.committed()[0], first);
  EXPECT_EQ(first.stats.path, CapturePath::kHost);
  // The whole pre image (nothing held yet), then only the two changed post chunks.
  const uint64_t live = first.pre0.size() + first.pre1.size();
  EXPECT_EQ(first.stats.pre_bytes, live);
  EXPECT_EQ(first.stats.post_bytes, kChunk + 100);
  EXPECT_EQ(first.stats.pcie_bytes, live + kChunk + 100);
  EXPECT_EQ(hbm.live_read_bytes, live + kChunk + 100);
  EXPECT_EQ(transport.committed()[0].unchanged_chunks, 12u);
  EXPECT_EQ(first.stats.known_bytes, 0u);

  // Second capture: the pre image is the first's post image (all held);
  // the kernel changes one more chunk.
  hbm.live_read_bytes = 0;
  FingerprintRun second = CaptureOnce(transport, hbm, Policy(1 * kGiB), SecondKernel);
  ASSERT_EQ(transport.committed().size(), 2u);
  ExpectExact(transport.committed()[1], second);
  EXPECT_EQ(second.stats.pre_bytes, 0u);
  EXPECT_EQ(second.stats.known_bytes, live);
  EXPECT_EQ(second.stats.post_bytes, kChunk);
  EXPECT_EQ(hbm.live_read_bytes, kChunk) << "only the one changed chunk crossed";
  EXPECT_EQ(transport.committed()[1].timing.path, CapturePath::kHost);
}

TEST(FingerprintCaptureTest, SnapshotPathDrainsOnlyWhatTheDaemonLacks) {
  FakeTransport transport(4 * kChunk, 2);
  transport.set_chunk_size(kChunk);
  transport.enable_fingerprints(true);
  FakeHbm hbm;
  AddRegions(&hbm);
  FingerprintRun first = CaptureOnce(transport, hbm, Policy(1 * kGiB), RunKernel);
  ASSERT_EQ(transport.committed().size(), 1u);
  EXPECT_EQ(first.stats.path, CapturePath::kDeviceSnapshot);
  ExpectExact(transport.committed()[0], first);
  const int reads_after_first = hbm.reads_to_host;
  FingerprintRun second = CaptureOnce(transport, hbm, Policy(1 * kGiB), SecondKernel);
  ASSERT_EQ(transport.committed().size(), 2u);
  EXPECT_EQ(second.stats.path, CapturePath::kDeviceSnapshot);
  ExpectExact(transport.committed()[1], second);
  EXPECT_EQ(second.stats.pre_bytes, 0u);
  EXPECT_EQ(second.stats.known_bytes, second.pre0.size() + second.pre1.size());
  EXPECT_EQ(second.stats.post_bytes, kChunk);
  EXPECT_EQ(hbm.reads_to_host - reads_after_first, 1) << "one changed chunk drained";
  EXPECT_EQ(hbm.live_reads, 0);
  EXPECT_EQ(hbm.allocated, 0u);
}

TEST(FingerprintCaptureTest, ARepeatedWriteIsNamedByFingerprintToo) {
  FakeTransport transport(4 * kChunk, 2);
  transport.set_chunk_size(kChunk);
  transport.enable_fingerprints(true);
  FakeHbm hbm;
  AddRegions(&hbm);
  hbm.free = 0;
  (void)CaptureOnce(transport, hbm, Policy(1 * kGiB), RunKernel);
  // RunKernel again flips the same bits back: its post chunks are the first
  // capture's pre chunks, which the daemon holds.
  hbm.live_read_bytes = 0;
  FingerprintRun second = CaptureOnce(transport, hbm, Policy(1 * kGiB), RunKernel);
  ExpectExact(transport.committed().at(1), second);
  EXPECT_EQ(second.stats.post_bytes, 0u);
  EXPECT_EQ(hbm.live_read_bytes, 0u);
}

TEST(FingerprintCaptureTest, WithoutFingerprintsEverythingIsSentAndTheReasonSaysWhy) {
  for (int variant = 0; variant < 3; ++variant) {
    FakeTransport transport(4 * kChunk, 2);
    transport.set_chunk_size(kChunk);
    transport.enable_fingerprints(variant != 0);
    FakeHbm hbm;
    AddRegions(&hbm);
    hbm.free = 0;
    hbm.fail_fingerprint = variant == 1;
    SnapshotPolicy policy = Policy(1 * kGiB);
    policy.fingerprints = variant != 2;
    (void)CaptureOnce(transport, hbm, policy, RunKernel);
    FingerprintRun second = CaptureOnce(transport, hbm, policy, SecondKernel);
    ASSERT_EQ(transport.committed().size(), 2u);
    ExpectExact(transport.committed()[1], second);
    const uint64_t live = second.pre0.size() + second.pre1.size();
    EXPECT_EQ(second.stats.pre_bytes, live) << variant;
    EXPECT_EQ(second.stats.post_bytes, live) << variant;
    EXPECT_EQ(second.stats.known_bytes, 0u);
    const char* why[] = {"does not take fingerprints", "cannot fingerprint (injected)",
                         "KERNCAP_AGENT_FINGERPRINTS=0"};
    EXPECT_NE(transport.committed()[1].timing.path_reason.find(why[variant]), std::string::npos)
        << transport.committed()[1].timing.path_reason;
  }
}

}  // namespace
}  // namespace kerncap::agent
