// chunk_pipeline.h: the store's worker pool. Producers queue chunks
// (Submit blocks while max_inflight_bytes are queued and not yet processed:
// that bounds a producer's memory, e.g. an agent's ring slots); each worker
// runs the store's per-chunk work (Store::Impl::ProcessChunk: private copy,
// hash, dedup, compress, append) with its own compressor and buffers.
#ifndef KERNCAP_DAEMON_STORE_CHUNK_PIPELINE_H_
#define KERNCAP_DAEMON_STORE_CHUNK_PIPELINE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "format/codec.h"

namespace kerncap::store {

class IngestImpl;

// Calls `on_consumed` once every chunk of one WriteRegion call is processed.
struct WriteGroup {
  explicit WriteGroup(int n, std::function<void()> cb) : remaining(n), on_consumed(std::move(cb)) {}
  std::atomic<int> remaining;
  std::function<void()> on_consumed;
  void Done() {
    if (remaining.fetch_sub(1) == 1 && on_consumed) on_consumed();
  }
};

struct ChunkTask {
  IngestImpl* ingest = nullptr;
  int slot = 0;
  uint32_t chunk = 0;
  const char* data = nullptr;
  uint32_t size = 0;
  std::shared_ptr<WriteGroup> group;
};

class ChunkPipeline {
 public:
  // The per-chunk work; `scratch` and `private_copy` are the worker's own
  // buffers, reused from chunk to chunk.
  using ProcessFn = std::function<void(const ChunkTask& task, ChunkCompressor& compressor,
                                       std::string& scratch, std::string& private_copy)>;

  ChunkPipeline(uint64_t max_inflight_bytes, int zstd_level, ProcessFn process);
  ~ChunkPipeline();  // Stop()
  ChunkPipeline(const ChunkPipeline&) = delete;
  ChunkPipeline& operator=(const ChunkPipeline&) = delete;

  void Start(int workers);
  // Lets the workers finish what is queued, then joins them.
  void Stop();
  // Queues a chunk; blocks while max_inflight_bytes are already queued (at
  // least one chunk is admitted even when it alone exceeds the budget).
  void Submit(ChunkTask task);

 private:
  void WorkerLoop();

  const uint64_t max_inflight_bytes_;
  const int zstd_level_;
  const ProcessFn process_;
  // queued_bytes_ counts bytes from Submit until the chunk is processed.
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<ChunkTask> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace kerncap::store

#endif  // KERNCAP_DAEMON_STORE_CHUNK_PIPELINE_H_
