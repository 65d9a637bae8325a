#include "daemon/event_bus.h"

#include <thread>

#include "gtest/gtest.h"

namespace kerncap {
namespace {

v1::Event Failed(const std::string& id) {
  v1::Event e;
  e.mutable_capture_failed()->set_capture_id(id);
  return e;
}

TEST(EventBusTest, DeliversToEverySubscriberInOrder) {
  EventBus bus;
  auto a = bus.Subscribe();
  auto b = bus.Subscribe();
  bus.Publish(Failed("1"));
  bus.Publish(Failed("2"));
  for (auto* sub : {a.get(), b.get()}) {
    auto e1 = sub->Next(absl::Seconds(1));
    auto e2 = sub->Next(absl::Seconds(1));
    ASSERT_TRUE(e1 && e2);
    EXPECT_EQ(e1->capture_failed().capture_id(), "1");
    EXPECT_EQ(e2->capture_failed().capture_id(), "2");
    EXPECT_GT(e1->unix_ms(), 0);
  }
}

TEST(EventBusTest, SlowSubscriberDropsOldestNotPublisher) {
  EventBus bus;
  auto sub = bus.Subscribe(/*capacity=*/2);
  for (int i = 0; i < 5; ++i) bus.Publish(Failed(std::to_string(i)));
  EXPECT_EQ(sub->dropped(), 3u);
  EXPECT_EQ(sub->Next(absl::Seconds(1))->capture_failed().capture_id(), "3");
}

TEST(EventBusTest, ShutdownWakesWaiter) {
  EventBus bus;
  auto sub = bus.Subscribe();
  std::thread t([&] { bus.Shutdown(); });
  EXPECT_FALSE(sub->Next(absl::Seconds(10)).has_value());
  t.join();
}

TEST(EventBusTest, NextTimesOutWhenIdle) {
  EventBus bus;
  auto sub = bus.Subscribe();
  EXPECT_FALSE(sub->Next(absl::Milliseconds(20)).has_value());
}

}  // namespace
}  // namespace kerncap
