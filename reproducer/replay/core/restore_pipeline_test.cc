#include "reproducer/replay/core/restore_pipeline.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kerncap::replay {
namespace {

// A fake device: copies are deferred until the slot is waited for or the
// copier drained (as an asynchronous engine would read the staging memory
// later), so reusing a slot before waiting corrupts the result.
class FakeCopier : public RestoreCopier {
 public:
  explicit FakeCopier(size_t device_bytes) : device_(device_bytes, '\x5a') {}

  absl::Status BindThread() override {
    ++bound_;
    return absl::OkStatus();
  }
  absl::Status CopyAsync(int slot, uint64_t dst, const void* src, size_t size) override {
    std::lock_guard<std::mutex> l(mu_);
    if (on_enqueue) on_enqueue(dst, size);
    EXPECT_FALSE(submitted_[slot]) << "slot " << slot << " reused before WaitSlot";
    EXPECT_LE(dst + size, device_.size());
    queued_[slot].push_back({dst, static_cast<const char*>(src), size});
    ++copies_;
    return absl::OkStatus();
  }
  absl::Status SlotSubmitted(int slot) override {
    std::lock_guard<std::mutex> l(mu_);
    submitted_[slot] = true;
    return absl::OkStatus();
  }
  absl::Status WaitSlot(int slot) override {
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // an engine still busy
    std::lock_guard<std::mutex> l(mu_);
    EXPECT_TRUE(submitted_[slot]) << "waited for a slot that was never submitted";
    Perform(slot);
    ++waits_;
    return absl::OkStatus();
  }
  absl::Status ZeroAsync(uint64_t dst, size_t size) override {
    std::lock_guard<std::mutex> l(mu_);
    if (on_enqueue) on_enqueue(dst, size);
    std::memset(device_.data() + dst, 0, size);
    zero_bytes_ += size;
    return absl::OkStatus();
  }
  absl::Status Drain() override {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [slot, q] : queued_) Perform(slot);
    ++drains_;
    return absl::OkStatus();
  }

  // Called (under the copier's lock) with every enqueued copy or memset.
  std::function<void(uint64_t dst, size_t size)> on_enqueue;

  const std::string& device() const { return device_; }
  int bound() const { return bound_; }
  int waits() const { return waits_; }
  int drains() const { return drains_; }
  uint64_t copies() const { return copies_; }
  uint64_t zero_bytes() const { return zero_bytes_; }

 private:
  struct Copy {
    uint64_t dst;
    const char* src;
    size_t size;
  };
  void Perform(int slot) {
    for (const Copy& c : queued_[slot]) std::memcpy(device_.data() + c.dst, c.src, c.size);
    queued_[slot].clear();
    submitted_[slot] = false;
  }

  std::mutex mu_;
  std::string device_;
  std::map<int, std::vector<Copy>> queued_;
  std::map<int, bool> submitted_;
  std::atomic<int> bound_{0};
  int waits_ = 0;
  int drains_ = 0;
  uint64_t copies_ = 0;
  uint64_t zero_bytes_ = 0;
};

// Chunk content: a function of its destination, never all zero.
char Byte(uint64_t addr) { return static_cast<char>(1 + (addr * 131 + (addr >> 9)) % 251); }

absl::Status FakeRead(const RestoreTask& t, char* out) {
  if (t.digest->empty()) {
    std::memset(out, 0, t.size);
    return absl::OkStatus();
  }
  if (*t.digest == "bad") return absl::DataLossError("chunk does not match its SHA-256 address");
  for (uint32_t i = 0; i < t.size; ++i) out[i] = Byte(t.src_va + i);
  return absl::OkStatus();
}

struct Layout {
  std::vector<RestoreTask> tasks;
  std::string expected;
};

// `n` chunks of `chunk` bytes over a device range, every 5th all-zero, with
// a gap after every 7th (non-contiguous runs), in a shuffled-ish order.
Layout MakeLayout(int n, uint32_t chunk, const std::string* data, const std::string* zero) {
  Layout l;
  uint64_t dst = 0;
  std::vector<RestoreTask> in_order;
  for (int i = 0; i < n; ++i) {
    const uint32_t size = (i == n - 1) ? chunk / 2 + 3 : chunk;  // short tail chunk
    RestoreTask t;
    t.digest = (i % 5 == 4) ? zero : data;
    t.size = size;
    t.dst = dst;
    t.src_va = dst;
    in_order.push_back(t);
    dst += size + ((i % 7 == 6) ? 4096 : 0);
  }
  l.expected.assign(dst, '\x5a');
  for (const RestoreTask& t : in_order) {
    for (uint32_t i = 0; i < t.size; ++i) {
      l.expected[t.dst + i] = t.digest->empty() ? '\0' : Byte(t.src_va + i);
    }
  }
  // Regions come in any order: reverse blocks of 10.
  for (int b = 0; b < n; b += 10) {
    for (int i = std::min(n, b + 10) - 1; i >= b; --i) l.tasks.push_back(in_order[i]);
  }
  return l;
}

TEST(RestorePipelineTest, EveryByteLandsAndSlotsAreRecycledOnlyAfterTheirCopies) {
  const std::string data(32, 'd'), zero;
  Layout l = MakeLayout(203, 4096, &data, &zero);
  RestorePipelineOptions o;
  o.workers = 4;
  o.slots = 3;                // far fewer slots than batches: forces recycling
  o.slot_bytes = 3 * 4096;    // three chunks per slot
  std::vector<char> staging(RestoreStagingBytes(l.tasks, o));
  ASSERT_EQ(staging.size(), 3u * 3 * 4096);
  FakeCopier copier(l.expected.size());
  auto stats = RunRestorePipeline(l.tasks, FakeRead, nullptr, &copier, staging.data(), o);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(copier.device(), l.expected);
  EXPECT_EQ(stats->bytes, stats->copied_bytes + stats->zero_bytes);
  EXPECT_EQ(stats->zero_bytes, copier.zero_bytes());
  EXPECT_GT(stats->zero_bytes, 0u);
  EXPECT_EQ(stats->copies, copier.copies());
  EXPECT_GT(copier.waits(), 0);  // slots were reused
  EXPECT_EQ(copier.drains(), 1);
  EXPECT_EQ(copier.bound(), 4);
  EXPECT_EQ(stats->workers, 4);
}

TEST(RestorePipelineTest, CoalescesConsecutiveChunksIntoOneCopyPerSlot) {
  const std::string data(32, 'd'), zero;
  std::vector<RestoreTask> tasks;
  for (int i = 0; i < 16; ++i) {
    tasks.push_back(RestoreTask{&data, 1024, static_cast<uint64_t>(i) * 1024,
                                static_cast<uint64_t>(i) * 1024, false});
  }
  RestorePipelineOptions o;
  o.workers = 2;
  o.slots = 2;
  o.slot_bytes = 8 * 1024;
  std::vector<char> staging(RestoreStagingBytes(tasks, o));
  FakeCopier copier(16 * 1024);
  auto stats = RunRestorePipeline(tasks, FakeRead, nullptr, &copier, staging.data(), o);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->copies, 2u);
  EXPECT_EQ(stats->copied_bytes, 16u * 1024);
  for (uint64_t a = 0; a < 16 * 1024; ++a) ASSERT_EQ(copier.device()[a], Byte(a)) << a;
}

TEST(RestorePipelineTest, HostChunksAreDecodedInPlaceAndPatched) {
  const std::string data(32, 'd');
  std::vector<uint64_t> host(64, 0);
  Relocator reloc;
  reloc.Add(0x7000'0000'0000ull, 4096, 0x7100'0000'0000ull);
  ASSERT_TRUE(reloc.Finalize().ok());
  // The reader writes pointers into the moved range; the pipeline patches them.
  ChunkReader read = [](const RestoreTask& t, char* out) {
    for (uint32_t i = 0; i < t.size; i += 8) {
      uint64_t v = 0x7000'0000'0000ull + i;
      std::memcpy(out + i, &v, 8);
    }
    return absl::OkStatus();
  };
  std::vector<RestoreTask> tasks;
  for (int i = 0; i < 4; ++i) {
    tasks.push_back(RestoreTask{&data, 128, reinterpret_cast<uint64_t>(host.data()) + i * 128u,
                                0x6000'0000'0000ull + i * 128u, true});
  }
  RestorePipelineOptions o;
  o.workers = 3;
  EXPECT_EQ(RestoreStagingBytes(tasks, o), 0u);
  FakeCopier copier(0);
  auto stats = RunRestorePipeline(tasks, read, &reloc, &copier, nullptr, o);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->host_bytes, 512u);
  EXPECT_EQ(stats->patched_words, 64u);
  EXPECT_EQ(copier.copies(), 0u);
  for (int w = 0; w < 64; ++w) EXPECT_EQ(host[w], 0x7100'0000'0000ull + (w % 16) * 8) << w;
}

TEST(RestorePipelineTest, FirstErrorIsReturnedAfterTheWorkersStopAndTheCopierDrained) {
  const std::string data(32, 'd'), zero, bad = "bad";
  Layout l = MakeLayout(100, 1024, &data, &zero);
  l.tasks[57].digest = &bad;
  RestorePipelineOptions o;
  o.workers = 4;
  o.slots = 2;
  o.slot_bytes = 2048;
  std::vector<char> staging(RestoreStagingBytes(l.tasks, o));
  FakeCopier copier(l.expected.size());
  auto stats = RunRestorePipeline(l.tasks, FakeRead, nullptr, &copier, staging.data(), o);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(copier.drains(), 1);
}

TEST(RestorePipelineTest, EmptyTaskListOnlyDrains) {
  FakeCopier copier(0);
  auto stats = RunRestorePipeline({}, FakeRead, nullptr, &copier, nullptr, {});
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bytes, 0u);
  EXPECT_EQ(copier.drains(), 1);
}

// --- Overlapped mapping ------------------------------------------------------

// `regions` device regions of `region_bytes`, `stride` apart, in order; every
// region has `chunk`-byte chunks, every 6th all-zero; task.mapping = region.
struct MappedLayout {
  std::vector<RestoreTask> tasks;
  std::string expected;
  uint64_t stride = 0;
};
MappedLayout MakeMappedLayout(int regions, uint32_t region_bytes, uint32_t chunk,
                              const std::string* data, const std::string* zero) {
  MappedLayout l;
  l.stride = region_bytes + 8192;
  l.expected.assign(l.stride * static_cast<uint64_t>(regions), '\x5a');
  int n = 0;
  for (int r = 0; r < regions; ++r) {
    for (uint32_t off = 0; off < region_bytes; off += chunk, ++n) {
      RestoreTask t;
      t.digest = (n % 6 == 5) ? zero : data;
      t.size = std::min(chunk, region_bytes - off);
      t.dst = l.stride * static_cast<uint64_t>(r) + off;
      t.src_va = t.dst;
      t.mapping = static_cast<uint32_t>(r);
      for (uint32_t i = 0; i < t.size; ++i) {
        l.expected[t.dst + i] = t.digest->empty() ? '\0' : Byte(t.src_va + i);
      }
      l.tasks.push_back(t);
    }
  }
  return l;
}

// A fake mapper: "maps" region j (sleeping like cuMemCreate+cuMemMap would)
// and marks it; the copier's hook counts enqueues into unmarked regions.
struct FakeMapper {
  explicit FakeMapper(int regions, uint64_t stride, std::chrono::milliseconds delay)
      : stride(stride), delay(delay), marked(static_cast<size_t>(regions)) {}
  absl::Status MapOne(size_t j) {
    std::this_thread::sleep_for(delay);
    if (static_cast<int>(j) == fail_at) return absl::ResourceExhaustedError("cuMemCreate: out of memory");
    marked[j] = true;
    return absl::OkStatus();
  }
  // Every byte of [dst, dst+size) must lie in a marked region.
  void Check(uint64_t dst, size_t size) {
    for (uint64_t r = dst / stride; r <= (dst + size - 1) / stride; ++r) {
      if (r >= marked.size() || !marked[r]) ++violations;
    }
  }
  uint64_t stride;
  std::chrono::milliseconds delay;
  std::vector<std::atomic<bool>> marked;
  std::atomic<int> violations{0};
  int fail_at = -1;
};

TEST(MappingProgressTest, WaitBlocksUntilPublishedAndFailWakesWaiters) {
  MappingProgress p;
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    EXPECT_TRUE(p.WaitMapped(2).ok());
    got = true;
  });
  p.Publish(2);  // mappings 0 and 1 only
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(got);
  p.Publish(3);
  waiter.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(p.mapped(), 3u);
  p.Publish(1);  // never goes back
  EXPECT_EQ(p.mapped(), 3u);

  std::thread failing([&] {
    absl::Status s = p.WaitMapped(5);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  });
  p.Fail(absl::ResourceExhaustedError("out of memory"));
  failing.join();
  EXPECT_TRUE(p.WaitMapped(2).ok());  // what was published stays usable
}

TEST(MappingProgressTest, MapInOrderPublishesInOrderAndStopsAtTheFirstErrorOrCancel) {
  MappingProgress p;
  std::vector<size_t> order;
  absl::Status s = MapInOrder(
      5,
      [&](size_t j) {
        EXPECT_EQ(p.mapped(), j);  // everything before j published, nothing after
        order.push_back(j);
        return j == 3 ? absl::InternalError("cuMemMap failed") : absl::OkStatus();
      },
      &p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(p.mapped(), 3u);
  EXPECT_EQ(p.WaitMapped(3).code(), absl::StatusCode::kInternal);

  MappingProgress q;
  std::atomic<bool> cancel{false};
  int calls = 0;
  s = MapInOrder(
      5,
      [&](size_t j) {
        ++calls;
        if (j == 1) cancel = true;
        return absl::OkStatus();
      },
      &q, &cancel);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(q.mapped(), 2u);
}

// The upload overlaps the mapping: no copy or memset reaches a region before
// it is mapped, the first copies go out long before the last region is
// mapped, and every byte lands.
TEST(RestorePipelineTest, CopiesWaitForTheirRegionWhileLaterRegionsAreStillMapping) {
  const std::string data(32, 'd'), zero;
  constexpr int kRegions = 8;
  MappedLayout l = MakeMappedLayout(kRegions, 40 * 1024, 4096, &data, &zero);
  FakeMapper mapper(kRegions, l.stride, std::chrono::milliseconds(25));
  MappingProgress progress;
  FakeCopier copier(l.expected.size());
  std::atomic<int64_t> mapped_at_first_copy{-1};
  copier.on_enqueue = [&](uint64_t dst, size_t size) {
    mapper.Check(dst, size);
    int64_t unset = -1;
    mapped_at_first_copy.compare_exchange_strong(unset, static_cast<int64_t>(progress.mapped()));
  };
  RestorePipelineOptions o;
  o.workers = 4;
  o.slots = 6;
  o.slot_bytes = 3 * 4096;
  std::vector<char> staging(RestoreStagingBytes(l.tasks, o));
  std::thread map_thread([&] {
    EXPECT_TRUE(MapInOrder(kRegions, [&](size_t j) { return mapper.MapOne(j); }, &progress).ok());
  });
  auto stats = RunRestorePipeline(l.tasks, FakeRead, nullptr, &copier, staging.data(), o, &progress);
  map_thread.join();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(mapper.violations, 0) << "a copy or memset reached a region before it was mapped";
  EXPECT_EQ(copier.device(), l.expected);
  EXPECT_GT(stats->zero_bytes, 0u);
  EXPECT_EQ(stats->bytes, stats->copied_bytes + stats->zero_bytes);
  EXPECT_GE(mapped_at_first_copy, 1);
  EXPECT_LT(mapped_at_first_copy, kRegions) << "the upload waited for every mapping";
  EXPECT_GT(stats->map_wait_seconds, 0.0);
  EXPECT_EQ(copier.drains(), 1);
}

// The control: the same slow mapper without the progress gate is caught by
// the checking copier (the test above can fail).
TEST(RestorePipelineTest, WithoutTheGateTheCheckingCopierSeesUnmappedTargets) {
  const std::string data(32, 'd'), zero;
  constexpr int kRegions = 4;
  MappedLayout l = MakeMappedLayout(kRegions, 16 * 1024, 4096, &data, &zero);
  FakeMapper mapper(kRegions, l.stride, std::chrono::milliseconds(40));
  MappingProgress progress;
  FakeCopier copier(l.expected.size());
  copier.on_enqueue = [&](uint64_t dst, size_t size) { mapper.Check(dst, size); };
  RestorePipelineOptions o;
  o.workers = 2;
  o.slot_bytes = 4096;
  std::vector<char> staging(RestoreStagingBytes(l.tasks, o));
  std::thread map_thread([&] {
    EXPECT_TRUE(MapInOrder(kRegions, [&](size_t j) { return mapper.MapOne(j); }, &progress).ok());
  });
  auto stats = RunRestorePipeline(l.tasks, FakeRead, nullptr, &copier, staging.data(), o);
  map_thread.join();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT(mapper.violations, 0);
}

// A mapping that fails: the pipeline returns the mapper's error after the
// copier drained, and nothing was enqueued into the unmapped regions.
TEST(RestorePipelineTest, MappingErrorStopsTheUploadWithThatError) {
  const std::string data(32, 'd'), zero;
  constexpr int kRegions = 6;
  MappedLayout l = MakeMappedLayout(kRegions, 16 * 1024, 4096, &data, &zero);
  FakeMapper mapper(kRegions, l.stride, std::chrono::milliseconds(5));
  mapper.fail_at = 3;
  MappingProgress progress;
  FakeCopier copier(l.expected.size());
  copier.on_enqueue = [&](uint64_t dst, size_t size) { mapper.Check(dst, size); };
  RestorePipelineOptions o;
  o.workers = 3;
  o.slots = 4;
  o.slot_bytes = 2 * 4096;
  std::vector<char> staging(RestoreStagingBytes(l.tasks, o));
  std::thread map_thread([&] {
    MapInOrder(kRegions, [&](size_t j) { return mapper.MapOne(j); }, &progress).IgnoreError();
  });
  auto stats = RunRestorePipeline(l.tasks, FakeRead, nullptr, &copier, staging.data(), o, &progress);
  map_thread.join();
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kResourceExhausted) << stats.status();
  EXPECT_EQ(mapper.violations, 0);
  EXPECT_EQ(copier.drains(), 1);
}

// Relocated placements are fixed before any mapping: patching and gating
// combine (a relocated region's chunks are patched, then wait for it).
TEST(RestorePipelineTest, RelocatedUploadIsGatedAndPatched) {
  const std::string data(32, 'd');
  constexpr int kRegions = 3;
  constexpr uint64_t kOld = 0x7000'0000'0000ull, kNew = 0x7100'0000'0000ull;
  Relocator reloc;
  reloc.Add(kOld, 4096, kNew);
  ASSERT_TRUE(reloc.Finalize().ok());
  ChunkReader read = [](const RestoreTask& t, char* out) {
    for (uint32_t i = 0; i < t.size; i += 8) {
      uint64_t v = kOld + i % 4096;
      std::memcpy(out + i, &v, 8);
    }
    return absl::OkStatus();
  };
  const uint64_t stride = 16 * 1024;
  std::vector<RestoreTask> tasks;
  for (int r = 0; r < kRegions; ++r) {
    for (uint64_t off = 0; off < stride; off += 1024) {
      tasks.push_back(RestoreTask{&data, 1024, r * stride + off, 0x6000'0000'0000ull + r * stride + off,
                                  false, static_cast<uint32_t>(r)});
    }
  }
  FakeMapper mapper(kRegions, stride, std::chrono::milliseconds(20));
  MappingProgress progress;
  FakeCopier copier(kRegions * stride);
  copier.on_enqueue = [&](uint64_t dst, size_t size) { mapper.Check(dst, size); };
  RestorePipelineOptions o;
  o.workers = 2;
  o.slot_bytes = 4096;
  std::vector<char> staging(RestoreStagingBytes(tasks, o));
  std::thread map_thread([&] {
    EXPECT_TRUE(MapInOrder(kRegions, [&](size_t j) { return mapper.MapOne(j); }, &progress).ok());
  });
  PatchTally tally(reloc.ranges().size());
  auto stats = RunRestorePipeline(tasks, read, &reloc, &copier, staging.data(), o, &progress,
                                  &tally);
  map_thread.join();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(mapper.violations, 0);
  EXPECT_EQ(stats->patched_words, kRegions * stride / 8);
  // Every patched word was counted against the one moved range.
  EXPECT_EQ(tally.count(0), stats->patched_words);
  for (uint64_t a = 0; a < kRegions * stride; a += 8) {
    uint64_t v = 0;
    std::memcpy(&v, copier.device().data() + a, 8);
    ASSERT_EQ(v, kNew + a % 1024) << a;
  }
}

}  // namespace
}  // namespace kerncap::replay
