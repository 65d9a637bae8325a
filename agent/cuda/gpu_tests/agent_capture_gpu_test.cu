// agent_capture_gpu_test: the CUDA agent, in process, against a real GPU,
// with the in-memory FakeTransport in place of kerncapd. Checks what the
// daemon would receive for real launches: pre/post images, module globals,
// the code object, the argument blob, launch config and attributes; and that
// the agent refuses to synchronize inside stream capture.
// Skips (exit 77) without a GPU.
#include <cuda.h>

#include <cstring>
#include <vector>

#include "agent/core/fake_transport.h"
#include "agent/cuda/cuda_agent.h"
#include "common/cuda/cubin_elf.h"
#include "gpu_test_util.h"

using kerncap::agent::FakeCapture;
using kerncap::agent::FakeTransport;
using kerncap::agent::RegionKind;
using kerncap::agent::cuda::CudaAgent;

__constant__ float k_coeff[4];
__device__ int d_bias;

__global__ void kc_scale_inplace(float* x, int n, float s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * s * k_coeff[i % 4] + d_bias;
}

__global__ void kc_other(float* x) { x[threadIdx.x] += 1.0f; }

static int failures = 0;
#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      ++failures;                                                \
      std::printf("CHECK FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                  \
      std::printf("\n");                                         \
    }                                                            \
  } while (0)

static const kerncap::agent::FakeRegion* FindRegion(const std::vector<kerncap::agent::FakeRegion>& rs,
                                                    uint64_t va) {
  for (const auto& r : rs) {
    if (r.desc.va == va) return &r;
  }
  return nullptr;
}

int main() {
  // Subscribe before the first CUDA call, like the LD_PRELOAD constructor.
  setenv("KERNCAP_AGENT_NO_DAEMON", "1", 1);
  setenv("KERNCAP_AGENT_ARM_GRACE_MS", "0", 1);
  CudaAgent& agent = CudaAgent::Instance();
  bool active = agent.Initialize("agent_capture_gpu_test");
  SkipIfNoGpu("agent_capture_gpu_test");
  if (!active) {
    std::printf("FAIL: agent did not activate (CUPTI)\n");
    return 1;
  }
  FakeTransport transport(/*slot_size=*/1 << 20, /*slot_count=*/4);
  agent.SetTransport(&transport);

  const int n = 3 << 18;  // 3 MiB of floats: several slots
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i % 251);
  float* dx;
  GT_CHECK(cudaMalloc(&dx, n * sizeof(float)));
  GT_CHECK(cudaMemcpy(dx, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  float coeff[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  int bias = 5;
  GT_CHECK(cudaMemcpyToSymbol(k_coeff, coeff, sizeof(coeff)));
  GT_CHECK(cudaMemcpyToSymbol(d_bias, &bias, sizeof(bias)));
  std::printf("tracked allocations after setup: %zu, modules: %zu\n", agent.tracked_allocations(),
              agent.tracked_modules());
  CHECK(agent.allocations().Lookup(reinterpret_cast<uint64_t>(dx) + 100).has_value(),
        "cudaMalloc'd buffer not tracked");

  // Unarmed: nothing captured.
  kc_other<<<1, 32>>>(dx);
  GT_CHECK(cudaDeviceSynchronize());
  CHECK(transport.committed().empty(), "captured while unarmed");

  // Armed: the next kc_scale_inplace is captured.
  transport.Arm("kc_scale_inplace");
  kc_other<<<1, 32>>>(dx);  // not matching
  GT_CHECK(cudaMemcpy(host.data(), dx, n * sizeof(float), cudaMemcpyDeviceToHost));
  const std::vector<float> before = host;
  kc_scale_inplace<<<(n + 255) / 256, 256>>>(dx, n, 0.5f);
  GT_CHECK(cudaGetLastError());
  GT_CHECK(cudaMemcpy(host.data(), dx, n * sizeof(float), cudaMemcpyDeviceToHost));
  transport.set_armed(false);
  for (int i = 0; i < n; ++i) {
    float want = before[i] * 0.5f * coeff[i % 4] + bias;
    if (host[i] != want) {
      CHECK(false, "kernel result wrong at %d: %f != %f (agent disturbed the app)", i, host[i], want);
      break;
    }
  }
  CHECK(transport.aborted().empty(), "aborted: %s",
        transport.aborted().empty() ? "" : transport.aborted()[0].abort_reason.c_str());
  CHECK(transport.committed().size() == 1, "committed %zu captures", transport.committed().size());
  if (transport.committed().size() == 1) {
    const FakeCapture& c = transport.committed()[0];
    std::printf("capture: kernel=%s demangled=%s arch=%s grid=%u block=%u regions pre=%zu post=%zu "
                "code_objects=%zu blob=%zu bytes\n",
                c.header.kernel.mangled_name.c_str(), c.header.kernel.demangled_name.c_str(),
                c.header.kernel.arch.c_str(), c.header.launch.grid[0], c.header.launch.block[0],
                c.pre.size(), c.post.size(), c.code_objects.size(), c.arg_blob.size());
    CHECK(c.header.kernel.demangled_name.find("kc_scale_inplace") != std::string::npos, "name");
    CHECK(c.header.launch.grid[0] == static_cast<uint32_t>((n + 255) / 256), "grid");
    CHECK(c.header.launch.block[0] == 256, "block");
    CHECK(c.header.kernel.arch == "sm_90", "arch %s", c.header.kernel.arch.c_str());
    CHECK(c.header.launch.attributes.count("func.num_regs") == 1, "function attributes missing");
    // Argument blob: float* at 0, int at 8, float at 12.
    CHECK(c.arg_blob.size() == 16, "blob size %zu", c.arg_blob.size());
    if (c.arg_blob.size() == 16) {
      uint64_t p;
      int nn;
      float s;
      std::memcpy(&p, c.arg_blob.data(), 8);
      std::memcpy(&nn, c.arg_blob.data() + 8, 4);
      std::memcpy(&s, c.arg_blob.data() + 12, 4);
      CHECK(p == reinterpret_cast<uint64_t>(dx) && nn == n && s == 0.5f, "blob values");
    }
    CHECK(c.header.arguments.size() == 3 && c.header.arguments[0].kind == 2, "argument kinds");
    const auto* pre = FindRegion(c.pre, reinterpret_cast<uint64_t>(dx));
    const auto* post = FindRegion(c.post, reinterpret_cast<uint64_t>(dx));
    CHECK(pre != nullptr && post != nullptr, "buffer region missing");
    if (pre && post) {
      CHECK(pre->bytes.size() >= n * sizeof(float), "pre size");
      CHECK(std::memcmp(pre->bytes.data(), before.data(), n * sizeof(float)) == 0,
            "pre image != input");
      CHECK(std::memcmp(post->bytes.data(), host.data(), n * sizeof(float)) == 0,
            "post image != output");
    }
    bool have_const = false, have_global = false;
    for (const auto& r : c.pre) {
      if (r.desc.kind == RegionKind::kConstant && r.desc.name == "k_coeff") {
        have_const = r.bytes.size() == sizeof(coeff) && std::memcmp(r.bytes.data(), coeff, 16) == 0;
      }
      if (r.desc.kind == RegionKind::kModuleGlobal && r.desc.name == "d_bias") {
        have_global = r.bytes.size() == 4 && std::memcmp(r.bytes.data(), &bias, 4) == 0;
      }
    }
    CHECK(have_const, "__constant__ k_coeff not captured with its value");
    CHECK(have_global, "__device__ d_bias not captured with its value");
    CHECK(c.code_objects.size() == 1 && c.code_objects[0].bytes &&
              kerncap::cubin::IsElf(*c.code_objects[0].bytes),
          "code object missing or not ELF");
  }

  // Stream capture: an armed match inside cudaStreamBeginCapture is skipped,
  // and the application's graph still works.
  transport.Arm("kc_scale_inplace");
  cudaStream_t s;
  GT_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  GT_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  kc_scale_inplace<<<(n + 255) / 256, 256, 0, s>>>(dx, n, 1.0f);
  GT_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  GT_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  GT_CHECK(cudaGraphLaunch(exec, s));
  GT_CHECK(cudaStreamSynchronize(s));
  CHECK(transport.committed().size() == 1, "captured inside stream capture");
  transport.set_armed(false);

  // VMM (expandable-segments style): reserve, create, map, set access.
  CUdevice dev;
  cuCtxGetDevice(&dev);
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle h;
  CHECK(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0) == CUDA_SUCCESS, "reserve");
  CHECK(cuMemCreate(&h, gran, &prop, 0) == CUDA_SUCCESS, "create");
  CHECK(cuMemMap(va + gran, gran, 0, h, 0) == CUDA_SUCCESS, "map");
  auto m = agent.allocations().Lookup(va + gran);
  CHECK(m.has_value() && m->access_mask == 0, "VMM mapping not tracked (or access already set)");
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK(cuMemSetAccess(va + gran, gran, &acc, 1) == CUDA_SUCCESS, "set access");
  m = agent.allocations().Lookup(va + gran + 17);
  CHECK(m.has_value() && m->access_mask != 0 && m->size == gran, "VMM access not tracked");
  transport.Arm("kc_other");
  kc_other<<<1, 32>>>(reinterpret_cast<float*>(va + gran));
  GT_CHECK(cudaDeviceSynchronize());
  transport.set_armed(false);
  CHECK(transport.committed().size() == 2, "VMM capture missing");
  if (transport.committed().size() == 2) {
    const auto* r = FindRegion(transport.committed()[1].pre, va + gran);
    CHECK(r != nullptr && r->desc.kind == RegionKind::kDeviceVmm, "VMM region missing in capture");
  }
  cuMemUnmap(va + gran, gran);
  CHECK(!agent.allocations().Lookup(va + gran).has_value(), "unmap not tracked");
  cuMemRelease(h);
  cuMemAddressFree(va, 4 * gran);
  GT_CHECK(cudaFree(dx));
  CHECK(!agent.allocations().Lookup(reinterpret_cast<uint64_t>(dx)).has_value(), "free not tracked");

  std::printf("agent_capture_gpu_test: %s (%d failures)\n", failures ? "FAIL" : "OK", failures);
  return failures ? 1 : 0;
}
