// agent_link_test_util.h: test fixtures for the agent link (tests only): an
// in-memory recording CaptureSink, a server+client fixture, a helper that runs
// one capture through AgentLinkClient, and a raw protocol peer for
// misbehaviour tests.
#ifndef KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_TEST_UTIL_H_
#define KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_TEST_UTIL_H_

#include "daemon/agent_link/agent_link_server.h"
#include "daemon/caller.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "agent/link/agent_link_client.h"
#include "agent/testing/synthetic_content.h"
#include "common/agent_link/messages.h"
#include "common/digest.h"
#include "common/agent_link/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kerncap::link::testing {

// Callers for the registry and server calls (daemon/caller.h): one user, or
// one that reaches everyone's (root, the daemon's own user).
inline Caller UserCaller(uint32_t uid) {
  Caller c;
  c.uid = uid;
  c.gid = uid;
  c.description = "uid " + std::to_string(uid);
  return c;
}
inline Caller RootCaller() {
  Caller c = UserCaller(0);
  c.privileged = true;
  return c;
}

inline constexpr uint32_t kChunk = 64 * 1024;

// ---------------------------------------------------------------------------
// A CaptureSink that keeps everything in memory.

struct RecordedRegion {
  ImageKind image;
  v1::Region region;
  std::string bytes;
  uint64_t written = 0;
  // MarkUnchanged ranges (byte offset, size): taken from the pre region at
  // Commit, like the store does.
  std::vector<std::pair<uint64_t, uint64_t>> unchanged;
  int same_as = -1;
  uint64_t known = 0;  // bytes MarkKnown filled in
};

struct RecordedCapture {
  std::vector<RecordedRegion> regions;
  std::vector<std::pair<v1::CodeObject, std::string>> code_objects;
  v1::CaptureManifest manifest;
  bool committed = false;
  bool aborted = false;
  std::string abort_reason;
};

class RecordingSink : public CaptureSink {
 public:
  // Consume writes on a separate thread, later (like the real store).
  bool async_consume = false;
  // Keep on_consumed callbacks until ReleaseHeld() (a slow store).
  std::atomic<bool> hold_consumed{false};
  void ReleaseHeld() {
    std::vector<std::function<void()>> held;
    {
      absl::MutexLock lock(&mu_);
      held.swap(held_);
    }
    for (auto& fn : held) fn();
  }
  // Fail AddRegion for the next capture(s).
  std::atomic<int> fail_add_region{0};

  ~RecordingSink() override { StopWorker(); }

  absl::StatusOr<std::unique_ptr<CaptureIngest>> BeginCapture() override;

  std::vector<RecordedCapture> captures() {
    absl::MutexLock lock(&mu_);
    return captures_;
  }
  bool WaitFor(std::function<bool(const std::vector<RecordedCapture>&)> pred,
               absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pred(captures_); };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
  }

  void Defer(std::function<void()> fn) {
    absl::MutexLock lock(&work_mu_);
    if (!worker_.joinable()) worker_ = std::thread([this] { Work(); });
    work_.push_back(std::move(fn));
  }
  void StopWorker() {
    {
      absl::MutexLock lock(&work_mu_);
      stop_ = true;
    }
    if (worker_.joinable()) worker_.join();
  }

 private:
  friend class RecordingIngest;
  void Work() {
    while (true) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&work_mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(work_mu_) {
          return stop_ || !work_.empty();
        };
        work_mu_.Await(absl::Condition(&ready));
        if (work_.empty()) return;
        fn = std::move(work_.front());
        work_.erase(work_.begin());
      }
      fn();
    }
  }

  absl::Mutex mu_;
  std::vector<RecordedCapture> captures_ ABSL_GUARDED_BY(mu_);
  // Chunks of committed captures by digest (MarkKnown / HoldsChunk), like
  // the store's content-addressed chunks.
  std::map<Digest, std::string> chunks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> held_ ABSL_GUARDED_BY(mu_);
  absl::Mutex work_mu_;
  std::vector<std::function<void()>> work_ ABSL_GUARDED_BY(work_mu_);
  bool stop_ ABSL_GUARDED_BY(work_mu_) = false;
  std::thread worker_;
};

class RecordingIngest : public CaptureIngest {
 public:
  RecordingIngest(RecordingSink* sink, size_t index, bool fail_regions)
      : sink_(sink), index_(index), fail_regions_(fail_regions) {}
  ~RecordingIngest() override {
    absl::MutexLock lock(&sink_->mu_);
    RecordedCapture& c = sink_->captures_[index_];
    if (!c.committed && !c.aborted) {
      c.aborted = true;
      c.abort_reason = "dropped";
    }
  }

  absl::StatusOr<int> AddRegion(ImageKind image, const v1::Region& region) override {
    if (fail_regions_) return absl::ResourceExhaustedError("disk full (test)");
    absl::MutexLock lock(&sink_->mu_);
    RecordedCapture& c = sink_->captures_[index_];
    c.regions.push_back({image, region, std::string(region.data().size(), '\0'), 0, {}, -1, 0});
    return static_cast<int>(c.regions.size() - 1);
  }
  absl::Status WriteRegion(int handle, uint64_t offset, const void* data, size_t size,
                           std::function<void()> on_consumed) override {
    auto copy = [this, handle, offset, data, size, on_consumed]() {
      {
        absl::MutexLock lock(&sink_->mu_);
        RecordedRegion& r = sink_->captures_[index_].regions[handle];
        std::memcpy(r.bytes.data() + offset, data, size);
        r.written += size;
        if (sink_->hold_consumed) {
          sink_->held_.push_back(on_consumed);
          return;
        }
      }
      on_consumed();
    };
    {
      absl::MutexLock lock(&sink_->mu_);
      RecordedCapture& c = sink_->captures_[index_];
      if (handle < 0 || handle >= static_cast<int>(c.regions.size())) {
        return absl::InvalidArgumentError("bad handle");
      }
      if (offset % kChunk != 0) return absl::InvalidArgumentError("unaligned");
      if (offset + size > c.regions[handle].bytes.size()) return absl::OutOfRangeError("over");
    }
    if (sink_->async_consume) {
      sink_->Defer(copy);
    } else {
      copy();
    }
    return absl::OkStatus();
  }
  // The checks of the store's ingest (store/ingest.cc), on recorded bytes.
  absl::Status MarkUnchanged(int handle, uint64_t first_chunk, uint64_t count) override {
    absl::MutexLock lock(&sink_->mu_);
    RecordedCapture& c = sink_->captures_[index_];
    if (handle < 0 || handle >= static_cast<int>(c.regions.size())) {
      return absl::InvalidArgumentError("bad handle");
    }
    RecordedRegion& post = c.regions[handle];
    if (post.image != ImageKind::kPost) return absl::InvalidArgumentError("not a post region");
    for (size_t i = 0; i < c.regions.size() && post.same_as < 0; ++i) {
      const RecordedRegion& pre = c.regions[i];
      if (pre.image == ImageKind::kPre && pre.region.va() == post.region.va() &&
          pre.bytes.size() == post.bytes.size()) {
        post.same_as = static_cast<int>(i);
      }
    }
    if (post.same_as < 0) return absl::InvalidArgumentError("no pre-image region");
    const uint64_t chunks = (post.bytes.size() + kChunk - 1) / kChunk;
    if (count == 0 || first_chunk >= chunks || count > chunks - first_chunk) {
      return absl::InvalidArgumentError("outside the region");
    }
    const uint64_t begin = first_chunk * kChunk;
    const uint64_t end = std::min<uint64_t>(post.bytes.size(), (first_chunk + count) * kChunk);
    for (const auto& [o, n] : post.unchanged) {
      if (begin < o + n && o < end) return absl::InvalidArgumentError("twice");
    }
    post.unchanged.emplace_back(begin, end - begin);
    post.written += end - begin;
    return absl::OkStatus();
  }
  // The store's checks: only digests it holds, inside the region, once.
  absl::Status MarkKnown(int handle, uint64_t first_chunk,
                         const std::vector<Digest>& digests) override {
    absl::MutexLock lock(&sink_->mu_);
    RecordedCapture& c = sink_->captures_[index_];
    if (handle < 0 || handle >= static_cast<int>(c.regions.size())) {
      return absl::InvalidArgumentError("bad handle");
    }
    RecordedRegion& r = c.regions[handle];
    const uint64_t chunks = (r.bytes.size() + kChunk - 1) / kChunk;
    if (digests.empty() || first_chunk >= chunks || digests.size() > chunks - first_chunk) {
      return absl::InvalidArgumentError("outside the region");
    }
    for (size_t i = 0; i < digests.size(); ++i) {
      const uint64_t at = (first_chunk + i) * kChunk;
      if (digests[i] == Digest{}) {  // a zero chunk: the store's IsZeroDigest
        const uint64_t n = std::min<uint64_t>(kChunk, r.bytes.size() - at);
        std::memset(r.bytes.data() + at, 0, n);
        r.written += n;
        r.known += n;
        continue;
      }
      auto it = sink_->chunks_.find(digests[i]);
      if (it == sink_->chunks_.end()) return absl::NotFoundError("no such chunk");
      if (it->second.size() != std::min<uint64_t>(kChunk, r.bytes.size() - at)) {
        return absl::InvalidArgumentError("chunk of another length");
      }
      std::memcpy(r.bytes.data() + at, it->second.data(), it->second.size());
      r.written += it->second.size();
      r.known += it->second.size();
    }
    return absl::OkStatus();
  }
  bool HoldsChunk(const Digest& digest) override {
    absl::MutexLock lock(&sink_->mu_);
    return sink_->chunks_.count(digest) > 0;
  }
  absl::StatusOr<std::vector<Digest>> CommittedDigests(int handle) const override {
    absl::MutexLock lock(&sink_->mu_);
    const RecordedCapture& c = sink_->captures_[index_];
    if (!c.committed) return absl::FailedPreconditionError("not committed");
    if (handle < 0 || handle >= static_cast<int>(c.regions.size())) {
      return absl::InvalidArgumentError("bad handle");
    }
    std::vector<Digest> out;
    const std::string& b = c.regions[handle].bytes;
    for (uint64_t at = 0; at < b.size(); at += kChunk) {
      out.push_back(Sha256(b.data() + at, std::min<uint64_t>(kChunk, b.size() - at)));
    }
    return out;
  }
  absl::Status AddCodeObject(const v1::CodeObject& meta, const void* data,
                             size_t size) override {
    absl::MutexLock lock(&sink_->mu_);
    sink_->captures_[index_].code_objects.emplace_back(
        meta, std::string(static_cast<const char*>(data), size));
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Commit(v1::CaptureManifest manifest) override {
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sink_->mu_) {
      for (const auto& r : sink_->captures_[index_].regions) {
        if (r.written < r.bytes.size()) return false;
      }
      return true;
    };
    absl::MutexLock lock(&sink_->mu_);
    if (!sink_->mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(10))) {
      return absl::FailedPreconditionError("region not fully written");
    }
    RecordedCapture& c = sink_->captures_[index_];
    for (RecordedRegion& r : c.regions) {
      for (const auto& [o, n] : r.unchanged) {
        std::memcpy(r.bytes.data() + o, c.regions[r.same_as].bytes.data() + o, n);
      }
    }
    c.manifest = manifest;
    c.committed = true;
    for (const RecordedRegion& r : c.regions) {
      for (uint64_t at = 0; at < r.bytes.size(); at += kChunk) {
        std::string chunk = r.bytes.substr(at, kChunk);
        sink_->chunks_[Sha256(chunk)] = chunk;
      }
    }
    return manifest.capture_id();
  }
  void Abort(absl::string_view reason) override {
    absl::MutexLock lock(&sink_->mu_);
    sink_->captures_[index_].aborted = true;
    sink_->captures_[index_].abort_reason = std::string(reason);
  }
  IngestProgress Progress() const override { return {}; }

 private:
  RecordingSink* sink_;
  size_t index_;
  bool fail_regions_;
};

inline absl::StatusOr<std::unique_ptr<CaptureIngest>> RecordingSink::BeginCapture() {
  absl::MutexLock lock(&mu_);
  captures_.emplace_back();
  bool fail = fail_add_region.load() > 0;
  if (fail) fail_add_region.fetch_sub(1);
  return std::unique_ptr<CaptureIngest>(new RecordingIngest(this, captures_.size() - 1, fail));
}

// ---------------------------------------------------------------------------
// Fixture.

inline bool Eventually(const std::function<bool()>& pred, int timeout_ms = 10000) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

class AgentLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kc-link-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    socket_ = dir_ + "/agent.sock";
    sub_ = bus_.Subscribe(4096);
  }
  void TearDown() override {
    clients_.clear();
    if (server_) server_->Shutdown(true);
    server_.reset();
    sink_.StopWorker();
    std::string cmd = "rm -rf " + dir_;
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  AgentLinkServerOptions Options() {
    AgentLinkServerOptions o;
    o.socket_path = socket_;
    o.slot_size = kChunk;
    o.slot_count = 4;
    o.chunk_size = kChunk;
    o.progress_interval = absl::ZeroDuration();
    return o;
  }
  void StartServer() { StartServer(Options()); }
  void StartServer(const AgentLinkServerOptions& o) {
    server_ = std::make_unique<AgentLinkServer>();
    ASSERT_TRUE(server_->Start(o, sink_, bus_).ok());
  }

  // Options of a client of this server: a synthetic agent of `process_name`.
  agent::AgentLinkClientOptions ClientOptions(const std::string& process_name = "test-app",
                                              int retry_max_ms = 50) {
    agent::AgentLinkClientOptions o;
    o.socket_path = socket_;
    o.identity.process_name = process_name;
    o.identity.platform = Platform::kSynthetic;
    DeviceInfo dev;
    dev.name = "Synthetic Device";
    dev.arch = "synthetic";
    o.identity.devices.push_back(dev);
    o.retry_initial_ms = 10;
    o.retry_max_ms = retry_max_ms;
    o.initial_wait_ms = 2000;
    return o;
  }
  // Starts a client with `o`, owned (and stopped) by the fixture.
  agent::AgentLinkClient& StartClient(const agent::AgentLinkClientOptions& o) {
    clients_.push_back(std::make_unique<agent::AgentLinkClient>(o));
    clients_.back()->Start();
    return *clients_.back();
  }
  agent::AgentLinkClient& NewClient(const std::string& process_name = "test-app",
                                    int retry_max_ms = 50) {
    return StartClient(ClientOptions(process_name, retry_max_ms));
  }

  v1::ArmInfo ArmKernel(const std::string& kernel, uint32_t count = 1) {
    v1::ArmRequest req;
    req.mutable_selector()->set_kernel(kernel);
    req.mutable_selector()->set_count(count);
    absl::StatusOr<v1::ArmInfo> arm = server_->Arm(req, RootCaller());
    EXPECT_TRUE(arm.ok()) << arm.status();
    return arm.ok() ? *arm : v1::ArmInfo();
  }

  // Collects events until `pred` holds for one of them.
  std::optional<v1::Event> WaitEvent(const std::function<bool(const v1::Event&)>& pred) {
    auto deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      std::optional<v1::Event> e = sub_->Next(deadline - absl::Now());
      if (!e.has_value()) break;
      seen_.push_back(*e);
      if (pred(*e)) return e;
    }
    return std::nullopt;
  }

  std::string dir_, socket_;
  RecordingSink sink_;
  EventBus bus_;
  std::unique_ptr<EventBus::Subscription> sub_;
  std::vector<v1::Event> seen_;
  std::unique_ptr<AgentLinkServer> server_;
  std::vector<std::unique_ptr<agent::AgentLinkClient>> clients_;
};

// Runs one capture with `regions` (pre images = data, post = post_data).
inline absl::StatusOr<std::string> DoCapture(agent::AgentLinkClient& client, const std::string& arm_id, const std::string& kernel,
                                      const std::vector<std::string>& pre,
                                      const std::vector<std::string>& post,
                                      const GraphOriginInfo& graph = {}) {
  CaptureBeginMsg begin;
  begin.graph = graph;
  begin.arm_id = arm_id;
  begin.demangled_name = kernel;
  begin.mangled_name = agent::testing::SyntheticMangled(kernel);
  begin.platform = Platform::kSynthetic;
  begin.launch.grid = {8, 1, 1};
  begin.launch.block = {256, 1, 1};
  begin.dispatch_index = 1;
  auto session = client.BeginCapture(begin, std::string("ARGBLOB!", 8));
  if (!session.ok()) return absl::UnavailableError(session.error());
  for (int image = 0; image < 2; ++image) {
    const auto& images = image == 0 ? pre : post;
    for (size_t r = 0; r < images.size(); ++r) {
      RegionBeginMsg region;
      region.image = image == 0 ? ImageKind::kPre : ImageKind::kPost;
      region.va = agent::testing::SyntheticVa(static_cast<uint32_t>(r));
      region.size = images[r].size();
      auto h = (*session)->AddRegion(region);
      if (!h.ok()) return absl::InternalError(h.error());
      LinkStatus s = (*session)->WriteRegion(*h, images[r].data(), images[r].size());
      if (!s.ok()) return absl::InternalError(s.message());
    }
  }
  std::string code = "CUBIN";
  LinkStatus s = (*session)->AddCodeObject(CodeObjectFormat::kCubin, kernel + ".cubin", code.data(), code.size());
  if (!s.ok()) return absl::InternalError(s.message());
  auto id = (*session)->End();
  if (!id.ok()) return absl::AbortedError(id.error());
  return *id;
}

// ---------------------------------------------------------------------------
// Raw protocol peer for misbehaviour tests.

struct RawAgent {
  UniqueFd fd;
  WelcomeMsg welcome;
  UniqueFd ring_fd;

  static RawAgent Connect(const std::string& path, bool hello = true,
                          std::vector<std::string> features = {}) {
    RawAgent a;
    LinkResult<UniqueFd> fd = ConnectUnix(path);
    EXPECT_TRUE(fd.ok()) << fd.error();
    if (!fd.ok()) return a;
    a.fd = std::move(fd).value();
    if (!hello) return a;
    HelloMsg h;
    h.pid = 4242;
    h.process_name = "raw";
    h.features = std::move(features);
    EXPECT_TRUE(SendMessage(a.fd.get(), h).ok());
    LinkResult<Frame> f = RecvFrame(a.fd.get(), FrameLimits());
    EXPECT_TRUE(f.ok()) << f.error();
    if (f.ok()) {
      EXPECT_TRUE(DecodeBody(*f, &a.welcome).ok());
      if (!f->fds.empty()) a.ring_fd = std::move(f->fds[0]);
    }
    return a;
  }
  // True when the daemon dropped us (EOF, possibly after an Error frame).
  bool Dropped(std::string* error_message = nullptr) {
    while (true) {
      bool eof = false;
      LinkResult<Frame> f = RecvFrame(fd.get(), FrameLimits(), &eof);
      if (!f.ok()) return true;
      if (f->type == MessageType::kError && error_message != nullptr) {
        ErrorMsg e;
        (void)DecodeBody(*f, &e);
        *error_message = e.message;
      }
    }
  }
  // Reads frames until the CaptureResult of `token` (Arm, Disarm and
  // SlotFree frames are skipped). nullopt when the daemon dropped us.
  std::optional<CaptureResultMsg> WaitResult(uint64_t token) {
    while (true) {
      LinkResult<Frame> f = RecvFrame(fd.get(), FrameLimits());
      if (!f.ok() || f->type == MessageType::kError) return std::nullopt;
      if (f->type != MessageType::kCaptureResult) continue;
      CaptureResultMsg r;
      if (!DecodeBody(*f, &r).ok()) return std::nullopt;
      if (r.token == token) return r;
    }
  }
  // Begins capture `token` for `arm_id` (an arm selecting "raw_kernel") and
  // declares one pre region of `region_size` bytes.
  void Begin(uint64_t token, uint64_t region_size, const std::string& arm_id) {
    CaptureBeginMsg b;
    b.token = token;
    b.arm_id = arm_id;
    b.demangled_name = "raw_kernel";
    ASSERT_TRUE(SendMessage(fd.get(), b).ok());
    RegionBeginMsg r;
    r.token = token;
    r.size = region_size;
    ASSERT_TRUE(SendMessage(fd.get(), r).ok());
  }
};

}  // namespace kerncap::link::testing

#endif  // KERNCAP_DAEMON_AGENT_LINK_AGENT_LINK_TEST_UTIL_H_
