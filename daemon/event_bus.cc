#include "daemon/event_bus.h"

#include <algorithm>

namespace kerncap {

EventBus::Subscription::~Subscription() {
  if (bus_ != nullptr) bus_->Unsubscribe(this);
}

void EventBus::Subscription::Push(const v1::Event& event) {
  absl::MutexLock lock(&mu_);
  if (closed_) return;
  if (queue_.size() >= capacity_) {
    queue_.pop_front();
    ++dropped_;
  }
  queue_.push_back(event);
}

void EventBus::Subscription::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

std::optional<v1::Event> EventBus::Subscription::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || !queue_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (queue_.empty()) return std::nullopt;
  v1::Event event = std::move(queue_.front());
  queue_.pop_front();
  return event;
}

uint64_t EventBus::Subscription::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

EventBus::~EventBus() { Shutdown(); }

void EventBus::Publish(v1::Event event) {
  if (event.unix_ms() == 0) event.set_unix_ms(absl::ToUnixMillis(absl::Now()));
  absl::MutexLock lock(&mu_);
  for (Subscription* sub : subs_) sub->Push(event);
}

std::unique_ptr<EventBus::Subscription> EventBus::Subscribe(size_t capacity) {
  std::unique_ptr<Subscription> sub(new Subscription(this, capacity));
  absl::MutexLock lock(&mu_);
  if (shutdown_) sub->Close();
  subs_.push_back(sub.get());
  return sub;
}

void EventBus::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  for (Subscription* sub : subs_) sub->Close();
}

void EventBus::Unsubscribe(Subscription* sub) {
  absl::MutexLock lock(&mu_);
  subs_.erase(std::remove(subs_.begin(), subs_.end(), sub), subs_.end());
}

}  // namespace kerncap
