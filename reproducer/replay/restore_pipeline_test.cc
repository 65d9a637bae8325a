#include "reproducer/replay/restore_pipeline.h"

#include <atomic>
#include <chrono>
#include <cstring>
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

}  // namespace
}  // namespace kerncap::replay
