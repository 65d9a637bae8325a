#include "agent/cuda/callback_toggle.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace kerncap::agent::cuda {
namespace {

// A fake of the CUPTI enable calls: records every switch.
struct FakeCupti {
  std::vector<bool> calls;
  bool enabled = true;  // CUPTI's state (all on at subscription)
  bool fail_next = false;
  CallbackToggle::SwitchFn Fn() {
    return [this](bool on) {
      if (fail_next) {
        fail_next = false;
        return false;
      }
      calls.push_back(on);
      enabled = on;
      return true;
    };
  }
};

TEST(CallbackToggle, StartsOnAndSwitchesOffWhenSourceIsUnarmed) {
  FakeCupti cupti;
  std::atomic<int> armed{0};
  CallbackToggle toggle(cupti.Fn(), &armed);
  EXPECT_TRUE(toggle.on());
  EXPECT_TRUE(toggle.open());
  toggle.Update();
  EXPECT_FALSE(toggle.on());
  EXPECT_FALSE(toggle.open());
  EXPECT_FALSE(cupti.enabled);
  EXPECT_EQ(cupti.calls, std::vector<bool>({false}));
  toggle.Update();  // no change: no call
  EXPECT_EQ(cupti.calls.size(), 1u);
}

TEST(CallbackToggle, ArmEnablesBeforeOpening) {
  FakeCupti cupti;
  std::atomic<int> armed{0};
  CallbackToggle toggle(cupti.Fn(), &armed);
  toggle.Update();
  EXPECT_FALSE(toggle.BeginCall());  // closed: nothing in flight
  EXPECT_EQ(toggle.in_flight(), 0);
  armed = 1;
  toggle.Update();
  EXPECT_TRUE(cupti.enabled);
  EXPECT_TRUE(toggle.open());
  EXPECT_TRUE(toggle.BeginCall());
  EXPECT_EQ(toggle.in_flight(), 1);
  toggle.EndCall();
  EXPECT_EQ(toggle.in_flight(), 0);
  EXPECT_EQ(cupti.calls, std::vector<bool>({false, true}));
}

TEST(CallbackToggle, DisarmWaitsForCallsInFlight) {
  FakeCupti cupti;
  std::atomic<int> armed{1};
  CallbackToggle toggle(cupti.Fn(), &armed);
  toggle.Update();
  ASSERT_TRUE(toggle.BeginCall());  // e.g. a capture between ENTER and EXIT
  ASSERT_TRUE(toggle.BeginCall());  // another thread holding the gate shared
  armed = 0;
  toggle.Update();
  EXPECT_FALSE(toggle.open());      // no new armed ENTER
  EXPECT_TRUE(cupti.enabled);       // but the EXITs still come
  EXPECT_FALSE(toggle.BeginCall());
  toggle.EndCall();
  EXPECT_TRUE(cupti.enabled);
  toggle.EndCall();                 // the last one switches off
  EXPECT_FALSE(cupti.enabled);
  EXPECT_FALSE(toggle.on());
  EXPECT_EQ(cupti.calls, std::vector<bool>({false}));
}

TEST(CallbackToggle, RearmBeforeDrainKeepsCallbacksOn) {
  FakeCupti cupti;
  std::atomic<int> armed{1};
  CallbackToggle toggle(cupti.Fn(), &armed);
  ASSERT_TRUE(toggle.BeginCall());
  armed = 0;
  toggle.Update();
  armed = 1;
  toggle.Update();
  EXPECT_TRUE(toggle.open());
  toggle.EndCall();
  EXPECT_TRUE(cupti.enabled);
  EXPECT_TRUE(cupti.calls.empty());
}

TEST(CallbackToggle, FailedSwitchOffIsRetriedFromCallbacks) {
  FakeCupti cupti;
  std::atomic<int> armed{0};
  CallbackToggle toggle(cupti.Fn(), &armed);
  cupti.fail_next = true;
  toggle.Update();
  EXPECT_TRUE(cupti.enabled);
  EXPECT_FALSE(toggle.open());
  toggle.FinishPending();
  EXPECT_FALSE(cupti.enabled);
  EXPECT_FALSE(toggle.on());
}

TEST(CallbackToggle, FailedSwitchOnStaysClosed) {
  FakeCupti cupti;
  std::atomic<int> armed{0};
  CallbackToggle toggle(cupti.Fn(), &armed);
  toggle.Update();
  armed = 1;
  cupti.fail_next = true;
  toggle.Update();
  EXPECT_FALSE(toggle.open());  // never open with callbacks off
  toggle.Update();
  EXPECT_TRUE(toggle.open());
  EXPECT_TRUE(cupti.enabled);
}

TEST(CallbackToggle, SetSourceReevaluates) {
  FakeCupti cupti;
  std::atomic<int> always{1};
  std::atomic<int> link{0};
  CallbackToggle toggle(cupti.Fn(), &always);
  toggle.Update();
  EXPECT_TRUE(toggle.on());
  toggle.SetSource(&link);
  EXPECT_FALSE(toggle.on());
  toggle.SetSource(nullptr);
  EXPECT_FALSE(toggle.on());
}

// The source is a count of reasons (an arm, captures in flight): the
// callbacks stay on until the last one goes.
TEST(CallbackToggle, StaysOnUntilTheCountReachesZero) {
  FakeCupti cupti;
  std::atomic<int> refs{2};
  CallbackToggle toggle(cupti.Fn(), &refs);
  refs = 1;  // the arm is used up; a capture is still in flight
  toggle.Update();
  EXPECT_TRUE(toggle.on());
  EXPECT_TRUE(toggle.open());
  refs = 0;
  toggle.Update();
  EXPECT_FALSE(toggle.on());
  EXPECT_FALSE(toggle.open());
  EXPECT_EQ(cupti.calls, std::vector<bool>({false}));
}

// Threads hammer BeginCall/EndCall while arms toggle: at the end the state
// matches the source, nothing is in flight, and CUPTI was never switched off
// while a call was in flight.
TEST(CallbackToggle, ConcurrentCallsNeverSeeOffWhileInFlight) {
  std::atomic<int> armed{1};
  std::atomic<int> in_flight{0};
  std::atomic<bool> enabled{true};
  std::atomic<int> violations{0};
  CallbackToggle toggle(
      [&](bool on) {
        if (!on && in_flight.load() != 0) violations.fetch_add(1);
        enabled = on;
        return true;
      },
      &armed);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        if (toggle.BeginCall()) {
          in_flight.fetch_add(1);
          if (!enabled.load()) violations.fetch_add(1);
          in_flight.fetch_sub(1);
          toggle.EndCall();
        }
        toggle.FinishPending();
      }
    });
  }
  for (int i = 0; i < 2000; ++i) {
    armed = (i % 2) == 0 ? 1 : 0;
    toggle.Update();
  }
  armed = 0;
  toggle.Update();
  stop = true;
  for (auto& t : threads) t.join();
  toggle.FinishPending();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(toggle.in_flight(), 0);
  EXPECT_FALSE(toggle.on());
  EXPECT_FALSE(enabled.load());
}

}  // namespace
}  // namespace kerncap::agent::cuda
