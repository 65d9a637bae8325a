#include "agent/core/capture_gate.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace kerncap::agent {
namespace {

using std::chrono::milliseconds;

TEST(CaptureGateTest, ExclusiveWaitsForSharedHolders) {
  CaptureGate gate;
  gate.EnterShared();
  EXPECT_FALSE(gate.TryEnterExclusive(milliseconds(20)));  // a call is in flight
  gate.ExitShared();
  EXPECT_TRUE(gate.TryEnterExclusive(milliseconds(20)));
  EXPECT_TRUE(gate.exclusive());
  gate.ExitExclusive();
  EXPECT_FALSE(gate.exclusive());
}

TEST(CaptureGateTest, SharedBlocksWhileExclusiveHeld) {
  CaptureGate gate;
  ASSERT_TRUE(gate.TryEnterExclusive(milliseconds(10)));
  std::atomic<bool> entered{false};
  std::thread other([&] {
    gate.EnterShared();
    entered = true;
    gate.ExitShared();
  });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(entered.load());  // the app thread is held during the snapshot
  gate.ExitExclusive();
  other.join();
  EXPECT_TRUE(entered.load());
  EXPECT_EQ(gate.shared_count(), 0);
}

TEST(CaptureGateTest, FailedExclusiveReleasesWaitingSharedCallers) {
  CaptureGate gate;
  gate.EnterShared();  // a long call that never finishes in time
  std::atomic<bool> second_entered{false};
  std::thread capturer([&] { EXPECT_FALSE(gate.TryEnterExclusive(milliseconds(100))); });
  std::this_thread::sleep_for(milliseconds(20));
  std::thread app([&] {
    gate.EnterShared();  // waits behind the capturer (writer preference)...
    second_entered = true;
    gate.ExitShared();
  });
  capturer.join();  // ...and proceeds once the capturer gives up
  app.join();
  EXPECT_TRUE(second_entered.load());
  gate.ExitShared();
  EXPECT_EQ(gate.shared_count(), 0);
}

}  // namespace
}  // namespace kerncap::agent
