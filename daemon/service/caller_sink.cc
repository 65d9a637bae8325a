#include "daemon/service/caller_sink.h"

#include <utility>

#include "common/fs_identity.h"

namespace kerncap::service {
namespace {

class CallerIngest final : public CaptureIngest {
 public:
  CallerIngest(std::unique_ptr<CaptureIngest> inner, uint32_t owner_uid)
      : inner_(std::move(inner)), owner_uid_(owner_uid) {}
  ~CallerIngest() override {
    ScopedOwnFsIdentity own;
    inner_.reset();
  }

  absl::StatusOr<int> AddRegion(ImageKind image, const v1::Region& region) override {
    ScopedOwnFsIdentity own;
    return inner_->AddRegion(image, region);
  }
  absl::Status WriteRegion(int handle, uint64_t offset, const void* data, size_t size,
                           std::function<void()> on_consumed) override {
    ScopedOwnFsIdentity own;
    return inner_->WriteRegion(handle, offset, data, size, std::move(on_consumed));
  }
  absl::Status MarkUnchanged(int handle, uint64_t first_chunk, uint64_t count) override {
    ScopedOwnFsIdentity own;
    return inner_->MarkUnchanged(handle, first_chunk, count);
  }
  absl::Status MarkKnown(int handle, uint64_t first_chunk,
                         const std::vector<Digest>& digests) override {
    ScopedOwnFsIdentity own;
    return inner_->MarkKnown(handle, first_chunk, digests);
  }
  bool HoldsChunk(const Digest& digest) override {
    ScopedOwnFsIdentity own;
    return inner_->HoldsChunk(digest);
  }
  absl::StatusOr<std::vector<Digest>> CommittedDigests(int handle) const override {
    ScopedOwnFsIdentity own;
    return inner_->CommittedDigests(handle);
  }
  absl::Status AddCodeObject(const v1::CodeObject& meta, const void* data, size_t size) override {
    ScopedOwnFsIdentity own;
    return inner_->AddCodeObject(meta, data, size);
  }
  absl::StatusOr<std::string> Commit(v1::CaptureManifest manifest) override {
    ScopedOwnFsIdentity own;
    manifest.set_owner_uid(owner_uid_);
    return inner_->Commit(std::move(manifest));
  }
  void Abort(absl::string_view reason) override {
    ScopedOwnFsIdentity own;
    inner_->Abort(reason);
  }
  IngestProgress Progress() const override { return inner_->Progress(); }

 private:
  std::unique_ptr<CaptureIngest> inner_;
  const uint32_t owner_uid_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CaptureIngest>> CallerSink::BeginCapture() {
  ScopedOwnFsIdentity own;
  absl::StatusOr<std::unique_ptr<CaptureIngest>> inner = store_.BeginCapture();
  if (!inner.ok()) return inner.status();
  return std::unique_ptr<CaptureIngest>(new CallerIngest(std::move(*inner), owner_uid_));
}

}  // namespace kerncap::service
