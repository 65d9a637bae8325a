// snapshot_capture_gpu_test: the device_snapshot capture path on a
// real GPU, the CUDA agent in process with an asynchronous FakeTransport that
// takes MarkUnchanged (like kerncapd's link):
//   1. device_snapshot: the captured pre and post images equal the memory
//      before and right after the kernel, bit for bit, although the
//      application changes the memory again right after its release (the
//      drain reads the snapshot, not live memory); only changed chunks are
//      sent; a region whose size is not a multiple of 8 is compared
//      conservatively (all its chunks sent) and still exact.
//   2. too little free device memory (a margin larger than the device):
//      the host path, with the reason, the same exact images.
//   3. with snapshots off (KERNCAP_AGENT_SNAPSHOT=0 policy): the host path.
//   4. the device's chunk fingerprints (kc_chunk_fingerprint) equal the CPU
//      reference (common/agent_link/chunk_fingerprint.h) for several chunk
//      sizes, unaligned lengths and short last chunks.
//   5. fingerprints against a transport that speaks "chunk_fingerprints",
//      on both paths: the second capture of the same memory names every
//      chunk by fingerprint (nothing of it crosses PCIe) and both captures'
//      images are still exact.
// Skips (exit 77) without a GPU.
#include <cuda.h>

#include <cstring>
#include <vector>

#include "agent/cuda/cuda_agent.h"
#include "agent/cuda/cuda_snapshot.h"
#include "common/agent_link/chunk_fingerprint.h"
#include "agent/testing/fake_transport.h"
#include "gpu_test_util.h"

using kerncap::agent::FakeCapture;
using kerncap::agent::FakeTransport;
using kerncap::agent::SnapshotPolicy;
using kerncap::agent::cuda::CudaAgent;

static int failures = 0;
#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      ++failures;                                                           \
      std::printf("CHECK FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
      std::printf(__VA_ARGS__);                                             \
      std::printf("\n");                                                    \
    }                                                                       \
  } while (0)

constexpr uint64_t kChunk = 1 << 20;

// Like kerncapd's link: End returns before the verdict, so the service drains
// a device snapshot on its own thread after the release.
class AsyncTransport : public FakeTransport {
 public:
  AsyncTransport() : FakeTransport(/*slot_size=*/4 << 20, /*slot_count=*/4) {
    set_chunk_size(kChunk);
  }
  bool AsyncEnd() const override { return true; }
};

// Rewrites 4 bytes in chunks 3 and 17 of `a` and the last byte of `b`.
__global__ void kc_snap_write(unsigned* a, unsigned char* b, unsigned long long b_size) {
  if (threadIdx.x == 0) {
    a[3 * kChunk / 4 + 5] ^= 0xdeadbeefu;
    a[17 * kChunk / 4] += 1;
    b[b_size - 1] ^= 0x5a;
  }
}
__global__ void kc_snap_scribble(unsigned* a, unsigned long long words) {
  for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < words;
       i += gridDim.x * blockDim.x) {
    a[i] = 0x11111111u;
  }
}

static const kerncap::agent::FakeRegion* Find(const std::vector<kerncap::agent::FakeRegion>& rs,
                                              const void* p) {
  for (const auto& r : rs) {
    if (r.desc.va == reinterpret_cast<uint64_t>(p)) return &r;
  }
  return nullptr;
}

// max_pcie < 0: no bound on the bytes over PCIe.
static void CaptureOnce(CudaAgent& agent, AsyncTransport& transport, const char* label,
                        const char* want_path, const char* want_reason, long long max_pcie = -1) {
  const uint64_t a_bytes = 32 * kChunk;
  const uint64_t b_size = 1000003;  // not a multiple of 8
  unsigned* a;
  unsigned char* b;
  GT_CHECK(cudaMalloc(&a, a_bytes));
  GT_CHECK(cudaMalloc(&b, b_size));
  std::vector<unsigned> ha(a_bytes / 4);
  std::vector<unsigned char> hb(b_size);
  for (size_t i = 0; i < ha.size(); ++i) ha[i] = static_cast<unsigned>(i * 2654435761u + 7);
  for (size_t i = 0; i < hb.size(); ++i) hb[i] = static_cast<unsigned char>(i * 31 + 1);
  GT_CHECK(cudaMemcpy(a, ha.data(), a_bytes, cudaMemcpyHostToDevice));
  GT_CHECK(cudaMemcpy(b, hb.data(), b_size, cudaMemcpyHostToDevice));
  GT_CHECK(cudaDeviceSynchronize());
  std::vector<unsigned> ea = ha;  // what the kernel leaves
  std::vector<unsigned char> eb = hb;
  ea[3 * kChunk / 4 + 5] ^= 0xdeadbeefu;
  ea[17 * kChunk / 4] += 1;
  eb[b_size - 1] ^= 0x5a;

  const size_t before = transport.committed().size();
  agent.SetTransport(&transport);
  transport.Arm("kc_snap_write");
  kc_snap_write<<<1, 32>>>(a, b, b_size);
  GT_CHECK(cudaGetLastError());
  // The application goes on at once and overwrites everything.
  kc_snap_scribble<<<256, 256>>>(a, a_bytes / 4);
  GT_CHECK(cudaDeviceSynchronize());
  CHECK(agent.WaitForCaptureDrain(60000), "%s: the drain did not finish", label);
  transport.set_armed(false);
  agent.SetTransport(nullptr);
  CHECK(transport.committed().size() == before + 1, "%s: %zu captures committed, %zu aborted (%s)",
        label, transport.committed().size(), transport.aborted().size(),
        transport.aborted().empty() ? "" : transport.aborted()[0].abort_reason.c_str());
  if (transport.committed().size() == before + 1) {
    const FakeCapture& c = transport.committed().back();
    CHECK(kerncap::link::WireName(c.timing.path) == want_path, "%s: path %s (%s), want %s", label,
          std::string(kerncap::link::WireName(c.timing.path)).c_str(),
          c.timing.path_reason.c_str(), want_path);
    CHECK(c.timing.path_reason.find(want_reason) != std::string::npos, "%s: reason '%s'", label,
          c.timing.path_reason.c_str());
    const auto* pre_a = Find(c.pre, a);
    const auto* post_a = Find(c.post, a);
    const auto* pre_b = Find(c.pre, b);
    const auto* post_b = Find(c.post, b);
    CHECK(pre_a && post_a && pre_b && post_b, "%s: regions missing", label);
    if (pre_a && post_a && pre_b && post_b) {
      CHECK(std::memcmp(pre_a->bytes.data(), ha.data(), a_bytes) == 0, "%s: pre image of a", label);
      CHECK(std::memcmp(post_a->bytes.data(), ea.data(), a_bytes) == 0, "%s: post image of a",
            label);
      CHECK(std::memcmp(pre_b->bytes.data(), hb.data(), b_size) == 0, "%s: pre image of b", label);
      CHECK(std::memcmp(post_b->bytes.data(), eb.data(), b_size) == 0, "%s: post image of b",
            label);
    }
    if (max_pcie >= 0) {
      CHECK(static_cast<long long>(c.timing.pcie_bytes) <= max_pcie,
            "%s: %llu bytes over PCIe, want at most %lld", label,
            static_cast<unsigned long long>(c.timing.pcie_bytes), max_pcie);
    }
    if (std::string(want_path) == "device_snapshot") {
      // a: 32 chunks, 2 changed; b: conservatively all sent (size % 8 != 0).
      CHECK(c.unchanged_chunks >= 30, "%s: %llu unchanged chunks", label,
            static_cast<unsigned long long>(c.unchanged_chunks));
      CHECK(c.timing.drain_seconds > 0, "%s: no drain time", label);
    }
    std::printf("%s: path %s (%s); held %.4f s, pre %.4f s, post %.4f s, drain %.4f s, PCIe "
                "%.2f MiB, unchanged post %.2f MiB, named by fingerprint %llu chunks, fingerprints "
                "%.4f s\n",
                label, std::string(kerncap::link::WireName(c.timing.path)).c_str(), c.timing.path_reason.c_str(),
                c.timing.held_seconds, c.timing.pre_seconds, c.timing.post_seconds,
                c.timing.drain_seconds, c.timing.pcie_bytes / 1048576.0,
                c.timing.unchanged_post_bytes / 1048576.0,
                static_cast<unsigned long long>(c.known_chunks), c.timing.fingerprint_seconds);
  }
  GT_CHECK(cudaFree(a));
  GT_CHECK(cudaFree(b));
}

// The device kernel against the reference on random bytes.
static void CheckFingerprints() {
  CUcontext ctx = nullptr;
  cuCtxGetCurrent(&ctx);
  kerncap::agent::cuda::CudaSnapshotOps ops(ctx, nullptr);
  const uint64_t sizes[] = {8, 13, 4096, 65536 + 7, 3 * (1 << 20) + 5, 40ull << 20};
  const uint64_t chunks[] = {4096 + 8, 65536, 1 << 20};
  for (uint64_t size : sizes) {
    std::vector<unsigned char> host(size);
    uint64_t x = 0x9e3779b97f4a7c15ull ^ size;
    for (auto& b : host) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b = static_cast<unsigned char>(x >> 11);
    }
    void* dev = nullptr;
    GT_CHECK(cudaMalloc(&dev, size));
    GT_CHECK(cudaMemcpy(dev, host.data(), size, cudaMemcpyHostToDevice));
    for (uint64_t chunk : chunks) {
      std::vector<kerncap::link::ChunkFingerprint> got;
      auto st = ops.Fingerprint(reinterpret_cast<uint64_t>(dev), size, chunk, &got);
      CHECK(st.ok(), "fingerprint of %llu bytes in chunks of %llu: %s",
            static_cast<unsigned long long>(size), static_cast<unsigned long long>(chunk),
            st.message().c_str());
      CHECK(got == kerncap::link::FingerprintChunks(host.data(), size, chunk),
            "device fingerprints of %llu bytes in chunks of %llu differ from the reference",
            static_cast<unsigned long long>(size), static_cast<unsigned long long>(chunk));
    }
    GT_CHECK(cudaFree(dev));
  }
  std::printf("device fingerprints: %zu sizes x %zu chunk sizes checked\n",
              sizeof(sizes) / sizeof(sizes[0]), sizeof(chunks) / sizeof(chunks[0]));
}

int main() {
  setenv("KERNCAP_AGENT_NO_DAEMON", "1", 1);
  setenv("KERNCAP_AGENT_ARM_GRACE_MS", "0", 1);
  setenv("KERNCAP_AGENT_CALLBACK_TOGGLE", "0", 1);
  CudaAgent& agent = CudaAgent::Instance();
  bool active = agent.Initialize("snapshot_capture_gpu_test");
  SkipIfNoGpu("snapshot_capture_gpu_test");
  if (!active) {
    std::printf("FAIL: agent did not activate (CUPTI)\n");
    return 1;
  }
  GT_CHECK(cudaFree(nullptr));  // a context
  SnapshotPolicy fits;
  fits.margin_min_bytes = 256ull << 20;
  fits.margin_fraction = 0;
  agent.SetSnapshotPolicy(fits);
  {
    AsyncTransport t;
    CaptureOnce(agent, t, "device snapshot", "device_snapshot", "fits");
  }
  SnapshotPolicy short_of_memory = fits;
  short_of_memory.margin_min_bytes = 1ull << 50;  // more than any device has free
  agent.SetSnapshotPolicy(short_of_memory);
  {
    AsyncTransport t;
    CaptureOnce(agent, t, "too little free HBM", "host", "free device memory too small");
  }
  agent.SetSnapshotPolicy(SnapshotPolicy::HostOnly());
  {
    AsyncTransport t;
    CaptureOnce(agent, t, "snapshots off", "host", "disabled");
  }

  CheckFingerprints();
  // Fingerprints on both paths: the same memory captured twice through one
  // "connection"; the second capture sends nothing (its pre image and its
  // changed post chunks are what the first one sent).
  for (int host = 0; host < 2; ++host) {
    agent.SetSnapshotPolicy(host ? short_of_memory : fits);
    AsyncTransport t;
    t.enable_fingerprints(true);
    const char* path = host ? "host" : "device_snapshot";
    CaptureOnce(agent, t, host ? "fingerprints, host path, first" : "fingerprints, snapshot, first",
                path, "");
    CaptureOnce(agent, t, host ? "fingerprints, host path, second" : "fingerprints, snapshot, second",
                path, "", /*max_pcie=*/0);
    if (t.committed().size() == 2) {
      CHECK(t.committed()[1].known_chunks > 0, "%s: nothing named by fingerprint", path);
      if (host) {
        // First capture, host path: the post image by fingerprint compare:
        // only a's 2 changed chunks and b's last one crossed after the pre image.
        const uint64_t pre = 32 * kChunk + 1000003;
        CHECK(t.committed()[0].timing.pcie_bytes <= pre + 3 * kChunk, "host path: %llu bytes",
              static_cast<unsigned long long>(t.committed()[0].timing.pcie_bytes));
      }
    }
  }

  if (failures != 0) {
    std::printf("FAIL: %d checks failed\n", failures);
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}
