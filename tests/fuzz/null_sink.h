// null_sink.h: a CaptureSink for the fuzzers that accepts what a store would
// accept (handles, chunk-aligned writes within the region) and keeps nothing,
// so a fuzzer exercises its producer's parsing, not the store's disk.
#ifndef KERNCAP_TESTS_FUZZ_NULL_SINK_H_
#define KERNCAP_TESTS_FUZZ_NULL_SINK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/capture_sink.h"

namespace kerncap::fuzz {

class NullIngest : public CaptureIngest {
 public:
  explicit NullIngest(uint32_t chunk_size) : chunk_size_(chunk_size) {}
  absl::StatusOr<int> AddRegion(ImageKind, const v1::Region& region) override {
    if (dead_) return absl::AbortedError("aborted");
    sizes_.push_back(region.data().size());
    return static_cast<int>(sizes_.size() - 1);
  }
  absl::Status WriteRegion(int handle, uint64_t offset, const void*, size_t size,
                           std::function<void()> on_consumed) override {
    absl::Status st;
    if (handle < 0 || static_cast<size_t>(handle) >= sizes_.size()) {
      st = absl::InvalidArgumentError("bad handle");
    } else if (offset % chunk_size_ != 0 || offset + size > sizes_[handle] || offset + size < offset) {
      st = absl::InvalidArgumentError("bad write");
    }
    if (on_consumed) on_consumed();
    return st;
  }
  absl::Status AddCodeObject(const v1::CodeObject&, const void*, size_t) override {
    return dead_ ? absl::AbortedError("aborted") : absl::OkStatus();
  }
  absl::StatusOr<std::string> Commit(v1::CaptureManifest manifest) override {
    if (dead_) return absl::AbortedError("aborted");
    return manifest.capture_id().empty() ? std::string("cap-000000000001") : manifest.capture_id();
  }
  void Abort(absl::string_view) override { dead_ = true; }
  IngestProgress Progress() const override { return {}; }

 private:
  uint32_t chunk_size_;
  std::vector<uint64_t> sizes_;
  bool dead_ = false;
};

class NullSink : public CaptureSink {
 public:
  explicit NullSink(uint32_t chunk_size) : chunk_size_(chunk_size) {}
  absl::StatusOr<std::unique_ptr<CaptureIngest>> BeginCapture() override {
    return std::unique_ptr<CaptureIngest>(new NullIngest(chunk_size_));
  }

 private:
  uint32_t chunk_size_;
};

}  // namespace kerncap::fuzz

#endif  // KERNCAP_TESTS_FUZZ_NULL_SINK_H_
