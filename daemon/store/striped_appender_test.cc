// StripedAppender: each thread appends to its own stripe's open pack,
// sequence numbers name their stripe, and lookups and seals span stripes.
#include "daemon/store/striped_appender.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/digest.h"
#include "daemon/store/store_test_util.h"
#include "format/pack_format.h"
#include "gtest/gtest.h"

namespace kerncap::store {
namespace {

using testing::TempDir;

struct Published {
  absl::Mutex mu;
  std::vector<std::vector<PackEntry>> packs;
};

TEST(StripedAppenderTest, ThreadsAppendToTheirOwnStripeAndSealsFollowTheNumber) {
  TempDir dir;
  Published published;
  StripedAppender appender(3, dir.Sub("packs"), /*pack_target_bytes=*/1ull << 30, nullptr,
                           [&](std::unique_ptr<PackReader>, const std::vector<PackEntry>& e) {
                             absl::MutexLock l(&published.mu);
                             published.packs.push_back(e);
                           });
  appender.Start();
  std::vector<uint64_t> seqs(3);
  std::vector<Digest> digests(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    digests[t] = Sha256(std::string(1, static_cast<char>('a' + t)));
    threads.emplace_back([&, t] {
      const std::string bytes(100, static_cast<char>('a' + t));
      auto seq = appender.Append(digests[t], kCodecRaw, bytes, 100, Xxh3(bytes.data(), bytes.size()));
      ASSERT_TRUE(seq.ok()) << seq.status();
      seqs[t] = *seq;
    });
  }
  for (auto& t : threads) t.join();
  // Three new threads: three stripes, so three residues of the stride 3.
  std::set<uint64_t> residues;
  for (uint64_t s : seqs) residues.insert(s % 3);
  EXPECT_EQ(residues.size(), 3u);
  // Each chunk is found pending in whichever stripe holds it.
  for (int t = 0; t < 3; ++t) {
    uint64_t seq = 0;
    ASSERT_TRUE(appender.FindPending(digests[t], &seq));
    EXPECT_EQ(seq, seqs[t]);
  }
  uint64_t none = 0;
  EXPECT_FALSE(appender.FindPending(Sha256("not appended"), &none));
  // Sealing one number seals its stripe's pack only.
  absl::Status sealed = appender.EnsureDurable(seqs[1]);
  ASSERT_TRUE(sealed.ok()) << sealed;
  {
    absl::MutexLock l(&published.mu);
    ASSERT_EQ(published.packs.size(), 1u);
    ASSERT_EQ(published.packs[0].size(), 1u);
    EXPECT_EQ(published.packs[0][0].digest, digests[1]);
  }
  EXPECT_FALSE(appender.FindPending(digests[1], &none));
  EXPECT_TRUE(appender.FindPending(digests[0], &none));
  // While WithoutSeals runs, no stripe publishes: a seal asked for meanwhile
  // (its thread running) waits until it returns.
  std::thread sealer;
  std::atomic<bool> sealer_running{false};
  appender.WithoutSeals([&] {
    sealer = std::thread([&] {
      sealer_running = true;
      ASSERT_TRUE(appender.EnsureDurable(seqs[0]).ok());
    });
    while (!sealer_running) absl::SleepFor(absl::Milliseconds(1));
    absl::SleepFor(absl::Milliseconds(50));
    absl::MutexLock l(&published.mu);
    EXPECT_EQ(published.packs.size(), 1u);
  });
  sealer.join();
  {
    absl::MutexLock l(&published.mu);
    EXPECT_EQ(published.packs.size(), 2u);
  }
  appender.Stop();
}

TEST(StripedAppenderTest, DefaultIsOnePackPerFourWorkersUpToFour) {
  EXPECT_EQ(StripedAppender::DefaultStripes(1), 1);
  EXPECT_EQ(StripedAppender::DefaultStripes(2), 1);
  EXPECT_EQ(StripedAppender::DefaultStripes(8), 2);
  EXPECT_EQ(StripedAppender::DefaultStripes(16), 4);
  EXPECT_EQ(StripedAppender::DefaultStripes(128), 4);
}

}  // namespace
}  // namespace kerncap::store
