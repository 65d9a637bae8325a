#include "reproducer/replay/restore_pipeline.h"

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

// A unit of work for one worker: task indices, all host or all staged.
struct Batch {
  bool host = false;
  std::vector<size_t> tasks;
};

}  // namespace

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
                                                        const RestorePipelineOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const Resolved cfg = Resolve(tasks, options);
  if (relocator != nullptr && relocator->empty()) relocator = nullptr;
  RestorePipelineStats stats;

  // Plan: zero runs (device memsets), host batches and staged batches of up
  // to slot_bytes, in task order.
  std::vector<Batch> batches;
  std::vector<std::pair<uint64_t, uint64_t>> zero_runs;
  Batch staged, host;
  size_t staged_bytes = 0, host_bytes = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const RestoreTask& t = tasks[i];
    stats.bytes += t.size;
    if (t.size == 0) continue;
    if (!t.host && t.digest->empty()) {
      if (!zero_runs.empty() && zero_runs.back().first + zero_runs.back().second == t.dst) {
        zero_runs.back().second += t.size;
      } else {
        zero_runs.emplace_back(t.dst, t.size);
      }
      stats.zero_bytes += t.size;
      continue;
    }
    Batch& b = t.host ? host : staged;
    size_t& filled = t.host ? host_bytes : staged_bytes;
    if (!b.tasks.empty() && filled + t.size > cfg.slot_bytes) {
      batches.push_back(std::move(b));
      b = Batch{};
      filled = 0;
    }
    b.host = t.host;
    b.tasks.push_back(i);
    filled += t.size;
  }
  if (!staged.tasks.empty()) batches.push_back(std::move(staged));
  if (!host.tasks.empty()) batches.push_back(std::move(host));

  std::mutex submit_mu;  // serializes the copier's enqueue calls
  absl::Status first_error;
  std::mutex error_mu;
  std::atomic<bool> failed{false};
  auto fail = [&](absl::Status s) {
    std::lock_guard<std::mutex> l(error_mu);
    if (first_error.ok()) first_error = std::move(s);
    failed = true;
  };

  {
    std::lock_guard<std::mutex> l(submit_mu);
    for (const auto& [dst, size] : zero_runs) {
      absl::Status s = copier->ZeroAsync(dst, size);
      if (!s.ok()) {
        fail(std::move(s));
        break;
      }
    }
  }

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
      if (b.host) {
        for (size_t i : b.tasks) {
          const RestoreTask& t = tasks[i];
          char* dst = reinterpret_cast<char*>(t.dst);
          absl::Status s = read(t, dst);
          if (!s.ok()) {
            fail(std::move(s));
            break;
          }
          if (relocator) patched += relocator->PatchWords(t.src_va, dst, t.size);
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
        if (s.ok() && relocator) patched += relocator->PatchWords(t.src_va, base + off, t.size);
        off += t.size;
      }
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
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace kerncap::replay
