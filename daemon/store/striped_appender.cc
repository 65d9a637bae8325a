#include "daemon/store/striped_appender.h"

#include <algorithm>
#include <atomic>

namespace kerncap::store {
namespace {

// A small number per thread, in the order threads first append: the ingest
// workers, started together, get consecutive ones and so spread evenly.
size_t ThreadOrdinal() {
  static std::atomic<size_t> next{0};
  thread_local const size_t mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

}  // namespace

StripedAppender::StripedAppender(int stripes, const std::string& packs_dir,
                                 uint64_t pack_target_bytes, const TestHook& test_hook,
                                 const PackAppender::PublishFn& publish) {
  const uint64_t k = static_cast<uint64_t>(std::max(1, stripes));
  for (uint64_t i = 0; i < k; ++i) {
    stripes_.push_back(std::make_unique<PackAppender>(packs_dir, pack_target_bytes, test_hook,
                                                      publish, /*first_seq=*/k + i,
                                                      /*seq_stride=*/k));
  }
}

int StripedAppender::DefaultStripes(int workers) { return std::clamp(workers / 4, 1, 4); }

void StripedAppender::Start() {
  for (auto& s : stripes_) s->Start();
}

void StripedAppender::Stop() {
  for (auto& s : stripes_) s->Stop();
}

absl::StatusOr<uint64_t> StripedAppender::Append(const Digest& d, uint8_t codec,
                                                 absl::string_view stored, uint32_t raw_len,
                                                 uint64_t xxh3) {
  return stripes_[ThreadOrdinal() % stripes_.size()]->Append(d, codec, stored, raw_len, xxh3);
}

absl::Status StripedAppender::EnsureDurable(uint64_t seq) {
  return stripes_[seq % stripes_.size()]->EnsureDurable(seq);
}

bool StripedAppender::FindPending(const Digest& d, uint64_t* seq) {
  for (auto& s : stripes_) {
    if (s->FindPending(d, seq)) return true;
  }
  return false;
}

void StripedAppender::WithoutSeals(absl::FunctionRef<void()> f) { WithoutSealsFrom(0, f); }

void StripedAppender::WithoutSealsFrom(size_t stripe, absl::FunctionRef<void()> f) {
  if (stripe == stripes_.size()) {
    f();
    return;
  }
  stripes_[stripe]->WithoutSeals([&] { WithoutSealsFrom(stripe + 1, f); });
}

}  // namespace kerncap::store
