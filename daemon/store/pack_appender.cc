#include "daemon/store/pack_appender.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "common/log.h"
#include "common/status_macros.h"

namespace kerncap::store {

PackAppender::PackAppender(std::string packs_dir, uint64_t pack_target_bytes, TestHook test_hook,
                           PublishFn publish, uint64_t first_seq, uint64_t seq_stride)
    : packs_dir_(std::move(packs_dir)),
      pack_target_bytes_(pack_target_bytes),
      test_hook_(std::move(test_hook)),
      publish_(std::move(publish)),
      seq_stride_(seq_stride),
      open_seq_(first_seq) {}

PackAppender::~PackAppender() { Stop(); }

void PackAppender::Start() {
  sealer_ = std::thread([this] { SealerLoop(); });
}

void PackAppender::Stop() {
  {
    absl::MutexLock l(&mu_);
    open_pack_.reset();
    sealer_stop_ = true;
    sealed_cv_.SignalAll();
  }
  if (sealer_.joinable()) sealer_.join();
}

absl::StatusOr<uint64_t> PackAppender::Append(const Digest& d, uint8_t codec,
                                              absl::string_view stored, uint32_t raw_len,
                                              uint64_t xxh3) {
  absl::MutexLock l(&mu_);
  if (!open_pack_) {
    // Called from PackWriter::Append, i.e. with mu_ held.
    auto writeback = [this](int fd, uint64_t off, uint64_t len)
                         ABSL_NO_THREAD_SAFETY_ANALYSIS { QueueWritebackLocked(fd, off, len); };
    KC_ASSIGN_OR_RETURN(open_pack_, PackWriter::Create(packs_dir_, test_hook_, writeback));
  }
  auto entry = open_pack_->Append(d, codec, stored, raw_len, xxh3);
  if (!entry.ok()) {
    FailOpenPackLocked(entry.status());
    return entry.status();
  }
  const uint64_t seq = open_seq_;
  {
    absl::MutexLock p(&pending_mu_);
    pending_[d] = seq;
  }
  if (open_pack_->bytes() >= pack_target_bytes_) {
    uint64_t sealing_seq;
    auto pack = DetachOpenPackLocked(&sealing_seq);
    SealJob job;
    job.seq = sealing_seq;
    job.pack = std::move(pack);
    seal_queue_.push_back(std::move(job));
    sealed_cv_.SignalAll();  // wakes the sealer
  }
  return seq;
}

void PackAppender::DropPendingLocked(const std::vector<PackEntry>& entries) {
  absl::MutexLock p(&pending_mu_);
  for (const PackEntry& e : entries) pending_.erase(e.digest);
}

bool PackAppender::FindPending(const Digest& d, uint64_t* seq) {
  // Not mu_: that is held through each append's write, and every worker
  // looks here for every chunk (twice for a new one).
  absl::MutexLock p(&pending_mu_);
  auto it = pending_.find(d);
  if (it == pending_.end()) return false;
  *seq = it->second;
  return true;
}

void PackAppender::WithoutSeals(absl::FunctionRef<void()> f) {
  absl::MutexLock l(&mu_);
  f();
}

void PackAppender::FailOpenPackLocked(const absl::Status& why) {
  if (!open_pack_) return;
  log::Error("store.pack_failed", {{"pack", open_pack_->name()}, {"error", why.ToString()}});
  failed_packs_[open_seq_] = why;
  DropPendingLocked(open_pack_->entries());
  open_pack_.reset();  // unlinks the temp file
  open_seq_ += seq_stride_;
}

std::unique_ptr<PackWriter> PackAppender::DetachOpenPackLocked(uint64_t* seq) {
  *seq = open_seq_;
  open_seq_ += seq_stride_;
  sealing_.insert(*seq);
  return std::move(open_pack_);
}

absl::Status PackAppender::SealDetached(std::unique_ptr<PackWriter> pack, uint64_t seq) {
  absl::Status st = pack->Finish();
  std::unique_ptr<PackReader> reader;
  if (st.ok()) {
    auto r = PackReader::Open(pack->path(), pack->name());
    if (r.ok()) {
      reader = std::move(*r);
    } else {
      st = r.status();
    }
  }
  absl::MutexLock l(&mu_);
  if (!st.ok()) {
    log::Error("store.pack_failed", {{"pack", pack->name()}, {"error", st.ToString()}});
    failed_packs_[seq] = st;
    DropPendingLocked(pack->entries());
  } else {
    // Durable now: publish to the index, then drop from pending (in that
    // order: see Store::Impl::FindStored).
    publish_(std::move(reader), pack->entries());
    DropPendingLocked(pack->entries());
    log::Debug(
        "store.pack_sealed",
        {{"pack", pack->name()}, {"bytes", pack->bytes()}, {"chunks", pack->entries().size()}});
  }
  sealing_.erase(seq);
  sealed_cv_.SignalAll();
  return st;
}

void PackAppender::QueueWritebackLocked(int fd, uint64_t offset, uint64_t len) {
  SealJob job;
  job.wb_fd = ::dup(fd);
  if (job.wb_fd < 0) return;  // best effort: fdatasync at seal still syncs it
  job.wb_offset = offset;
  job.wb_len = len;
  seal_queue_.push_back(std::move(job));
  sealed_cv_.SignalAll();
}

void PackAppender::SealerLoop() {
  while (true) {
    SealJob job;
    {
      absl::MutexLock l(&mu_);
      while (seal_queue_.empty() && !sealer_stop_) sealed_cv_.Wait(&mu_);
      if (seal_queue_.empty()) return;
      job = std::move(seal_queue_.front());
      seal_queue_.pop_front();
    }
    if (job.wb_fd >= 0) {
      // Best effort: a write error here resurfaces in the seal's fdatasync.
      (void)::sync_file_range(job.wb_fd, static_cast<off64_t>(job.wb_offset),
                              static_cast<off64_t>(job.wb_len), SYNC_FILE_RANGE_WRITE);
      ::close(job.wb_fd);
      continue;
    }
    // Failures are recorded in failed_packs_ and reach the ingests that
    // depend on the pack through EnsureDurable.
    (void)SealDetached(std::move(job.pack), job.seq);
  }
}

absl::Status PackAppender::EnsureDurable(uint64_t seq) {
  std::unique_ptr<PackWriter> pack;
  {
    absl::MutexLock l(&mu_);
    while (sealing_.contains(seq)) sealed_cv_.Wait(&mu_);
    if (auto it = failed_packs_.find(seq); it != failed_packs_.end()) return it->second;
    if (seq != open_seq_ || !open_pack_) return absl::OkStatus();  // sealed already
    uint64_t detached;
    pack = DetachOpenPackLocked(&detached);
  }
  return SealDetached(std::move(pack), seq);
}

}  // namespace kerncap::store
