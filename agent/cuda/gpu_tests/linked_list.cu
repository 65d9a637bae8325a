// linked_list: a kernel that chases device pointers stored inside device
// memory (nodes in separate allocations, shuffled). Only the head pointer is
// an argument. Capture target: "list_sum".
#include <algorithm>
#include <vector>

#include "gpu_test_util.h"

struct Node {
  long long value;
  Node* next;
};

__global__ void list_sum(const Node* head, long long* result) {
  long long s = 0;
  for (const Node* n = head; n != nullptr; n = n->next) s += n->value;
  *result = s;
}

int main() {
  SkipIfNoGpu("linked_list");
  const int kNodes = 200;
  std::vector<Node*> nodes(kNodes);
  for (int i = 0; i < kNodes; ++i) GT_CHECK(cudaMalloc(&nodes[i], sizeof(Node)));
  std::vector<int> order(kNodes);
  for (int i = 0; i < kNodes; ++i) order[i] = (i * 37) % kNodes;  // a permutation
  long long expect = 0;
  for (int k = 0; k < kNodes; ++k) {
    Node h;
    h.value = 1000 + order[k];
    h.next = k + 1 < kNodes ? nodes[order[k + 1]] : nullptr;
    expect += h.value;
    GT_CHECK(cudaMemcpy(nodes[order[k]], &h, sizeof(Node), cudaMemcpyHostToDevice));
  }
  long long* dres;
  GT_CHECK(cudaMalloc(&dres, sizeof(long long)));
  list_sum<<<1, 1>>>(nodes[order[0]], dres);
  GT_CHECK(cudaGetLastError());
  long long res = 0;
  GT_CHECK(cudaMemcpy(&res, dres, sizeof(res), cudaMemcpyDeviceToHost));
  GT_EXPECT(res == expect, "sum %lld != %lld", res, expect);
  std::printf("linked_list: %d nodes in separate allocations, head=%p sum=%lld OK\n", kNodes,
              (void*)nodes[order[0]], res);
  return 0;
}
