#include "daemon/store/chunk_pipeline.h"

#include <utility>

namespace kerncap::store {

ChunkPipeline::ChunkPipeline(uint64_t max_inflight_bytes, int zstd_level, ProcessFn process)
    : max_inflight_bytes_(max_inflight_bytes),
      zstd_level_(zstd_level),
      process_(std::move(process)) {}

ChunkPipeline::~ChunkPipeline() { Stop(); }

void ChunkPipeline::Start(int workers) {
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

void ChunkPipeline::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void ChunkPipeline::Submit(ChunkTask task) {
  absl::MutexLock l(&mu_);
  // Admit at least one chunk even when it alone exceeds the budget.
  while (!stopping_ && queued_bytes_ > 0 && queued_bytes_ + task.size > max_inflight_bytes_) {
    cv_.Wait(&mu_);
  }
  queued_bytes_ += task.size;
  queue_.push_back(std::move(task));
  cv_.SignalAll();
}

void ChunkPipeline::WorkerLoop() {
  ChunkCompressor compressor(zstd_level_);
  std::string scratch;
  std::string private_copy;
  while (true) {
    ChunkTask task;
    {
      absl::MutexLock l(&mu_);
      while (queue_.empty() && !stopping_) cv_.Wait(&mu_);
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    process_(task, compressor, scratch, private_copy);
    {
      absl::MutexLock l(&mu_);
      queued_bytes_ -= task.size;
      cv_.SignalAll();
    }
  }
}

}  // namespace kerncap::store
