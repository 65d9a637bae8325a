// event_bus.h: fan-out of daemon events (agent joined/left, capture started/
// progress/committed/failed, arm changes) to WatchEvents streams.
//
// Publishers never block: each subscriber has a bounded queue, and a
// subscriber that falls behind loses its oldest events (and is told how many
// through Subscription::dropped()), so a stuck client cannot stall ingest.
#ifndef KERNCAP_DAEMON_EVENT_BUS_H_
#define KERNCAP_DAEMON_EVENT_BUS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap {

class EventBus {
 public:
  class Subscription {
   public:
    ~Subscription();
    // Waits up to `timeout` for the next event; nullopt on timeout or when
    // the bus is shut down.
    std::optional<v1::Event> Next(absl::Duration timeout);
    uint64_t dropped() const;

   private:
    friend class EventBus;
    Subscription(EventBus* bus, size_t capacity) : bus_(bus), capacity_(capacity) {}
    void Push(const v1::Event& event);
    void Close();

    EventBus* bus_;
    const size_t capacity_;
    mutable absl::Mutex mu_;
    std::deque<v1::Event> queue_ ABSL_GUARDED_BY(mu_);
    uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
    bool closed_ ABSL_GUARDED_BY(mu_) = false;
  };

  EventBus() = default;
  ~EventBus();

  // Stamps unix_ms if unset and delivers to every subscriber.
  void Publish(v1::Event event);
  std::unique_ptr<Subscription> Subscribe(size_t capacity = 1024);
  // Wakes every subscriber; Next() then returns nullopt.
  void Shutdown();

 private:
  void Unsubscribe(Subscription* sub);

  absl::Mutex mu_;
  std::vector<Subscription*> subs_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kerncap

#endif  // KERNCAP_DAEMON_EVENT_BUS_H_
