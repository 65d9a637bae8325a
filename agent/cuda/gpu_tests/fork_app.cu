// fork_app: forks before using CUDA; the child runs its own kernel (a fresh
// agent state in the child), the parent runs "parent_kernel" after the child
// exits. Capture targets: "child_kernel" (child pid) and "parent_kernel".
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "gpu_test_util.h"

__global__ void child_kernel(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = i * 2;
}
__global__ void parent_kernel(int* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = i * 3;
}

static int RunKernel(bool child) {
  const int n = 1 << 16;
  int* d;
  GT_CHECK(cudaMalloc(&d, n * sizeof(int)));
  if (child) {
    child_kernel<<<(n + 255) / 256, 256>>>(d, n);
  } else {
    parent_kernel<<<(n + 255) / 256, 256>>>(d, n);
  }
  GT_CHECK(cudaGetLastError());
  std::vector<int> h(n);
  GT_CHECK(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) GT_EXPECT(h[i] == i * (child ? 2 : 3), "i=%d", i);
  std::printf("fork_app: %s pid %d ran %s OK\n", child ? "child" : "parent", (int)getpid(),
              child ? "child_kernel" : "parent_kernel");
  return 0;
}

int main() {
  // Device query after fork only: CUDA does not survive fork() once initialized.
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return 1;
  }
  if (pid == 0) {
    SkipIfNoGpu("fork_app (child)");
    return RunKernel(true);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) return 1;
  if (WEXITSTATUS(status) == kSkipCode) return kSkipCode;
  if (WEXITSTATUS(status) != 0) return 1;
  SkipIfNoGpu("fork_app (parent)");
  return RunKernel(false);
}
