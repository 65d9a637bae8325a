// End-to-end tests of the HSA path through the real daemon stack, on the
// simulated runtime:
//   HIP-like host program -> libkerncap_agent_hsa.so (OnLoad) ->
//   AgentLinkServer -> kerncap::store::Store (temp dir, 64 KiB chunks) ->
//   capture committed -> read back FROM THE STORE (manifest + chunks) ->
//   HSA replay on a fresh simulated runtime, validated region by region;
// and the kerncap-replay CLI on a .kcap exported from that store, loading
// the simulated runtime as its HSA runtime library (libkerncap_hsa_sim_runtime.so).
// Also: the wire compatibility of argument value kinds, fork safety lives in
// hsa_e2e_test.cc, and the unknown-table-entries report of the agent.
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "format/kcap_file.h"
#include "common/agent_link/messages.h"
#include "common/digest.h"
#include "daemon/agent_link/agent_link_server.h"
#include "daemon/agent_link/wire_convert.h"
#include "daemon/event_bus.h"
#include "daemon/store/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "reproducer/replay/hsa/hsa_capture.h"
#include "reproducer/replay/hsa/hsa_replay.h"
#include "tests/hsa_sim/host_kernels.h"
#include "tests/hsa_sim/sim_runtime.h"
#include "tests/hsa_sim/sim_test_util.h"

namespace kerncap::hsa_sim {
namespace {

// Arms that reach every process (daemon/caller.h): ownership is not tested here.
Caller RootCaller() {
  Caller c;
  c.privileged = true;
  return c;
}

using ::testing::Contains;
using ::testing::HasSubstr;

constexpr uint32_t kChunk = 64 * 1024;

std::string CodeObject(const std::string& name) {
  return TestCodeObject(KERNCAP_HSA_TEST_CO_DIR, name);
}

// Runs `cmd` (stdout captured), returns its exit code.
int RunCommand(const std::string& cmd, std::string* out) {
  out->clear();
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class HsaStoreE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    co_ = CodeObject("kernels_gfx90a_v5.hsaco");
    if (co_.empty()) GTEST_SKIP() << "test code objects not built";
    char tmpl[] = "/tmp/kc-hsa-store-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store::StoreOptions so;
    so.dir = dir_ + "/store";
    so.chunk_size = kChunk;
    so.workers = 1;
    auto st = store::Store::Open(so);
    ASSERT_TRUE(st.ok()) << st.status();
    store_ = std::move(*st);
    sub_ = bus_.Subscribe(4096);
    link::AgentLinkServerOptions lo;
    lo.socket_path = dir_ + "/agent.sock";
    lo.slot_size = kChunk;
    lo.slot_count = 4;
    lo.chunk_size = kChunk;
    lo.progress_interval = absl::ZeroDuration();
    server_ = std::make_unique<link::AgentLinkServer>();
    ASSERT_TRUE(server_->Start(lo, *store_, bus_).ok());
    setenv("KERNCAP_AGENT_SOCKET", lo.socket_path.c_str(), 1);
    setenv("KERNCAP_AGENT_LOG", "info", 1);
    sim_ = std::make_unique<SimRuntime>();
    RegisterTestKernels(*sim_);
    std::string err;
    ASSERT_TRUE(sim_->LoadTool(KERNCAP_HSA_AGENT_SO, &err)) << err;
    app_ = std::make_unique<SimHostProgram>(sim_.get());
  }

  void TearDown() override {
    app_.reset();
    sim_.reset();
    if (server_) server_->Shutdown(true);
    server_.reset();
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void Arm(const std::string& kernel) {
    v1::ArmRequest req;
    req.mutable_selector()->set_kernel(kernel);
    req.mutable_selector()->set_count(1);
    auto arm = server_->Arm(req, RootCaller());
    ASSERT_TRUE(arm.ok()) << arm.status();
    const int held = WaitAgentArms(KERNCAP_HSA_AGENT_SO, 1, 10000);
    ASSERT_NE(held, -1) << "no kerncap_agent_hsa_wait_arms in the loaded agent";
    ASSERT_EQ(held, 1) << "the agent never received the arm";
  }

  // The id of the next committed capture ("" with a failure recorded).
  std::string WaitCommitted() {
    auto deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      std::optional<v1::Event> e = sub_->Next(deadline - absl::Now());
      if (!e.has_value()) break;
      if (e->has_capture_committed()) return e->capture_committed().capture_id();
      if (e->has_capture_failed()) {
        ADD_FAILURE() << "capture failed: " << e->capture_failed().reason();
        return "";
      }
    }
    ADD_FAILURE() << "no capture committed";
    return "";
  }

  float* Floats(size_t n, float base, float step) { return DeviceFloats(*app_, n, base, step); }

  replay::hsa::ChunkReader StoreReader() {
    return [this](const std::string& digest, uint32_t raw_size, std::string* out) -> absl::Status {
      if (digest.empty()) {
        out->assign(raw_size, '\0');
        return absl::OkStatus();
      }
      auto d = Digest::FromBytes(digest);
      if (!d.ok()) return d.status();
      auto bytes = store_->ReadChunk(*d);
      if (!bytes.ok()) return bytes.status();
      *out = std::move(*bytes);
      return absl::OkStatus();
    };
  }

  // Captures vector_add over n floats into the store; returns the capture id.
  std::string CaptureVectorAdd(int n, uint64_t* a_va, uint64_t* c_va) {
    hsa_executable_t exe = app_->Load(co_);
    hsa_queue_t* q = app_->CreateQueue();
    Arm("vector_add");
    float* a = Floats(n, 1, 1);
    float* b = Floats(n, 1000, -0.5f);
    float* c = Floats(n, 0, 0);
    *a_va = reinterpret_cast<uint64_t>(a);
    *c_va = reinterpret_cast<uint64_t>(c);
    hsa_signal_t s = app_->NewSignal(1);
    auto d = app_->Dispatch(exe, "vector_add",
                            {reinterpret_cast<uint64_t>(a), reinterpret_cast<uint64_t>(b),
                             reinterpret_cast<uint64_t>(c), static_cast<uint64_t>(n)},
                            n, s);
    app_->SubmitOne(q, &d);
    EXPECT_TRUE(app_->Wait(s));
    EXPECT_FLOAT_EQ(c[10], 11 + (1000 - 5));
    return WaitCommitted();
  }

  // Tears the application's runtime down (its addresses become free, as in a
  // new process) and replays on a fresh simulated runtime.
  replay::hsa::HsaReplayReport ReplayFresh(const replay::hsa::HsaReplayInput& in) {
    app_.reset();
    sim_.reset();
    SimRuntime fresh;
    RegisterTestKernels(fresh);
    auto r = replay::hsa::ReplayDispatch(fresh.table(), in, replay::hsa::HsaReplayOptions{});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : replay::hsa::HsaReplayReport{};
  }

  // Writes the capture as a .kcap, frame for frame what ExportCapture sends
  // (manifest frame, then every distinct chunk as stored).
  std::string ExportKcap(const std::string& id) {
    std::string path = dir_ + "/" + id + ".kcap";
    auto m = store_->GetManifest(id);
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return "";
    std::set<std::string> digests;
    auto add = [&](const v1::ChunkList& l) {
      for (const std::string& d : l.chunk_digests()) {
        if (!d.empty()) digests.insert(d);
      }
    };
    for (const auto& r : m->pre().regions()) add(r.data());
    for (const auto& r : m->post().regions()) add(r.data());
    for (const auto& c : m->code_objects()) add(c.data());
    auto w = kcap::KcapWriter::Create(path);
    EXPECT_TRUE(w.ok()) << w.status();
    v1::TransferFrame f;
    *f.mutable_manifest() = *m;
    f.set_chunks_total(digests.size());
    EXPECT_TRUE((*w)->Append(f).ok());
    for (const std::string& d : digests) {
      auto stored = store_->ReadStoredChunk(*Digest::FromBytes(d));
      EXPECT_TRUE(stored.ok()) << stored.status();
      f.Clear();
      f.mutable_chunk()->set_digest(d);
      f.mutable_chunk()->set_codec(stored->codec);
      f.mutable_chunk()->set_raw_size(stored->raw_size);
      f.mutable_chunk()->set_data(stored->data);
      EXPECT_TRUE((*w)->Append(f).ok());
    }
    EXPECT_TRUE((*w)->Finish().ok());
    return path;
  }

  std::string co_, dir_;
  std::unique_ptr<store::Store> store_;
  EventBus bus_;
  std::unique_ptr<EventBus::Subscription> sub_;
  std::unique_ptr<link::AgentLinkServer> server_;
  std::unique_ptr<SimRuntime> sim_;
  std::unique_ptr<SimHostProgram> app_;
};

TEST_F(HsaStoreE2eTest, CaptureCommittedInStoreReplaysAndValidatesPerRegion) {
  const int n = 40000;  // 160 000 bytes per buffer: 3 chunks of 64 KiB
  uint64_t a_va = 0, c_va = 0;
  std::string id = CaptureVectorAdd(n, &a_va, &c_va);
  ASSERT_FALSE(id.empty());
  auto m = store_->GetManifest(id);
  ASSERT_TRUE(m.ok()) << m.status();

  // What the daemon stored.
  EXPECT_EQ(m->kernel().platform(), v1::PLATFORM_HSA);
  EXPECT_EQ(m->kernel().mangled_name(), "vector_add");
  EXPECT_TRUE(m->post_complete());
  ASSERT_EQ(m->code_objects_size(), 1);
  EXPECT_EQ(m->code_objects(0).format(), v1::CODE_OBJECT_HSACO);
  // Value kinds travelled as value kinds (not as names), hidden ones as ARG_HIDDEN.
  std::map<std::string, v1::ArgumentKind> kinds;
  for (const v1::Argument& arg : m->arguments()) kinds[arg.value_kind()] = arg.kind();
  ASSERT_TRUE(kinds.count("hidden_queue_ptr"));
  EXPECT_EQ(kinds["hidden_queue_ptr"], v1::ARG_HIDDEN);
  ASSERT_TRUE(kinds.count("global_buffer"));
  EXPECT_EQ(kinds["global_buffer"], v1::ARG_POINTER);
  EXPECT_EQ(kinds["by_value"], v1::ARG_BY_VALUE);
  EXPECT_EQ(m->arguments(0).name(), "a");  // explicit arguments keep their names
  // Post images are diffs: the output changed everywhere, the input nowhere.
  for (const v1::Region& r : m->post().regions()) {
    if (r.va() == c_va) {
      EXPECT_TRUE(r.diff());
      EXPECT_EQ(r.changed_chunks_size(), 3);
    }
    if (r.va() == a_va) {
      EXPECT_TRUE(r.diff());
      EXPECT_EQ(r.changed_chunks_size(), 0);
    }
  }

  // Read the capture back from the store and replay it.
  auto in = replay::hsa::HsaInputFromManifest(*m, StoreReader());
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->kernel, "vector_add");
  EXPECT_EQ(in->grid[0], static_cast<uint32_t>(n));
  size_t validated = 0;
  size_t c_index = 0;
  std::string c_pre, c_post;
  for (size_t i = 0; i < in->regions.size(); ++i) {
    const auto& r = in->regions[i];
    if (!r.validated) continue;
    ++validated;
    auto pre = replay::hsa::RegionBytes(*in, r, /*post=*/false);
    auto post = replay::hsa::RegionBytes(*in, r, /*post=*/true);
    ASSERT_TRUE(pre.ok() && post.ok());
    EXPECT_EQ(post->size(), pre->size());
    if (r.va == c_va) {
      c_index = i;
      c_pre = *pre;
      c_post = *post;
    }
    if (r.va == a_va) {
      EXPECT_TRUE(*post == *pre) << "unchanged input reconstructed wrongly";
    }
  }
  ASSERT_GE(validated, 3u);
  float c10;
  std::memcpy(&c10, c_post.data() + 40, 4);
  EXPECT_FLOAT_EQ(c10, 11 + (1000 - 5));
  std::memcpy(&c10, c_pre.data() + 40, 4);
  EXPECT_FLOAT_EQ(c10, 0);

  app_.reset();
  sim_.reset();
  SimRuntime fresh;
  RegisterTestKernels(fresh);
  auto report = replay::hsa::ReplayDispatch(fresh.table(), *in, replay::hsa::HsaReplayOptions{});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->valid);
  EXPECT_EQ(report->regions.size(), validated);
  for (const auto& rr : report->regions) {
    EXPECT_EQ(rr.mismatched_bytes, 0u) << "region at 0x" << std::hex << rr.va;
  }
  EXPECT_EQ(report->hidden_args_from, "capture");
  bool queue_patched = false;
  for (const auto& p : report->patched_hidden_args) queue_patched |= p.rfind("hidden_queue_ptr@", 0) == 0;
  EXPECT_TRUE(queue_patched);

  // Validation can fail: one wrong expected byte in the output region is
  // reported in that region, at that offset, and nowhere else.
  // (The chunk holding byte 100000 gets its own digest, served flipped.)
  replay::hsa::HsaReplayInput bad = *in;
  uint64_t chunk_off = 0;
  replay::hsa::RegionChunk* target = nullptr;
  for (auto& ch : bad.regions[c_index].chunks) {
    if (100000 < chunk_off + ch.size) {
      target = &ch;
      break;
    }
    chunk_off += ch.size;
  }
  ASSERT_NE(target, nullptr);
  std::string flipped = c_post.substr(chunk_off, target->size);
  flipped[100000 - chunk_off] ^= 0x01;
  target->post_digest = "corrupted-chunk";
  bad.read = [read = in->read, flipped](const std::string& digest, uint32_t size, char* out) {
    if (digest != "corrupted-chunk") return read(digest, size, out);
    std::memcpy(out, flipped.data(), size);
    return absl::OkStatus();
  };
  auto failed = replay::hsa::ReplayDispatch(fresh.table(), bad, replay::hsa::HsaReplayOptions{});
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_FALSE(failed->valid);
  for (const auto& rr : failed->regions) {
    if (rr.va == c_va) {
      EXPECT_EQ(rr.mismatched_bytes, 1u);
      EXPECT_EQ(rr.first_mismatch, 100000);
    } else {
      EXPECT_EQ(rr.mismatched_bytes, 0u);
    }
  }
}

TEST_F(HsaStoreE2eTest, OlderManifestsPatchHiddenArgumentsByNameOrCodeObject) {
  uint64_t a_va = 0, c_va = 0;
  std::string id = CaptureVectorAdd(256, &a_va, &c_va);
  ASSERT_FALSE(id.empty());
  auto m = store_->GetManifest(id);
  ASSERT_TRUE(m.ok()) << m.status();
  // An agent from before value kinds travelled: hidden args named by kind.
  v1::CaptureManifest old = *m;
  for (v1::Argument& arg : *old.mutable_arguments()) {
    if (arg.kind() == v1::ARG_HIDDEN) arg.set_name(arg.value_kind());
    arg.clear_value_kind();
  }
  auto in_old = replay::hsa::HsaInputFromManifest(old, StoreReader());
  ASSERT_TRUE(in_old.ok()) << in_old.status();
  // No argument information at all: the code object's metadata decides.
  v1::CaptureManifest bare = *m;
  bare.clear_arguments();
  auto in_bare = replay::hsa::HsaInputFromManifest(bare, StoreReader());
  ASSERT_TRUE(in_bare.ok()) << in_bare.status();

  app_.reset();
  sim_.reset();
  SimRuntime fresh;
  RegisterTestKernels(fresh);
  auto r_old = replay::hsa::ReplayDispatch(fresh.table(), *in_old, replay::hsa::HsaReplayOptions{});
  ASSERT_TRUE(r_old.ok()) << r_old.status();
  EXPECT_TRUE(r_old->valid);
  EXPECT_EQ(r_old->hidden_args_from, "capture");
  EXPECT_THAT(r_old->patched_hidden_args, Contains(HasSubstr("hidden_queue_ptr@")));
  auto r_bare = replay::hsa::ReplayDispatch(fresh.table(), *in_bare, replay::hsa::HsaReplayOptions{});
  ASSERT_TRUE(r_bare.ok()) << r_bare.status();
  EXPECT_TRUE(r_bare->valid);
  EXPECT_EQ(r_bare->hidden_args_from, "code_object");
  EXPECT_EQ(r_bare->patched_hidden_args, r_old->patched_hidden_args);
}

TEST_F(HsaStoreE2eTest, InPlaceKernelAndConstantVariableFromTheStore) {
  hsa_executable_t exe = app_->Load(co_);
  hsa_queue_t* q = app_->CreateQueue();
  Arm("affine_const");
  uint64_t sb = app_->VariableAddress(exe, "kc_scale_bias");
  ASSERT_NE(sb, 0u);
  float params[4] = {3.0f, -1.0f, 0, 0};
  app_->core()->hsa_memory_copy_fn(reinterpret_cast<void*>(sb), params, sizeof(params));
  const int n = 20000;
  float* x = Floats(n, 1, 1);
  float* y = Floats(n, 0, 0);
  ASSERT_TRUE(app_->Run(exe, q, "affine_const",
                        {reinterpret_cast<uint64_t>(x), reinterpret_cast<uint64_t>(y), n}, n));
  std::string id = WaitCommitted();
  ASSERT_FALSE(id.empty());
  auto m = store_->GetManifest(id);
  ASSERT_TRUE(m.ok()) << m.status();
  auto in = replay::hsa::HsaInputFromManifest(*m, StoreReader());
  ASSERT_TRUE(in.ok()) << in.status();
  bool var = false;
  for (const auto& r : in->regions) var |= r.module_variable && r.name == "kc_scale_bias";
  EXPECT_TRUE(var);
  auto report = ReplayFresh(*in);
  EXPECT_TRUE(report.valid);
  EXPECT_TRUE(report.warnings.empty()) << report.warnings[0];
}

#ifdef KERNCAP_REPLAY_BIN
TEST_F(HsaStoreE2eTest, KerncapReplayCliOnExportedKcapWithSimulatedRuntime) {
  hsa_executable_t exe = app_->Load(co_);
  hsa_queue_t* q = app_->CreateQueue();
  Arm("scale_inplace");
  const int n = 30000;
  float* x = Floats(n, 1, 1);
  float two = 2.0f;
  uint32_t bits;
  std::memcpy(&bits, &two, 4);
  hsa_signal_t s = app_->NewSignal(1);
  auto d = app_->Dispatch(exe, "scale_inplace", {reinterpret_cast<uint64_t>(x), bits, n}, n, s);
  app_->SubmitOne(q, &d);
  ASSERT_TRUE(app_->Wait(s));
  std::string id = WaitCommitted();
  ASSERT_FALSE(id.empty());
  std::string kcap = ExportKcap(id);
  ASSERT_FALSE(kcap.empty());
  // The CLI runs in its own process: the capture's addresses are free there.
  const std::string bin = KERNCAP_REPLAY_BIN;
  const std::string sim = std::string("--hsa-runtime=") + KERNCAP_HSA_SIM_RUNTIME_SO;
  std::string out;

  int rc = RunCommand(bin + " validate " + kcap + " --json " + sim, &out);
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["result"], "pass");
  EXPECT_EQ(j["platform"], "hsa");
  EXPECT_EQ(j["capture_id"], id);
  EXPECT_EQ(j["device"], "gfx90a");
  EXPECT_GE(j["regions_compared"].get<int>(), 1);
  EXPECT_EQ(j["regions_failing"], 0);
  EXPECT_EQ(j["hsa"]["hidden_args_from"], "capture");

  rc = RunCommand(bin + " validate " + kcap + " --json --dtype=f32 --rtol=1e-6 " + sim, &out);
  EXPECT_EQ(rc, 0) << out;

  rc = RunCommand(bin + " run " + kcap + " --json " + sim, &out);
  ASSERT_EQ(rc, 0) << out;
  j = nlohmann::json::parse(out, nullptr, false);
  EXPECT_EQ(j["command"], "run");

  rc = RunCommand(bin + " bench " + kcap + " --json --warmup=1 --iterations=3 --samples " + sim,
                  &out);
  ASSERT_EQ(rc, 0) << out;
  j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["samples_ms"].size(), 3u) << out;
  EXPECT_EQ(j["restore_each"], true) << "an in-place kernel needs its input restored";

  // --code-object: a replacement hsaco (a reproducer's `make recompile`)
  // must define the captured kernel; here the same code object, then one
  // without it.
  const std::string same = std::string(KERNCAP_HSA_TEST_CO_DIR) + "/kernels_gfx90a_v5.hsaco";
  rc = RunCommand(bin + " validate " + kcap + " --json --code-object=" + same + " " + sim, &out);
  EXPECT_EQ(rc, 0) << out;
  const std::string other = std::string(KERNCAP_HSA_TEST_CO_DIR) + "/tensile_like_gfx90a.hsaco";
  if (std::filesystem::exists(other)) {
    // The error is one JSON object on stderr (docs/JSON.md); 3 is not found.
    rc = RunCommand(bin + " validate " + kcap + " --json --code-object=" + other + " " + sim +
                        " 2>&1",
                    &out);
    EXPECT_EQ(rc, 3) << out;
    EXPECT_THAT(out, HasSubstr("has no kernel named scale_inplace"));
  }

  // The runtime named by the environment, as in deployment scripts.
  rc = RunCommand(std::string("KERNCAP_HSA_RUNTIME=") + KERNCAP_HSA_SIM_RUNTIME_SO + " " + bin +
                      " validate " + kcap,
                  &out);
  EXPECT_EQ(rc, 0) << out;

  // Not a runtime at all, and (when installed) Debian's ROCm 5.2.3 runtime,
  // which has no vmem API: clear error, the "no device" exit code.
  rc = RunCommand(bin + " validate " + kcap + " --json --hsa-runtime=/nonexistent/libhsa.so 2>&1",
                  &out);
  EXPECT_EQ(rc, 77) << out;
  EXPECT_THAT(out, HasSubstr("no usable HSA runtime"));
  if (std::filesystem::exists(KERNCAP_SYSTEM_HSA_RUNTIME)) {
    rc = RunCommand(bin + " validate " + kcap + " --json --hsa-runtime=" +
                        KERNCAP_SYSTEM_HSA_RUNTIME + " 2>&1",
                    &out);
    EXPECT_EQ(rc, 77) << out;
    EXPECT_THAT(out, HasSubstr("hsa_amd_vmem_address_reserve"));
    EXPECT_THAT(out, HasSubstr("ROCm >= 6"));
  }
}
#endif  // KERNCAP_REPLAY_BIN

// --- argument value kinds on the wire (no runtime needed) ---------------------

TEST(HsaWireCompatTest, CaptureBeginWithAndWithoutValueKinds) {
  // An agent from before value kinds travelled: no value_kind/type_name keys.
  link::Frame old_frame;
  old_frame.type = link::MessageType::kCaptureBegin;
  old_frame.json = R"({"token":1,"demangled_name":"k","platform":"hsa","arguments":[
      {"offset":0,"size":8,"kind":"pointer","name":"a"},
      {"offset":8,"size":8,"kind":"hidden","name":"hidden_queue_ptr"}]})";
  link::CaptureBeginMsg old_msg;
  ASSERT_TRUE(link::DecodeBody(old_frame, &old_msg).ok());
  ASSERT_EQ(old_msg.arguments.size(), 2u);
  EXPECT_TRUE(old_msg.arguments[1].value_kind.empty());
  v1::CaptureManifest m;
  link::FillManifest(link::HelloMsg{}, old_msg, "", &m);
  ASSERT_EQ(m.arguments_size(), 2);
  EXPECT_EQ(m.arguments(1).kind(), v1::ARG_HIDDEN);
  EXPECT_EQ(m.arguments(1).name(), "hidden_queue_ptr");

  // A current agent: value kinds travel and hidden_* is ARG_HIDDEN even under
  // a kind string the daemon does not know.
  link::CaptureBeginMsg msg;
  msg.platform = link::Platform::kHsa;
  link::ArgumentInfo a;
  a.offset = 0;
  a.size = 8;
  a.kind = link::ArgumentKind::kPointer;
  a.name = "a";
  a.type_name = "float*";
  a.value_kind = "global_buffer";
  msg.arguments.push_back(a);
  a.offset = 8;
  a.kind = link::ArgumentKind::kHidden;  // sent below as "runtime": unknown to this daemon
  a.name = "";
  a.type_name = "";
  a.value_kind = "hidden_hostcall_buffer";
  msg.arguments.push_back(a);
  link::Frame f;
  f.type = link::MessageType::kCaptureBegin;
  f.json = link::EncodeBody(msg);
  const std::string hidden_kind = R"("kind":"hidden")";
  ASSERT_NE(f.json.find(hidden_kind), std::string::npos) << f.json;
  f.json.replace(f.json.find(hidden_kind), hidden_kind.size(), R"("kind":"runtime")");
  link::CaptureBeginMsg back;
  ASSERT_TRUE(link::DecodeBody(f, &back).ok());
  v1::CaptureManifest m2;
  link::FillManifest(link::HelloMsg{}, back, "", &m2);
  ASSERT_EQ(m2.arguments_size(), 2);
  EXPECT_EQ(m2.arguments(0).kind(), v1::ARG_POINTER);
  EXPECT_EQ(m2.arguments(0).type_name(), "float*");
  EXPECT_EQ(m2.arguments(0).value_kind(), "global_buffer");
  EXPECT_EQ(back.arguments[1].kind, link::ArgumentKind::kUnspecified);
  EXPECT_EQ(m2.arguments(1).kind(), v1::ARG_HIDDEN);
  EXPECT_EQ(m2.arguments(1).value_kind(), "hidden_hostcall_buffer");
}

// --- table entries this build does not know -----------------------------------

TEST(HsaAgentTablesTest, ReportsAmdExtEntriesBeyondTheKnownLayout) {
  setenv("KERNCAP_AGENT_NO_DAEMON", "1", 1);
  uint64_t (*unhooked)() = nullptr;
  for (uint32_t extra : {0u, 3u}) {
    SimRuntime sim;
    sim.AdvertiseUnknownAmdExtEntries(extra);
    std::string err;
    ASSERT_TRUE(sim.LoadTool(KERNCAP_HSA_AGENT_SO, &err)) << err;
    void* h = dlopen(KERNCAP_HSA_AGENT_SO, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(h, nullptr);
    unhooked = reinterpret_cast<uint64_t (*)()>(
        dlsym(h, "kerncap_agent_hsa_unhooked_amd_ext_entries"));
    dlclose(h);
    ASSERT_NE(unhooked, nullptr);
    EXPECT_EQ(unhooked(), extra);
    // The agent still intercepts the queues it knows about.
    SimHostProgram app(&sim);
    EXPECT_NE(app.CreateQueue(), nullptr);
  }
  unsetenv("KERNCAP_AGENT_NO_DAEMON");
}

}  // namespace
}  // namespace kerncap::hsa_sim
