#include "reproducer/replay/core/restore_pipeline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace kerncap::replay {
namespace {

struct Resolved {
  int workers = 1;
  int slots = 1;
  size_t slot_bytes = 0;
};

Resolved Resolve(const std::vector<RestoreTask>& tasks, const RestorePipelineOptions& o) {
  Resolved r;
  r.workers = o.workers > 0 ? o.workers
                            : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 32);
  r.slots = o.slots > 0 ? o.slots : r.workers + 4;
  r.slot_bytes = std::max<size_t>(o.slot_bytes, 1);
  for (const RestoreTask& t : tasks) {
    if (!t.host && !t.digest->empty()) r.slot_bytes = std::max<size_t>(r.slot_bytes, t.size);
  }
  return r;
}

bool NeedsStaging(const RestoreTask& t) { return !t.host && !t.digest->empty(); }

// A unit of work for one worker, in task order: a run of all-zero device
// chunks with consecutive destinations (one memset), or task indices, all
// host or all staged. `mapping`: the last mapping its destinations need.
struct Batch {
  enum Kind { kStaged, kHost, kZero } kind = kStaged;
  std::vector<size_t> tasks;   // kStaged, kHost
  uint64_t zero_dst = 0;       // kZero
  uint64_t zero_size = 0;
  uint32_t mapping = 0;
};

}  // namespace

void MappingProgress::Publish(size_t n) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (n <= mapped_) return;
    mapped_ = n;
  }
  cv_.notify_all();
}

void MappingProgress::Fail(absl::Status error) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (error_.ok()) error_ = error.ok() ? absl::InternalError("mapping failed") : std::move(error);
  }
  cv_.notify_all();
}

absl::Status MappingProgress::WaitMapped(size_t ordinal) {
  std::unique_lock<std::mutex> l(mu_);
  if (ordinal < mapped_) return absl::OkStatus();
  const auto t0 = std::chrono::steady_clock::now();
  cv_.wait(l, [&] { return ordinal < mapped_ || !error_.ok(); });
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ordinal < mapped_ ? absl::OkStatus() : error_;
}

size_t MappingProgress::mapped() const {
  std::lock_guard<std::mutex> l(mu_);
  return mapped_;
}

double MappingProgress::wait_seconds() const {
  std::lock_guard<std::mutex> l(mu_);
  return wait_seconds_;
}

absl::Status MapInOrder(size_t count, const std::function<absl::Status(size_t)>& map_one,
                        MappingProgress* progress, const std::atomic<bool>* cancel) {
  for (size_t i = 0; i < count; ++i) {
    absl::Status s = cancel != nullptr && cancel->load() ? absl::CancelledError("mapping cancelled")
                                                         : map_one(i);
    if (!s.ok()) {
      progress->Fail(s);
      return s;
    }
    progress->Publish(i + 1);
  }
  return absl::OkStatus();
}

size_t RestoreStagingBytes(const std::vector<RestoreTask>& tasks,
                           const RestorePipelineOptions& options) {
  if (std::none_of(tasks.begin(), tasks.end(), NeedsStaging)) return 0;
  const Resolved r = Resolve(tasks, options);
  return static_cast<size_t>(r.slots) * r.slot_bytes;
}

absl::StatusOr<RestorePipelineStats> RunRestorePipeline(const std::vector<RestoreTask>& tasks,
                                                        const ChunkReader& read,
                                                        const Relocator* relocator,
                                                        RestoreCopier* copier, char* staging,
                                                        const RestorePipelineOptions& options,
                                                        MappingProgress* mapping,
                                                        PatchTally* tally) {
  const auto t0 = std::chrono::steady_clock::now();
  const Resolved cfg = Resolve(tasks, options);
  if (relocator != nullptr && relocator->empty()) relocator = nullptr;
  RestorePipelineStats stats;

  // Plan, in task order: zero runs (device memsets), host batches and staged
  // batches of up to slot_bytes.
  std::vector<Batch> batches;
  Batch zero{Batch::kZero, {}, 0, 0, 0};
  Batch staged{Batch::kStaged, {}, 0, 0, 0}, host{Batch::kHost, {}, 0, 0, 0};
  size_t staged_bytes = 0, host_bytes = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const RestoreTask& t = tasks[i];
    stats.bytes += t.size;
    if (t.size == 0) continue;
    if (!t.host && t.digest->empty()) {
      if (zero.zero_size > 0 && zero.zero_dst + zero.zero_size == t.dst) {
        zero.zero_size += t.size;
        zero.mapping = std::max(zero.mapping, t.mapping);
      } else {
        if (zero.zero_size > 0) batches.push_back(zero);
        zero.zero_dst = t.dst;
        zero.zero_size = t.size;
        zero.mapping = t.mapping;
      }
      stats.zero_bytes += t.size;
      continue;
    }
    Batch& b = t.host ? host : staged;
    size_t& filled = t.host ? host_bytes : staged_bytes;
    if (!b.tasks.empty() && filled + t.size > cfg.slot_bytes) {
      batches.push_back(std::move(b));
      b.tasks.clear();
      b.mapping = 0;
      filled = 0;
    }
    b.tasks.push_back(i);
    if (!t.host) b.mapping = std::max(b.mapping, t.mapping);
    filled += t.size;
  }
  if (zero.zero_size > 0) batches.push_back(zero);
  if (!staged.tasks.empty()) batches.push_back(std::move(staged));
  if (!host.tasks.empty()) batches.push_back(std::move(host));
  const double wait_before = mapping != nullptr ? mapping->wait_seconds() : 0.0;

  std::mutex submit_mu;  // serializes the copier's enqueue calls
  absl::Status first_error;
  std::mutex error_mu;
  std::atomic<bool> failed{false};
  auto fail = [&](absl::Status s) {
    std::lock_guard<std::mutex> l(error_mu);
    if (first_error.ok()) first_error = std::move(s);
    failed = true;
  };
  // The batch's device destinations are mapped (outside submit_mu: other
  // workers keep enqueueing batches whose mappings are ready).
  auto mapped = [&](const Batch& b) {
    return mapping != nullptr ? mapping->WaitMapped(b.mapping) : absl::OkStatus();
  };

  // The slot ring: free slots in release order (oldest submission first);
  // pending[s]: the slot's last copies may still be in flight.
  std::mutex slot_mu;
  std::condition_variable slot_cv;
  std::deque<int> free_slots;
  std::vector<bool> pending(static_cast<size_t>(cfg.slots), false);
  for (int s = 0; s < cfg.slots; ++s) free_slots.push_back(s);
  auto acquire = [&](bool* was_pending) {
    std::unique_lock<std::mutex> l(slot_mu);
    slot_cv.wait(l, [&] { return !free_slots.empty(); });
    int s = free_slots.front();
    free_slots.pop_front();
    *was_pending = pending[static_cast<size_t>(s)];
    return s;
  };
  auto release = [&](int s, bool now_pending) {
    {
      std::lock_guard<std::mutex> l(slot_mu);
      pending[static_cast<size_t>(s)] = now_pending;
      free_slots.push_back(s);
    }
    slot_cv.notify_one();
  };

  std::atomic<size_t> next{0};
  std::atomic<uint64_t> copied{0}, hosted{0}, copies{0}, patched{0};
  auto work = [&] {
    if (absl::Status s = copier->BindThread(); !s.ok()) {
      fail(std::move(s));
      return;
    }
    while (!failed) {
      const size_t bi = next.fetch_add(1);
      if (bi >= batches.size()) break;
      const Batch& b = batches[bi];
      if (b.kind == Batch::kZero) {
        absl::Status s = mapped(b);
        if (s.ok() && !failed) {
          std::lock_guard<std::mutex> l(submit_mu);
          s = copier->ZeroAsync(b.zero_dst, b.zero_size);
        }
        if (!s.ok()) {
          fail(std::move(s));
          break;
        }
        continue;
      }
      if (b.kind == Batch::kHost) {
        for (size_t i : b.tasks) {
          const RestoreTask& t = tasks[i];
          char* dst = reinterpret_cast<char*>(t.dst);
          absl::Status s = read(t, dst);
          if (!s.ok()) {
            fail(std::move(s));
            break;
          }
          if (relocator) patched += relocator->PatchWords(t.src_va, dst, t.size, tally);
          hosted += t.size;
        }
        continue;
      }
      bool was_pending = false;
      const int slot = acquire(&was_pending);
      absl::Status s = was_pending ? copier->WaitSlot(slot) : absl::OkStatus();
      const bool still_pending = was_pending && !s.ok();  // its old copies not known done
      char* base = staging + static_cast<size_t>(slot) * cfg.slot_bytes;
      size_t off = 0;
      for (size_t k = 0; s.ok() && k < b.tasks.size(); ++k) {
        const RestoreTask& t = tasks[b.tasks[k]];
        s = read(t, base + off);
        if (s.ok() && relocator) patched += relocator->PatchWords(t.src_va, base + off, t.size, tally);
        off += t.size;
      }
      if (s.ok() && !failed) s = mapped(b);
      if (!s.ok() || failed) {
        // Nothing of this slot was enqueued now.
        release(slot, still_pending);
        if (!s.ok()) fail(std::move(s));
        break;
      }
      {
        std::lock_guard<std::mutex> l(submit_mu);
        // Coalesce runs of consecutive destinations into one copy each.
        uint64_t run_dst = 0;
        size_t run_off = 0, run_len = 0;
        off = 0;
        auto flush = [&] {
          if (run_len == 0 || !s.ok()) return;
          s = copier->CopyAsync(slot, run_dst, base + run_off, run_len);
          ++copies;
        };
        for (size_t i : b.tasks) {
          const RestoreTask& t = tasks[i];
          if (run_len > 0 && run_dst + run_len == t.dst) {
            run_len += t.size;
          } else {
            flush();
            run_dst = t.dst;
            run_off = off;
            run_len = t.size;
          }
          off += t.size;
        }
        flush();
        if (s.ok()) s = copier->SlotSubmitted(slot);
      }
      release(slot, true);
      if (!s.ok()) {
        fail(std::move(s));
        break;
      }
      copied += off;
    }
  };

  if (!failed && !batches.empty()) {
    const int n = std::min<int>(cfg.workers, static_cast<int>(batches.size()));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) threads.emplace_back(work);
    for (std::thread& t : threads) t.join();
    stats.workers = n;
  }
  {
    std::lock_guard<std::mutex> l(submit_mu);
    absl::Status s = copier->Drain();
    if (!s.ok()) fail(std::move(s));
  }
  if (!first_error.ok()) return first_error;
  stats.copied_bytes = copied;
  stats.host_bytes = hosted;
  stats.copies = copies;
  stats.patched_words = patched;
  if (mapping != nullptr) stats.map_wait_seconds = mapping->wait_seconds() - wait_before;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace kerncap::replay
