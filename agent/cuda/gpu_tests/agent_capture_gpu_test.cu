// agent_capture_gpu_test: the CUDA agent, in process, against a real GPU,
// with the in-memory FakeTransport in place of kerncapd. Checks what the
// daemon would receive for real launches: pre/post images, module globals,
// the code object, the argument blob, launch config and attributes; and that
// the agent refuses to synchronize inside stream capture; and kernels inside
// CUDA graphs (GraphLaunches: node-by-node run, images between neighbours,
// exec-level updates, a refused graph reported once).
// Skips (exit 77) without a GPU.
#include <cuda.h>

#include <cstring>
#include <vector>

#include "agent/testing/fake_transport.h"
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

__global__ void kc_tex_read(float* out, cudaTextureObject_t tex, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(tex, i) + 0.5f;
}

__global__ void kc_tex_array(float* out, cudaTextureObject_t tex) {
  out[threadIdx.x] = tex2D<float>(tex, threadIdx.x + 0.5f, 0.5f);
}

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

__global__ void kc_g_first(int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = i;
}
__global__ void kc_g_target(const int* x, int* y, int m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i] * m;
}
__global__ void kc_g_last(int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 100;
}
__global__ void kc_g_alloc(int* out, int* scratch, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    scratch[i] = i;
    out[i] = scratch[i] + 1;
  }
}

static std::vector<int> Ints(const kerncap::agent::FakeRegion* r, int n) {
  std::vector<int> v(n, -1);
  if (r != nullptr && r->bytes.size() >= n * sizeof(int)) std::memcpy(v.data(), r->bytes.data(), n * sizeof(int));
  return v;
}

// Kernels inside CUDA graphs: the armed launch runs the graph node by node and
// captures the selected node between its neighbours; the application's
// results are those of one normal graph launch.
static void GraphLaunches(CudaAgent& agent, FakeTransport& transport) {
  const int n = 1 << 16;
  const size_t bytes = n * sizeof(int);
  int *x, *y;
  GT_CHECK(cudaMalloc(&x, bytes));
  GT_CHECK(cudaMalloc(&y, bytes));
  cudaStream_t s;
  GT_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const size_t execs_before = agent.tracked_graph_execs();
  // memset y -> first (x = i) -> target (y += x * m) -> last (x += 100)
  cudaGraph_t g;
  GT_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  GT_CHECK(cudaMemsetAsync(y, 0, bytes, s));
  kc_g_first<<<n / 256, 256, 0, s>>>(x, n);
  kc_g_target<<<n / 256, 256, 0, s>>>(x, y, 2, n);
  kc_g_last<<<n / 256, 256, 0, s>>>(x, n);
  GT_CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphNode_t target = nullptr;
  size_t count = 0;
  GT_CHECK(cudaGraphGetNodes(g, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  GT_CHECK(cudaGraphGetNodes(g, nodes.data(), &count));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    GT_CHECK(cudaGraphNodeGetType(node, &type));
    cudaKernelNodeParams kp = {};
    if (type == cudaGraphNodeTypeKernel && cudaGraphKernelNodeGetParams(node, &kp) == cudaSuccess &&
        kp.func == reinterpret_cast<void*>(kc_g_target)) {
      target = node;
    }
  }
  CHECK(target != nullptr, "target node not found in the captured graph");
  cudaGraphExec_t exec;
  GT_CHECK(cudaGraphInstantiate(&exec, g, 0));
  CHECK(agent.tracked_graph_execs() == execs_before + 1, "instantiation not tracked");

  auto check_app = [&](int m, const char* when) {
    std::vector<int> hx(n), hy(n);
    GT_CHECK(cudaMemcpy(hx.data(), x, bytes, cudaMemcpyDeviceToHost));
    GT_CHECK(cudaMemcpy(hy.data(), y, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      if (hx[i] != i + 100 || hy[i] != i * m) {
        CHECK(false, "%s: x[%d]=%d y[%d]=%d, want %d and %d (the graph ran wrongly)", when, i,
              hx[i], i, hy[i], i + 100, i * m);
        return;
      }
    }
  };
  // Unarmed: untouched.
  const size_t committed = transport.committed().size();
  GT_CHECK(cudaGraphLaunch(exec, s));
  GT_CHECK(cudaStreamSynchronize(s));
  check_app(2, "unarmed graph launch");
  CHECK(transport.committed().size() == committed, "captured while unarmed");

  // Armed: the target node is captured, with the state after memset + first.
  transport.Arm("kc_g_target");
  GT_CHECK(cudaGraphLaunch(exec, s));
  GT_CHECK(cudaStreamSynchronize(s));
  transport.set_armed(false);
  check_app(2, "armed graph launch");
  CHECK(transport.committed().size() == committed + 1, "graph node not captured (%zu captures)",
        transport.committed().size() - committed);
  if (transport.committed().size() == committed + 1) {
    const FakeCapture& c = transport.committed().back();
    CHECK(c.header.kernel.demangled_name.find("kc_g_target") != std::string::npos, "kernel %s",
          c.header.kernel.demangled_name.c_str());
    CHECK(c.header.from_graph, "graph origin missing");
    CHECK(c.header.graph.node_index == 2 && c.header.graph.node_count == 4,
          "node %u of %u (want 2 of 4)", c.header.graph.node_index, c.header.graph.node_count);
    CHECK(c.header.graph.exec == reinterpret_cast<uint64_t>(exec), "exec handle");
    CHECK(c.header.graph.launch_index == 1, "launch index %llu",
          static_cast<unsigned long long>(c.header.graph.launch_index));
    CHECK(c.header.launch.grid[0] == static_cast<uint32_t>(n / 256) && c.header.launch.block[0] == 256,
          "node launch configuration");
    const std::vector<int> pre_x = Ints(FindRegion(c.pre, reinterpret_cast<uint64_t>(x)), n);
    const std::vector<int> pre_y = Ints(FindRegion(c.pre, reinterpret_cast<uint64_t>(y)), n);
    const std::vector<int> post_x = Ints(FindRegion(c.post, reinterpret_cast<uint64_t>(x)), n);
    const std::vector<int> post_y = Ints(FindRegion(c.post, reinterpret_cast<uint64_t>(y)), n);
    for (int i = 0; i < n; ++i) {
      if (pre_x[i] != i || pre_y[i] != 0 || post_x[i] != i || post_y[i] != 2 * i) {
        CHECK(false, "images at %d: pre x=%d y=%d post x=%d y=%d (want %d 0 %d %d)", i, pre_x[i],
              pre_y[i], post_x[i], post_y[i], i, i, 2 * i);
        break;
      }
    }
    uint64_t blob_x = 0;
    int blob_m = 0;
    if (c.arg_blob.size() >= 20) {
      std::memcpy(&blob_x, c.arg_blob.data(), 8);
      std::memcpy(&blob_m, c.arg_blob.data() + 16, 4);
    }
    CHECK(blob_x == reinterpret_cast<uint64_t>(x) && blob_m == 2, "argument blob of the node");
  }

  // An exec-level update of the node reaches the next capture.
  int m3 = 3;
  int nn = n;
  void* args[] = {&x, &y, &m3, &nn};
  cudaKernelNodeParams kp = {};
  kp.func = reinterpret_cast<void*>(kc_g_target);
  kp.gridDim = dim3(n / 256);
  kp.blockDim = dim3(256);
  kp.kernelParams = args;
  GT_CHECK(cudaGraphExecKernelNodeSetParams(exec, target, &kp));
  GT_CHECK(cudaGraphDestroy(g));
  transport.Arm("kc_g_target");
  GT_CHECK(cudaGraphLaunch(exec, s));
  GT_CHECK(cudaStreamSynchronize(s));
  transport.set_armed(false);
  check_app(3, "armed launch after cudaGraphExecKernelNodeSetParams");
  CHECK(transport.committed().size() == committed + 2, "updated node not captured");
  if (transport.committed().size() == committed + 2) {
    const FakeCapture& c = transport.committed().back();
    const std::vector<int> post_y = Ints(FindRegion(c.post, reinterpret_cast<uint64_t>(y)), n);
    CHECK(post_y[5] == 15 && c.header.graph.launch_index == 2, "post y[5]=%d launch %llu", post_y[5],
          static_cast<unsigned long long>(c.header.graph.launch_index));
  }
  GT_CHECK(cudaGraphExecDestroy(exec));
  CHECK(agent.tracked_graph_execs() == execs_before, "cudaGraphExecDestroy not tracked");

  // Refused before anything runs: a graph with memory nodes. Reported once
  // on the arm, the application's results unchanged, nothing captured.
  int* out;
  GT_CHECK(cudaMalloc(&out, bytes));
  cudaGraph_t ga;
  GT_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  int* scratch = nullptr;
  GT_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch), bytes, s));
  kc_g_alloc<<<n / 256, 256, 0, s>>>(out, scratch, n);
  GT_CHECK(cudaFreeAsync(scratch, s));
  GT_CHECK(cudaStreamEndCapture(s, &ga));
  cudaGraphExec_t ea;
  GT_CHECK(cudaGraphInstantiate(&ea, ga, 0));
  const size_t skipped = transport.skipped().size();
  transport.Arm("kc_g_alloc");
  for (int k = 0; k < 3; ++k) {
    GT_CHECK(cudaMemset(out, 0, bytes));
    GT_CHECK(cudaGraphLaunch(ea, s));
    GT_CHECK(cudaStreamSynchronize(s));
    std::vector<int> h(n);
    GT_CHECK(cudaMemcpy(h.data(), out, bytes, cudaMemcpyDeviceToHost));
    CHECK(h[7] == 8 && h[n - 1] == n, "refused graph launch %d ran wrongly", k);
  }
  transport.set_armed(false);
  CHECK(transport.committed().size() == committed + 2, "a refused graph was captured");
  CHECK(transport.skipped().size() == skipped + 1, "%zu refusal reports (want 1 for 3 launches)",
        transport.skipped().size() - skipped);
  if (transport.skipped().size() == skipped + 1) {
    const auto& r = transport.skipped().back();
    CHECK(r.reason.find("memory allocation") != std::string::npos && r.ticket.arm_id == "arm-fake" &&
              r.info.demangled_name.find("kc_g_alloc") != std::string::npos,
          "refusal report: %s", r.reason.c_str());
  }
  GT_CHECK(cudaGraphExecDestroy(ea));
  GT_CHECK(cudaGraphDestroy(ga));
  GT_CHECK(cudaFree(out));
  GT_CHECK(cudaFree(x));
  GT_CHECK(cudaFree(y));
  GT_CHECK(cudaStreamDestroy(s));
}

int main() {
  // Subscribe before the first CUDA call, like the LD_PRELOAD constructor.
  setenv("KERNCAP_AGENT_NO_DAEMON", "1", 1);
  setenv("KERNCAP_AGENT_ARM_GRACE_MS", "0", 1);
  // Keep every launch callback on: the fake transport's Arm() is not the
  // daemon link, which is what switches them on when an arm arrives.
  setenv("KERNCAP_AGENT_CALLBACK_TOGGLE", "0", 1);
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
    CHECK(c.header.arguments.size() == 3 && c.header.arguments[0].kind == kerncap::link::ArgumentKind::kPointer,
          "argument kinds");
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
  CHECK(transport.committed().size() == 1, "captured inside stream capture");
  transport.set_armed(false);  // graph launches are captured: see GraphLaunches()
  cudaGraphExec_t exec;
  GT_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  GT_CHECK(cudaGraphLaunch(exec, s));
  GT_CHECK(cudaStreamSynchronize(s));
  CHECK(transport.committed().size() == 1, "captured while unarmed");

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

  // Texture objects: one over linear memory, passed as a parameter, is
  // recorded with its descriptor and argument offset; one over a CUDA array
  // is refused with the reason.
  {
    const int tn = 4096;
    std::vector<float> tin(tn);
    for (int i = 0; i < tn; ++i) tin[i] = 0.125f * i;
    float* dt = nullptr;
    GT_CHECK(cudaMalloc(&dt, tn * sizeof(float)));
    GT_CHECK(cudaMemcpy(dt, tin.data(), tn * sizeof(float), cudaMemcpyHostToDevice));
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeLinear;
    res.res.linear.devPtr = dt;
    res.res.linear.desc = cudaCreateChannelDesc<float>();
    res.res.linear.sizeInBytes = tn * sizeof(float);
    cudaTextureDesc td = {};
    td.addressMode[0] = cudaAddressModeClamp;
    td.readMode = cudaReadModeElementType;
    cudaTextureObject_t tex = 0;
    GT_CHECK(cudaCreateTextureObject(&tex, &res, &td, nullptr));
    const size_t tracked = agent.textures().size();
    CHECK(tracked >= 1, "cudaCreateTextureObject not tracked");
    transport.Arm("kc_tex_read");
    kc_tex_read<<<tn / 256, 256>>>(dx, tex, tn);
    GT_CHECK(cudaDeviceSynchronize());
    transport.set_armed(false);
    CHECK(transport.committed().size() == 3, "texture capture missing (%zu committed; skipped: %s)",
          transport.committed().size(),
          transport.skipped().empty() ? "none" : transport.skipped().back().reason.c_str());
    if (transport.committed().size() == 3) {
      const auto& objs = transport.committed()[2].header.texture_objects;
      CHECK(objs.size() == 1, "%zu texture objects recorded", objs.size());
      if (objs.size() == 1) {
        const auto& o = objs[0];
        std::printf("texture object 0x%llx at offsets %zu: linear 0x%llx+%llu format 0x%x\n",
                    (unsigned long long)o.handle, o.argument_offsets.size(),
                    (unsigned long long)o.resource.device_ptr,
                    (unsigned long long)o.resource.size_bytes, o.resource.format);
        CHECK(o.handle == static_cast<uint64_t>(tex), "handle");
        CHECK(o.type == kerncap::agent::TextureObjectDesc::Type::kTexture, "type");
        CHECK(o.argument_offsets == std::vector<uint32_t>{8}, "argument offset (tex is parameter 1)");
        CHECK(o.resource.type == kerncap::agent::TextureResourceDesc::Type::kLinear, "resource");
        CHECK(o.resource.device_ptr == reinterpret_cast<uint64_t>(dt), "devPtr");
        CHECK(o.resource.size_bytes == tn * sizeof(float), "sizeInBytes");
        CHECK(o.resource.format == CU_AD_FORMAT_FLOAT && o.resource.num_channels == 1, "format");
        CHECK(o.sampling.address_mode[0] == CU_TR_ADDRESS_MODE_CLAMP, "address mode");
      }
    }

    cudaChannelFormatDesc fdesc = cudaCreateChannelDesc<float>();
    cudaArray_t array;
    GT_CHECK(cudaMallocArray(&array, &fdesc, 64, 1));
    cudaResourceDesc ares = {};
    ares.resType = cudaResourceTypeArray;
    ares.res.array.array = array;
    cudaTextureObject_t atex = 0;
    GT_CHECK(cudaCreateTextureObject(&atex, &ares, &td, nullptr));
    const size_t skipped_before = transport.skipped().size();
    transport.Arm("kc_tex_array");
    kc_tex_array<<<1, 64>>>(dx, atex);
    GT_CHECK(cudaDeviceSynchronize());
    transport.set_armed(false);
    CHECK(transport.committed().size() == 3, "a texture over a CUDA array was captured");
    CHECK(transport.skipped().size() == skipped_before + 1 &&
              transport.skipped().back().reason.find("CUDA array") != std::string::npos,
          "no refusal naming the CUDA array (%s)",
          transport.skipped().empty() ? "none" : transport.skipped().back().reason.c_str());
    if (!transport.skipped().empty()) {
      std::printf("refused: %s\n", transport.skipped().back().reason.c_str());
    }
    GT_CHECK(cudaDestroyTextureObject(atex));
    GT_CHECK(cudaDestroyTextureObject(tex));
    CHECK(agent.textures().size() == tracked - 1, "cudaDestroyTextureObject not tracked");
    GT_CHECK(cudaFreeArray(array));
    GT_CHECK(cudaFree(dt));
  }
  GT_CHECK(cudaFree(dx));
  CHECK(!agent.allocations().Lookup(reinterpret_cast<uint64_t>(dx)).has_value(), "free not tracked");

  GraphLaunches(agent, transport);

  std::printf("agent_capture_gpu_test: %s (%d failures)\n", failures ? "FAIL" : "OK", failures);
  return failures ? 1 : 0;
}
