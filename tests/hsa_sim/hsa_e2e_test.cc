// End-to-end tests of the HSA path, on the simulated runtime:
//   HIP-like host program -> libkerncap_agent_hsa.so loaded through OnLoad ->
//   real AgentLinkServer (kerncapd's agent socket + ring) -> recording sink
//   -> HSA replay on a fresh simulated runtime at the original addresses.
// The code objects are real (clang-15, gfx90a); kernels run as host code.
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/testing/standin_daemon.h"
#include "daemon/agent_link/agent_link_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reproducer/replay/hsa/hsa_replay.h"
#include "tests/hsa_sim/host_kernels.h"
#include "tests/hsa_sim/sim_runtime.h"
#include "tests/hsa_sim/sim_test_util.h"

namespace kerncap::hsa_sim {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

std::string CodeObject(const std::string& name) {
  return TestCodeObject(KERNCAP_HSA_TEST_CO_DIR, name);
}

template <typename T>
std::array<uint8_t, 64> Bytes(const T& packet) {
  static_assert(sizeof(T) == 64);
  std::array<uint8_t, 64> b;
  std::memcpy(b.data(), &packet, 64);
  return b;
}

std::vector<float> AsFloats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

class HsaE2eTest : public link::testing::AgentLinkTest {
 protected:
  void SetUp() override {
    AgentLinkTest::SetUp();
    co_ = CodeObject("kernels_gfx90a_v5.hsaco");
    if (co_.empty()) GTEST_SKIP() << "test code objects not built";
    StartServer();
    setenv("KERNCAP_AGENT_SOCKET", socket_.c_str(), 1);
    setenv("KERNCAP_AGENT_LOG", "info", 1);
    sim_ = std::make_unique<SimRuntime>();
    RegisterTestKernels(*sim_);
    std::string err;
    ASSERT_TRUE(sim_->LoadTool(KERNCAP_HSA_AGENT_SO, &err)) << err;
    app_ = std::make_unique<SimHostProgram>(sim_.get());
  }
  void TearDown() override {
    app_.reset();
    sim_.reset();  // OnUnload: the agent stops its link
    AgentLinkTest::TearDown();
  }

  // Arms `kernel` and waits until the agent holds the arm. The agent links
  // to the daemon at its first queue creation, so create a queue first.
  void Arm(const std::string& kernel) {
    ArmKernel(kernel);
    const int held = WaitAgentArms(KERNCAP_HSA_AGENT_SO, 1, 10000);
    ASSERT_NE(held, -1) << "no kerncap_agent_hsa_wait_arms in the loaded agent";
    ASSERT_EQ(held, 1) << "the agent never received the arm";
  }

  link::testing::RecordedCapture WaitCapture(size_t n = 1) {
    EXPECT_TRUE(sink_.WaitFor([n](const std::vector<link::testing::RecordedCapture>& c) {
      size_t done = 0;
      for (const auto& x : c) done += x.committed || x.aborted;
      return done >= n;
    }));
    auto caps = sink_.captures();
    EXPECT_GE(caps.size(), n);
    if (caps.size() < n) return {};
    EXPECT_TRUE(caps[n - 1].committed) << caps[n - 1].abort_reason;
    return caps[n - 1];
  }

  float* Floats(size_t n, float base, float step) { return DeviceFloats(*app_, n, base, step); }

  // The pre/post bytes of the region at `va` (empty if not captured).
  static std::string RegionBytes(const link::testing::RecordedCapture& c, kerncap::ImageKind image,
                                 uint64_t va) {
    for (const auto& r : c.regions) {
      if (r.image == image && r.region.va() == va) return r.bytes;
    }
    return "";
  }

  // Replays the capture on a fresh simulated runtime (the app's is torn down
  // first, so the original addresses are free, as in a new process).
  replay::hsa::HsaReplayReport Replay(const link::testing::RecordedCapture& c) {
    replay::hsa::HsaReplayInput in;
    const v1::CaptureManifest& m = c.manifest;
    EXPECT_FALSE(c.code_objects.empty());
    if (!c.code_objects.empty()) in.code_object = c.code_objects[0].second;
    in.kernel = m.kernel().mangled_name();
    in.kernarg = m.argument_blob();
    for (int i = 0; i < 3 && i < m.launch().grid_size(); ++i) in.grid[i] = m.launch().grid(i);
    for (int i = 0; i < 3 && i < m.launch().block_size(); ++i) {
      in.workgroup[i] = static_cast<uint16_t>(m.launch().block(i));
    }
    in.group_segment_size = m.launch().shared_mem_bytes();
    // The recorded bytes, served by chunk digest as a capture's would be.
    replay::hsa::InMemoryChunks chunks(64 << 10);
    for (const auto& r : c.regions) {
      if (r.image != kerncap::ImageKind::kPre) continue;
      const std::string post = RegionBytes(c, kerncap::ImageKind::kPost, r.region.va());
      in.regions.push_back(chunks.Region(
          r.region.va(), r.bytes, post.empty() ? nullptr : &post,
          r.region.kind() == v1::REGION_MODULE_GLOBAL || r.region.kind() == v1::REGION_CONSTANT,
          r.region.name()));
    }
    in.read = chunks.reader();
    app_.reset();
    sim_.reset();
    SimRuntime fresh;
    RegisterTestKernels(fresh);
    auto report = replay::hsa::ReplayDispatch(fresh.table(), in, replay::hsa::HsaReplayOptions{});
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? *report : replay::hsa::HsaReplayReport{};
  }

  std::string co_;
  std::unique_ptr<SimRuntime> sim_;
  std::unique_ptr<SimHostProgram> app_;
};

TEST_F(HsaE2eTest, MultiPacketSubmitCapturesTargetAndPassesUnknownPackets) {
  hsa_executable_t exe = app_->Load(co_);
  ASSERT_NE(exe.handle, 0u);
  hsa_queue_t* q = app_->CreateQueue();
  ASSERT_NE(q, nullptr);
  Arm("vector_add");
  const int n = 1000;
  float* a = Floats(n, 1, 1);
  float* b = Floats(n, 1000, -0.5f);
  float* c = Floats(n, 0, 0);
  int* fill = static_cast<int*>(app_->DeviceAlloc(n * sizeof(int)));
  float* x = Floats(n, 3, 0);

  hsa_signal_t s1 = app_->NewSignal(1), s2 = app_->NewSignal(1), s3 = app_->NewSignal(1),
               s4 = app_->NewSignal(1);
  hsa_barrier_and_packet_t barrier;
  std::memset(&barrier, 0, sizeof(barrier));
  barrier.header = HSA_PACKET_TYPE_BARRIER_AND | (1 << HSA_PACKET_HEADER_BARRIER);
  // A vendor-specific packet with a recognisable payload and no signal.
  std::array<uint8_t, 64> vendor{};
  vendor[0] = HSA_PACKET_TYPE_VENDOR_SPECIFIC;
  for (int i = 2; i < 56; ++i) vendor[i] = static_cast<uint8_t>(0xA0 + i);
  auto d_fill = app_->Dispatch(exe, "_ZN2kc4fillIiEEvPT_S1_i",
                               {reinterpret_cast<uint64_t>(fill), 7, n}, n, s1);
  auto d_add = app_->Dispatch(exe, "vector_add",
                              {reinterpret_cast<uint64_t>(a), reinterpret_cast<uint64_t>(b),
                               reinterpret_cast<uint64_t>(c), n}, n, s2);
  float two = 2.0f;
  uint32_t two_bits;
  std::memcpy(&two_bits, &two, 4);
  auto d_scale = app_->Dispatch(exe, "scale_inplace", {reinterpret_cast<uint64_t>(x), two_bits, n},
                                n, s3);
  barrier.completion_signal = s4;
  app_->Submit(q, {Bytes(barrier), Bytes(d_fill), Bytes(d_add), vendor, Bytes(d_scale)});
  for (hsa_signal_t s : {s1, s2, s3, s4}) ASSERT_TRUE(app_->Wait(s));

  // Every packet did its job, in order.
  EXPECT_EQ(fill[0], 7);
  EXPECT_EQ(fill[n - 1], 7);
  EXPECT_FLOAT_EQ(c[10], 11 + (1000 - 5));
  EXPECT_FLOAT_EQ(x[5], 6);
  auto unknown = sim_->unknown_packets();
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_TRUE(unknown[0].bytes == vendor) << "the vendor packet was altered";

  link::testing::RecordedCapture cap = WaitCapture();
  const v1::CaptureManifest& m = cap.manifest;
  EXPECT_EQ(m.kernel().mangled_name(), "vector_add");
  EXPECT_EQ(m.kernel().arch(), "gfx90a");
  EXPECT_EQ(m.launch().grid(0), static_cast<uint32_t>(n));
  // Inputs as they were before the kernel; output after.
  auto pre_a = AsFloats(RegionBytes(cap, kerncap::ImageKind::kPre, reinterpret_cast<uint64_t>(a)));
  ASSERT_GE(pre_a.size(), static_cast<size_t>(n));
  EXPECT_FLOAT_EQ(pre_a[10], 11);
  auto post_c = AsFloats(RegionBytes(cap, kerncap::ImageKind::kPost, reinterpret_cast<uint64_t>(c)));
  ASSERT_GE(post_c.size(), static_cast<size_t>(n));
  EXPECT_FLOAT_EQ(post_c[10], 11 + (1000 - 5));
  // fill ran before the target (same submission): already in the pre image.
  std::string pre_fill = RegionBytes(cap, kerncap::ImageKind::kPre, reinterpret_cast<uint64_t>(fill));
  ASSERT_GE(pre_fill.size(), 4u);
  EXPECT_EQ(pre_fill[0], 7);
  ASSERT_EQ(cap.code_objects.size(), 1u);
  EXPECT_TRUE(cap.code_objects[0].second == co_);

  auto report = Replay(cap);
  EXPECT_TRUE(report.valid);
  EXPECT_FALSE(report.regions.empty());
  EXPECT_EQ(report.times_ns.size(), 5u);
}

TEST_F(HsaE2eTest, InPlaceKernelReplaysFromPreState) {
  hsa_executable_t exe = app_->Load(co_);
  hsa_queue_t* q = app_->CreateQueue();
  Arm("scale_inplace");
  const int n = 300;
  float* x = Floats(n, 1, 1);
  float three = 3.0f;
  uint32_t bits;
  std::memcpy(&bits, &three, 4);
  ASSERT_TRUE(app_->Run(exe, q, "scale_inplace", {reinterpret_cast<uint64_t>(x), bits, n}, n));
  EXPECT_FLOAT_EQ(x[4], 15);
  auto cap = WaitCapture();
  auto pre = AsFloats(RegionBytes(cap, kerncap::ImageKind::kPre, reinterpret_cast<uint64_t>(x)));
  auto post = AsFloats(RegionBytes(cap, kerncap::ImageKind::kPost, reinterpret_cast<uint64_t>(x)));
  ASSERT_GE(pre.size(), 5u);
  ASSERT_GE(post.size(), 5u);
  EXPECT_FLOAT_EQ(pre[4], 5) << "the input must be captured before the kernel ran";
  EXPECT_FLOAT_EQ(post[4], 15);
  auto report = Replay(cap);
  EXPECT_TRUE(report.valid);
}

TEST_F(HsaE2eTest, PointerArray) {
  hsa_executable_t exe = app_->Load(co_);
  hsa_queue_t* q = app_->CreateQueue();
  Arm("sum_rows");
  const int rows = 4, cols = 8;
  auto** table = static_cast<float**>(app_->DeviceAlloc(rows * sizeof(float*)));
  for (int r = 0; r < rows; ++r) table[r] = Floats(cols, static_cast<float>(r), 1);
  float* out = Floats(rows, 0, 0);
  ASSERT_TRUE(app_->Run(
      exe, q, "sum_rows",
      {reinterpret_cast<uint64_t>(table), reinterpret_cast<uint64_t>(out), rows, cols}, rows));
  EXPECT_FLOAT_EQ(out[1], 8 * 1 + 28);
  auto cap = WaitCapture();
  auto report = Replay(cap);
  EXPECT_TRUE(report.valid);
}

TEST_F(HsaE2eTest, ConstantVariableIsCapturedAndRestoredByName) {
  hsa_executable_t exe = app_->Load(co_);
  hsa_queue_t* q = app_->CreateQueue();
  Arm("affine_const");
  uint64_t sb = app_->VariableAddress(exe, "kc_scale_bias");
  ASSERT_NE(sb, 0u);
  float params[4] = {2.0f, 0.5f, 0, 0};
  app_->core()->hsa_memory_copy_fn(reinterpret_cast<void*>(sb), params, sizeof(params));
  const int n = 64;
  float* x = Floats(n, 1, 1);
  float* y = Floats(n, 0, 0);
  ASSERT_TRUE(app_->Run(exe, q, "affine_const",
                        {reinterpret_cast<uint64_t>(x), reinterpret_cast<uint64_t>(y), n}, n));
  EXPECT_FLOAT_EQ(y[3], 4 * 2.0f + 0.5f);
  auto cap = WaitCapture();
  bool found = false;
  for (const auto& r : cap.regions) {
    if (r.image == kerncap::ImageKind::kPre && r.region.name() == "kc_scale_bias") {
      found = true;
      EXPECT_EQ(r.region.kind(), v1::REGION_MODULE_GLOBAL);
      EXPECT_EQ(AsFloats(r.bytes)[0], 2.0f);
    }
  }
  EXPECT_TRUE(found);
  auto report = Replay(cap);
  EXPECT_TRUE(report.valid);
  EXPECT_TRUE(report.warnings.empty()) << report.warnings[0];
}

TEST_F(HsaE2eTest, TwoQueuesStayConsistent) {
  hsa_executable_t exe = app_->Load(co_);
  hsa_queue_t* qa = app_->CreateQueue();
  hsa_queue_t* qb = app_->CreateQueue();
  Arm("vector_add");
  const int n = 256;
  int* other = static_cast<int*>(app_->DeviceAlloc(n * sizeof(int)));
  std::atomic<bool> stop{false};
  std::atomic<int> background{0};
  std::thread t([&] {
    for (int i = 0; i < 200 && !stop.load(); ++i) {
      hsa_signal_t s = app_->NewSignal(1);
      auto d = app_->Dispatch(exe, "_ZN2kc4fillIiEEvPT_S1_i",
                              {reinterpret_cast<uint64_t>(other), static_cast<uint64_t>(i), n}, n, s);
      app_->SubmitOne(qb, &d);
      if (!app_->Wait(s)) break;
      ++background;
    }
  });
  while (background.load() < 5) std::this_thread::yield();
  float* a = Floats(n, 1, 0);
  float* b = Floats(n, 2, 0);
  float* c = Floats(n, 0, 0);
  hsa_signal_t s = app_->NewSignal(1);
  auto d = app_->Dispatch(exe, "vector_add",
                          {reinterpret_cast<uint64_t>(a), reinterpret_cast<uint64_t>(b),
                           reinterpret_cast<uint64_t>(c), n}, n, s);
  app_->SubmitOne(qa, &d);
  ASSERT_TRUE(app_->Wait(s));
  auto cap = WaitCapture();
  stop = true;
  t.join();
  EXPECT_GE(background.load(), 5);
  EXPECT_FLOAT_EQ(c[0], 3);
  // The other queue's buffer is in the image and identical pre/post: nothing
  // ran on queue B while the snapshot was taken.
  std::string pre = RegionBytes(cap, kerncap::ImageKind::kPre, reinterpret_cast<uint64_t>(other));
  std::string post = RegionBytes(cap, kerncap::ImageKind::kPost, reinterpret_cast<uint64_t>(other));
  ASSERT_FALSE(pre.empty());
  EXPECT_TRUE(pre == post) << "queue B wrote memory during the capture";
}

TEST_F(HsaE2eTest, HiddenArgumentsRecordedAndPatched) {
  hsa_executable_t exe = app_->Load(co_);  // code object v5: hidden args
  hsa_queue_t* q = app_->CreateQueue();
  Arm("vector_add");
  const int n = 128;
  float* a = Floats(n, 1, 0);
  float* b = Floats(n, 1, 0);
  float* c = Floats(n, 0, 0);
  ASSERT_TRUE(app_->Run(exe, q, "vector_add",
                        {reinterpret_cast<uint64_t>(a), reinterpret_cast<uint64_t>(b),
                         reinterpret_cast<uint64_t>(c), n},
                        n));
  auto cap = WaitCapture();
  std::vector<std::string> hidden;
  for (const auto& arg : cap.manifest.arguments()) {
    if (arg.kind() == v1::ARG_HIDDEN) hidden.push_back(arg.name());
  }
  EXPECT_THAT(hidden, Contains("hidden_queue_ptr"));
  EXPECT_THAT(hidden, Contains("hidden_block_count_x"));
  // The kernarg blob holds the hidden values the runtime wrote.
  EXPECT_EQ(cap.manifest.argument_blob().size(), 288u);
  auto report = Replay(cap);
  EXPECT_TRUE(report.valid);
  bool patched_queue = false;
  for (const auto& p : report.patched_hidden_args) patched_queue |= p.rfind("hidden_queue_ptr", 0) == 0;
  EXPECT_TRUE(patched_queue);
}

TEST_F(HsaE2eTest, KernargSizeMissingFromSymbolAndMetadata) {
  std::string co = CodeObject("tensile_like_gfx90a.hsaco");
  if (co.empty()) GTEST_SKIP() << "Tensile-style code object not built";
  hsa_executable_t exe = app_->Load(co);
  hsa_queue_t* q = app_->CreateQueue();
  Arm("tensile_like");
  const int n = 100;
  float* in = Floats(n, 1, 1);
  float* out = Floats(n, 0, 0);
  ASSERT_TRUE(app_->Run(exe, q, "tensile_like",
                        {reinterpret_cast<uint64_t>(in), reinterpret_cast<uint64_t>(out), n}, n));
  EXPECT_FLOAT_EQ(out[2], 7);
  auto cap = WaitCapture();
  // From the kernel descriptor: in(8) out(8) n(4) = 20 explicit bytes.
  EXPECT_GE(cap.manifest.argument_blob().size(), 20u);
  EXPECT_EQ(cap.manifest.launch().attributes().at("hsa.kernarg_segment_size"),
            static_cast<int64_t>(cap.manifest.argument_blob().size()));
  auto report = Replay(cap);
  EXPECT_TRUE(report.valid);
}

TEST_F(HsaE2eTest, UnarmedDispatchesAreForwardedUnchanged) {
  hsa_executable_t exe = app_->Load(co_);
  hsa_queue_t* q = app_->CreateQueue();
  const int n = 64;
  int* p = static_cast<int*>(app_->DeviceAlloc(n * sizeof(int)));
  hsa_signal_t s = app_->NewSignal(1);
  auto d = app_->Dispatch(exe, "_ZN2kc4fillIiEEvPT_S1_i", {reinterpret_cast<uint64_t>(p), 9, n}, n, s);
  std::array<uint8_t, 64> vendor{};
  vendor[0] = HSA_PACKET_TYPE_VENDOR_SPECIFIC;
  vendor[7] = 0x5a;
  app_->Submit(q, {vendor, Bytes(d)});  // in order: the vendor packet is done first
  ASSERT_TRUE(app_->Wait(s));
  EXPECT_EQ(p[n - 1], 9);
  ASSERT_EQ(sim_->unknown_packets().size(), 1u);
  EXPECT_TRUE(sim_->unknown_packets()[0].bytes == vendor);
  EXPECT_TRUE(sink_.captures().empty());
}

TEST_F(HsaE2eTest, FailedCaptureLeavesTheDispatchStreamIntact) {
  hsa_executable_t exe = app_->Load(co_);
  hsa_queue_t* q = app_->CreateQueue();
  sink_.fail_add_region = 1;  // the daemon's store refuses the capture
  Arm("vector_add");
  const int n = 64;
  float* a = Floats(n, 1, 0);
  float* b = Floats(n, 2, 0);
  float* c = Floats(n, 0, 0);
  hsa_signal_t s1 = app_->NewSignal(1), s2 = app_->NewSignal(1);
  auto d = app_->Dispatch(exe, "vector_add",
                          {reinterpret_cast<uint64_t>(a), reinterpret_cast<uint64_t>(b),
                           reinterpret_cast<uint64_t>(c), n}, n, s1);
  int* p = static_cast<int*>(app_->DeviceAlloc(n * sizeof(int)));
  auto f = app_->Dispatch(exe, "_ZN2kc4fillIiEEvPT_S1_i", {reinterpret_cast<uint64_t>(p), 4, n}, n, s2);
  app_->Submit(q, {Bytes(d), Bytes(f)});
  ASSERT_TRUE(app_->Wait(s1));
  ASSERT_TRUE(app_->Wait(s2));
  EXPECT_FLOAT_EQ(c[n - 1], 3);
  EXPECT_EQ(p[0], 4);
  for (const auto& cap : sink_.captures()) EXPECT_FALSE(cap.committed);
}

// The agent's exported stats (tool_entry.cc).
struct AgentStatsC {
  uint64_t tracked_allocations, intercepted_queues, kernels_resolved, packets_forwarded,
      captures_committed, captures_failed;
};

AgentStatsC AgentStats() {
  AgentStatsC s{};
  void* h = dlopen(KERNCAP_HSA_AGENT_SO, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return s;
  auto fn = reinterpret_cast<int (*)(AgentStatsC*)>(dlsym(h, "kerncap_agent_hsa_get_stats"));
  if (fn != nullptr) fn(&s);
  dlclose(h);
  return s;
}

// The C API both agent libraries export (agent/api/kerncap_agent.h).
struct CaptureInfoC {
  uint64_t pre_bytes, post_bytes, regions, ring_bytes;
  double quiesce_seconds, pre_seconds, post_seconds, held_seconds;
};

CaptureInfoC LastCapture() {
  CaptureInfoC c{};
  void* h = dlopen(KERNCAP_HSA_AGENT_SO, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return c;
  auto fn = reinterpret_cast<int (*)(CaptureInfoC*)>(dlsym(h, "kerncap_agent_get_last_capture"));
  if (fn != nullptr) fn(&c);
  dlclose(h);
  return c;
}

// What the shared capture service (agent/core/capture_service.h) and daemon
// link (agent/link/daemon_link.h) give the HSA agent as they give the CUDA one:
// no staging ring until an arm applies (lazy ring), the application released
// before kerncapd's verdict, which is counted when it arrives (asynchronous end).
TEST_F(HsaE2eTest, RingIsMappedOnlyOnceArmedAndVerdictsArriveAfterTheEnd) {
  hsa_executable_t exe = app_->Load(co_);
  hsa_queue_t* q = app_->CreateQueue();  // connects the agent
  ASSERT_TRUE(link::testing::Eventually([&] { return !server_->ListAgents(link::testing::RootCaller()).empty(); }));
  EXPECT_EQ(LastCapture().ring_bytes, 0u) << "a ring before any arm applies";
  Arm("vector_add");
  ASSERT_TRUE(link::testing::Eventually([] { return LastCapture().ring_bytes > 0; }))
      << "the armed agent never got its ring";
  const int n = 256;
  float* a = Floats(n, 1, 0);
  float* b = Floats(n, 2, 0);
  float* c = Floats(n, 0, 0);
  hsa_signal_t s = app_->NewSignal(1);
  auto d = app_->Dispatch(exe, "vector_add",
                          {reinterpret_cast<uint64_t>(a), reinterpret_cast<uint64_t>(b),
                           reinterpret_cast<uint64_t>(c), n}, n, s);
  app_->SubmitOne(q, &d);
  ASSERT_TRUE(app_->Wait(s));
  EXPECT_FLOAT_EQ(c[n - 1], 3);
  auto cap = WaitCapture();
  EXPECT_TRUE(cap.committed);
  ASSERT_TRUE(link::testing::Eventually([] { return AgentStats().captures_committed == 1; }))
      << "the daemon's verdict was not counted";
  EXPECT_EQ(AgentStats().captures_failed, 0u);
  const CaptureInfoC last = LastCapture();
  EXPECT_GE(last.regions, 3u);
  EXPECT_GE(last.pre_bytes, 3u * n * sizeof(float));
}

// A dispatch an arm selects but the agent cannot capture is reported on the
// arm (ArmInfo.skipped, what `kerncapctl arms` shows), not only logged.
TEST_F(HsaE2eTest, SkippedDispatchIsReportedOnTheArm) {
  hsa_executable_t exe = app_->Load(co_);
  hsa_queue_t* q = app_->CreateQueue();
  Arm("kernel@0x");  // the name the agent gives a kernel object no executable has
  const int n = 64;
  int* p = static_cast<int*>(app_->DeviceAlloc(n * sizeof(int)));
  hsa_signal_t s = app_->NewSignal(1);
  auto d = app_->Dispatch(exe, "_ZN2kc4fillIiEEvPT_S1_i", {reinterpret_cast<uint64_t>(p), 1, n}, n, s);
  // A kernel object no executable has, whose descriptor (the simulated
  // loader maps it to itself) is all zeros: no kernarg size can be known.
  alignas(64) static uint8_t descriptor[64] = {};
  d.kernel_object = reinterpret_cast<uint64_t>(descriptor);
  app_->SubmitOne(q, &d);
  ASSERT_TRUE(app_->Wait(s)) << "the packet was not forwarded";
  std::string reasons;
  ASSERT_TRUE(link::testing::Eventually([&] {
    reasons.clear();
    for (const v1::ArmInfo& arm : server_->ListArms(true, link::testing::RootCaller())) {
      for (const v1::SkippedDispatch& sk : arm.skipped()) reasons += sk.reason() + "\n";
    }
    return !reasons.empty();
  })) << "no skip reported on the arm";
  EXPECT_NE(reasons.find("kernarg segment size unknown"), std::string::npos) << reasons;
  EXPECT_TRUE(sink_.captures().empty());
  EXPECT_EQ(AgentStats().captures_failed, 1u);
}

// The kernel census and the launcher rank, HSA side: against a stand-in
// daemon (kerncapd does not ask for the census yet), the agent offers
// "kernel_census", names its launcher rank in the Hello and lists the kernel
// symbols of the executables loaded.
TEST(HsaKernelCensusTest, AgentListsTheLoadedExecutablesKernels) {
  const std::string co = CodeObject("kernels_gfx90a_v5.hsaco");
  if (co.empty()) GTEST_SKIP() << "test code objects not built";
  char tmpl[] = "/tmp/kc-census-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string socket = std::string(tmpl) + "/agent.sock";
  agent::testing::StandInDaemon daemon(socket);
  ASSERT_TRUE(daemon.listening());
  setenv("KERNCAP_AGENT_SOCKET", socket.c_str(), 1);
  setenv("SLURM_PROCID", "6", 1);
  setenv("SLURM_NTASKS", "8", 1);
  auto sim = std::make_unique<SimRuntime>();
  RegisterTestKernels(*sim);
  std::string err;
  ASSERT_TRUE(sim->LoadTool(KERNCAP_HSA_AGENT_SO, &err)) << err;
  auto app = std::make_unique<SimHostProgram>(sim.get());
  hsa_executable_t exe = app->Load(co);
  ASSERT_NE(exe.handle, 0u);
  // The first queue starts the link; its handshake blocks up to the
  // client's initial wait, so the daemon side runs on this thread after it.
  std::thread queue([&] { app->CreateQueue(); });
  link::HelloMsg hello;
  const bool shook = daemon.Handshake(&hello, {link::kFeatureLazyRing, link::kFeatureKernelCensus});
  queue.join();
  unsetenv("SLURM_PROCID");
  unsetenv("SLURM_NTASKS");
  ASSERT_TRUE(shook);
  EXPECT_EQ(hello.platform, link::Platform::kHsa);
  EXPECT_NE(std::find(hello.features.begin(), hello.features.end(), link::kFeatureKernelCensus),
            hello.features.end());
  EXPECT_EQ(hello.rank.rank, 6);
  EXPECT_EQ(hello.rank.world_size, 8);
  EXPECT_EQ(hello.rank.source, "SLURM_PROCID");

  link::KernelsRequestMsg req;
  req.request_id = 5;
  auto reply = daemon.Ask(req);
  ASSERT_TRUE(reply.ok()) << reply.error();
  ASSERT_EQ(reply->type, link::MessageType::kKernelsReport);
  link::KernelsReportMsg report;
  ASSERT_TRUE(link::DecodeBody(*reply, &report).ok());
  EXPECT_EQ(report.request_id, 5u);
  EXPECT_EQ(report.next_offset, 0u);
  bool add = false, fill = false;
  for (const link::LoadedKernelInfo& k : report.kernels) {
    EXPECT_EQ(k.module.rfind("hsa-executable-0x", 0), 0u) << k.module;
    add |= k.mangled_name == "vector_add";
    if (k.mangled_name == "_ZN2kc4fillIiEEvPT_S1_i") {
      fill = true;
      EXPECT_NE(k.demangled_name.find("kc::fill<int>"), std::string::npos) << k.demangled_name;
    }
  }
  EXPECT_TRUE(add && fill) << report.kernels.size() << " kernels reported";
  app.reset();
  sim.reset();
  std::filesystem::remove_all(tmpl);
}

TEST_F(HsaE2eTest, ForkedChildGetsFreshAgentStateAndParentIsUnaffected) {
  hsa_executable_t exe = app_->Load(co_);
  hsa_queue_t* q = app_->CreateQueue();
  const int n = 64;
  int* p = static_cast<int*>(app_->DeviceAlloc(n * sizeof(int)));
  hsa_signal_t s = app_->NewSignal(1);
  auto d = app_->Dispatch(exe, "_ZN2kc4fillIiEEvPT_S1_i", {reinterpret_cast<uint64_t>(p), 5, n}, n, s);
  app_->SubmitOne(q, &d);
  ASSERT_TRUE(app_->Wait(s));
  AgentStatsC before = AgentStats();
  ASSERT_GE(before.tracked_allocations, 1u);
  ASSERT_EQ(before.intercepted_queues, 1u);
  ASSERT_GE(before.packets_forwarded, 1u);

  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: no gtest assertions; the exit code says what went wrong.
    alarm(30);
    AgentStatsC c = AgentStats();
    if (c.tracked_allocations != 0) _exit(10);
    if (c.intercepted_queues != 0) _exit(11);
    if (c.packets_forwarded != 0 || c.kernels_resolved != 0) _exit(12);
    // The child uses the runtime on its own: a new queue is intercepted, its
    // dispatches are forwarded and run, its allocations tracked.
    hsa_queue_t* cq = app_->CreateQueue();
    if (cq == nullptr) _exit(13);
    int* cp = static_cast<int*>(app_->DeviceAlloc(n * sizeof(int)));
    hsa_signal_t cs = app_->NewSignal(1);
    auto cd = app_->Dispatch(exe, "_ZN2kc4fillIiEEvPT_S1_i", {reinterpret_cast<uint64_t>(cp), 9, n},
                             n, cs);
    app_->SubmitOne(cq, &cd);
    if (!app_->Wait(cs)) _exit(14);
    if (cp[n - 1] != 9) _exit(15);
    c = AgentStats();
    if (c.intercepted_queues != 1) _exit(16);
    if (c.packets_forwarded < 1) _exit(17);
    if (c.tracked_allocations < 1) _exit(18);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child check failed (see the exit codes in the test)";

  // The parent's agent state is what it was, and its queue still works.
  AgentStatsC after = AgentStats();
  EXPECT_EQ(after.intercepted_queues, before.intercepted_queues);
  EXPECT_EQ(after.tracked_allocations, before.tracked_allocations);
  hsa_signal_t s2 = app_->NewSignal(1);
  auto d2 = app_->Dispatch(exe, "_ZN2kc4fillIiEEvPT_S1_i", {reinterpret_cast<uint64_t>(p), 6, n}, n, s2);
  app_->SubmitOne(q, &d2);
  ASSERT_TRUE(app_->Wait(s2));
  EXPECT_EQ(p[n - 1], 6);
  EXPECT_GT(AgentStats().packets_forwarded, before.packets_forwarded);
}

}  // namespace
}  // namespace kerncap::hsa_sim
