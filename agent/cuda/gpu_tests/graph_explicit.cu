// graph_explicit: a CUDA graph built node by node, with every node kind the
// agent runs itself, changed between launches the two ways applications do:
//
//   host (writes the step's bias into pinned memory)
//    -> ex_fill (x[i] = i % 97 + bias)
//    -> child graph { ex_child_mul (x *= m) -> ex_child_add (x += c) }
//    -> empty -> event record (ev) -> event wait (ev) -> ex_out (out = x * k)
//
//   launch 1: m = 2, c = 1, k = 3
//   cudaGraphExecUpdate with a topologically identical graph: m = 5, c = 7
//   launch 2
//   cudaGraphExecKernelNodeSetParams on ex_out (node of the first graph): k = 4
//   launch 3, launch 4
//
// Capture target: kernel "ex_child_mul", 3rd dispatch = the child graph's
// node in launch 3: its pre image must hold x = i % 97 + bias(3) (host and
// fill nodes ran), its post image x * 5 (the update reached it). ex_out's
// k = 4 from launch 3 on shows the exec-level update was replayed. Each
// launch's output is checked against the host's computation.
#include <vector>

#include "gpu_test_util.h"

__global__ void ex_fill(float* x, const int* bias, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = static_cast<float>(i % 97 + *bias);
}
__global__ void ex_child_mul(float* x, float m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= m;
}
__global__ void ex_child_add(float* x, float c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += c;
}
__global__ void ex_out(float* out, const float* x, float k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = x[i] * k;
}

struct HostState {
  int* bias;  // pinned
  int step;
};

static void CUDART_CB SetBias(void* p) {
  auto* h = static_cast<HostState*>(p);
  *h->bias = 10 * h->step;
}

struct Built {
  cudaGraph_t graph;
  cudaGraphNode_t out_node;
};

// The same topology every time; only the child's m and c differ. Kernel
// arguments are copied into a node when it is added, so locals do.
static Built Build(float* x, float* out, HostState* hs, cudaEvent_t ev, float m, float c,
                   float k, int n) {
  const int* bias = hs->bias;
  cudaKernelNodeParams kp = {};
  kp.gridDim = dim3((n + 255) / 256);
  kp.blockDim = dim3(256);

  cudaGraph_t child;
  GT_CHECK(cudaGraphCreate(&child, 0));
  cudaGraphNode_t mul, add;
  void* mul_args[] = {&x, &m, &n};
  kp.func = reinterpret_cast<void*>(ex_child_mul);
  kp.kernelParams = mul_args;
  GT_CHECK(cudaGraphAddKernelNode(&mul, child, nullptr, 0, &kp));
  void* add_args[] = {&x, &c, &n};
  kp.func = reinterpret_cast<void*>(ex_child_add);
  kp.kernelParams = add_args;
  GT_CHECK(cudaGraphAddKernelNode(&add, child, &mul, 1, &kp));

  cudaGraph_t g;
  GT_CHECK(cudaGraphCreate(&g, 0));
  cudaHostNodeParams hp = {};
  hp.fn = SetBias;
  hp.userData = hs;
  cudaGraphNode_t host, fill, sub, empty, rec, wait, outn;
  GT_CHECK(cudaGraphAddHostNode(&host, g, nullptr, 0, &hp));
  void* fill_args[] = {&x, &bias, &n};
  kp.func = reinterpret_cast<void*>(ex_fill);
  kp.kernelParams = fill_args;
  GT_CHECK(cudaGraphAddKernelNode(&fill, g, &host, 1, &kp));
  GT_CHECK(cudaGraphAddChildGraphNode(&sub, g, &fill, 1, child));
  GT_CHECK(cudaGraphAddEmptyNode(&empty, g, &sub, 1));
  GT_CHECK(cudaGraphAddEventRecordNode(&rec, g, &empty, 1, ev));
  GT_CHECK(cudaGraphAddEventWaitNode(&wait, g, &rec, 1, ev));
  void* out_args[] = {&out, &x, &k, &n};
  kp.func = reinterpret_cast<void*>(ex_out);
  kp.kernelParams = out_args;
  GT_CHECK(cudaGraphAddKernelNode(&outn, g, &wait, 1, &kp));
  GT_CHECK(cudaGraphDestroy(child));  // the child node holds its own copy
  return Built{g, outn};
}

int main() {
  SkipIfNoGpu("graph_explicit");
  const int n = 1 << 18;
  float *x, *out;
  GT_CHECK(cudaMalloc(&x, n * sizeof(float)));
  GT_CHECK(cudaMalloc(&out, n * sizeof(float)));
  HostState hs;
  GT_CHECK(cudaMallocHost(&hs.bias, sizeof(int)));
  *hs.bias = 0;
  cudaEvent_t ev;
  GT_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  cudaStream_t s;
  GT_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  Built first = Build(x, out, &hs, ev, 2.0f, 1.0f, 3.0f, n);
  cudaGraphExec_t exec;
  GT_CHECK(cudaGraphInstantiate(&exec, first.graph, 0));

  float m = 2.0f, c = 1.0f, k = 3.0f;
  std::vector<float> got(n);
  for (int step = 1; step <= 4; ++step) {
    if (step == 2) {
      // A new graph of the same shape replaces every node's parameters.
      Built second = Build(x, out, &hs, ev, 5.0f, 7.0f, 3.0f, n);
      cudaGraphExecUpdateResultInfo info = {};
      GT_CHECK(cudaGraphExecUpdate(exec, second.graph, &info));
      GT_EXPECT(info.result == cudaGraphExecUpdateSuccess, "exec update result %d",
                static_cast<int>(info.result));
      GT_CHECK(cudaGraphDestroy(second.graph));
      m = 5.0f;
      c = 7.0f;
    }
    if (step == 3) {
      // One node changed in the exec, named by the node of the first graph.
      float k4 = 4.0f;
      int nn = n;
      void* out_args[] = {&out, &x, &k4, &nn};
      cudaKernelNodeParams kp = {};
      kp.gridDim = dim3((n + 255) / 256);
      kp.blockDim = dim3(256);
      kp.func = reinterpret_cast<void*>(ex_out);
      kp.kernelParams = out_args;
      GT_CHECK(cudaGraphExecKernelNodeSetParams(exec, first.out_node, &kp));
      k = 4.0f;
    }
    hs.step = step;
    GT_CHECK(cudaGraphLaunch(exec, s));
    GT_CHECK(cudaStreamSynchronize(s));
    GT_CHECK(cudaMemcpy(got.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) {
      const float want = (static_cast<float>(i % 97 + 10 * step) * m + c) * k;
      GT_EXPECT(got[i] == want, "launch %d: out[%d] = %f, want %f", step, i, got[i], want);
    }
    std::printf("graph_explicit: launch %d OK (m=%g c=%g k=%g, checksum %016llx)\n", step, m, c,
                k, (unsigned long long)Checksum(got.data(), n * sizeof(float)));
  }
  GT_CHECK(cudaGraphExecDestroy(exec));
  GT_CHECK(cudaGraphDestroy(first.graph));
  std::printf("graph_explicit: host, kernel, child graph, empty, event record/wait nodes; exec "
              "update + exec kernel node update; x=%p OK\n", (void*)x);
  return 0;
}
