// ControlService over a real Store on a temp Unix socket, with a fake
// AgentControl. Covers every RPC's happy path and its bad-input errors.
#include "daemon/service/control_service.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/control/limits.h"
#include "format/manifest_util.h"
#include "format/kcap_file.h"
#include "common/digest.h"
#include "common/file_util.h"
#include "daemon/store/store_test_util.h"
#include "daemon/service/unix_listener.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "reproducer/generator/project_stream.h"

namespace kerncap::service {
namespace {

using store::testing::IngestCapture;
using store::testing::RandomBytes;
using store::testing::TestRegion;
using store::testing::TextBytes;

class FakeAgentControl : public AgentControl {
 public:
  std::vector<v1::AgentInfo> ListAgents(const Caller&) override {
    v1::AgentInfo a;
    a.set_agent_id("agent-1");
    a.mutable_process()->set_pid(4242);
    return {a};
  }
  absl::StatusOr<v1::ArmInfo> Arm(const v1::ArmRequest& request, const Caller&) override {
    absl::MutexLock lock(&mu_);
    v1::ArmInfo info;
    info.set_arm_id(absl::StrCat("arm-", ++next_));
    *info.mutable_selector() = request.selector();
    info.set_state(v1::ARM_ACTIVE);
    *info.mutable_tags() = request.tags();
    arms_.push_back(info);
    return info;
  }
  absl::StatusOr<std::vector<v1::ArmInfo>> Disarm(const v1::DisarmRequest& request,
                                                  const Caller&) override {
    absl::MutexLock lock(&mu_);
    std::vector<v1::ArmInfo> out;
    for (auto& a : arms_) {
      if (a.state() == v1::ARM_ACTIVE && (request.all() || a.arm_id() == request.arm_id())) {
        a.set_state(v1::ARM_DISARMED);
        out.push_back(a);
      }
    }
    if (!request.all() && out.empty()) return absl::NotFoundError("no arm " + request.arm_id());
    return out;
  }
  std::vector<v1::ArmInfo> ListArms(bool include_finished, const Caller&) override {
    absl::MutexLock lock(&mu_);
    std::vector<v1::ArmInfo> out;
    for (const auto& a : arms_) {
      if (include_finished || a.state() == v1::ARM_ACTIVE) out.push_back(a);
    }
    return out;
  }
  int IngestsInFlight() override { return 0; }

  int arm_calls() {
    absl::MutexLock lock(&mu_);
    return next_;
  }

 private:
  absl::Mutex mu_;
  int next_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::ArmInfo> arms_ ABSL_GUARDED_BY(mu_);
};

// One in-process daemon: store + bus + fake agents + service on a Unix socket
// (and optionally a loopback TCP port guarded by a token).
struct TestDaemon {
  explicit TestDaemon(const std::string& dir, ReferenceImporter importer = nullptr,
                      const std::string& token = "") {
    auto s = store::Store::Open(store::testing::SmallOptions(dir + "/store"));
    EXPECT_TRUE(s.ok()) << s.status();
    store = std::move(*s);
    socket = dir + "/kerncapd.sock";
    ControlServiceOptions options;
    options.info.version = "test";
    options.info.pid = static_cast<uint32_t>(::getpid());
    options.info.unix_socket = socket;
    options.reference_importer = std::move(importer);
    authorizer.SetToken(token);
    options.authorizer = &authorizer;
    // TCP clients act as this process's user, as a per-user kerncapd's do.
    options.tcp_identity.id = ProcessFsIdentity();
    options.tcp_identity.name = "test";
    service = std::make_unique<ControlService>(*store, agents, bus, options);
    // The daemon's own listener, so calls know their caller (unix_listener.h).
    auto bound = UnixListener::Bind(socket, 0600);
    EXPECT_TRUE(bound.ok()) << bound.status();
    listener = std::move(*bound);
    grpc::ServerBuilder builder;
    if (!token.empty()) {
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &tcp_port);
    }
    builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
    builder.SetMaxSendMessageSize(kMaxMessageBytes);
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    EXPECT_NE(server, nullptr);
    listener->Start(server.get());
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    stub = v1::KerncapControl::NewStub(
        grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args));
  }
  ~TestDaemon() {
    service->BeginShutdown();
    listener->Stop();
    bus.Shutdown();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server->Wait();
  }

  std::unique_ptr<store::Store> store;
  EventBus bus;
  FakeAgentControl agents;
  TokenAuthorizer authorizer;
  std::unique_ptr<ControlService> service;
  std::unique_ptr<UnixListener> listener;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::KerncapControl::Stub> stub;
  std::string socket;
  int tcp_port = 0;
};

class ControlServiceTest : public testing::Test {
 protected:
  void SetUp() override { daemon_ = std::make_unique<TestDaemon>(tmp_.path()); }

  v1::KerncapControl::Stub& stub() { return *daemon_->stub; }
  store::Store& store() { return *daemon_->store; }

  std::string Ingest(uint64_t seed, v1::CaptureManifest m = {}) {
    std::vector<TestRegion> pre = {{0x10000, TextBytes(200 << 10, seed)},
                                   {0x90000, RandomBytes(100 << 10, seed)},
                                   {0xA0000, std::string(128 << 10, '\0')}};
    std::vector<TestRegion> post = {{0x10000, TextBytes(200 << 10, seed + 1)}};
    auto id = IngestCapture(store(), pre, post, std::move(m));
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : "";
  }

  store::testing::TempDir tmp_;
  std::unique_ptr<TestDaemon> daemon_;
};

std::vector<v1::TransferFrame> Export(v1::KerncapControl::Stub& stub,
                                      const v1::ExportCaptureRequest& req, grpc::Status* status) {
  grpc::ClientContext ctx;
  auto reader = stub.ExportCapture(&ctx, req);
  std::vector<v1::TransferFrame> frames;
  v1::TransferFrame f;
  while (reader->Read(&f)) frames.push_back(f);
  *status = reader->Finish();
  return frames;
}

grpc::Status Import(v1::KerncapControl::Stub& stub, const std::vector<v1::TransferFrame>& frames,
                    v1::ImportCaptureResponse* resp) {
  grpc::ClientContext ctx;
  auto writer = stub.ImportCapture(&ctx, resp);
  for (const auto& f : frames) {
    if (!writer->Write(f)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

size_t CaptureCount(v1::KerncapControl::Stub& stub) {
  grpc::ClientContext ctx;
  v1::ListCapturesResponse resp;
  EXPECT_TRUE(stub.ListCaptures(&ctx, v1::ListCapturesRequest(), &resp).ok());
  return resp.captures_size();
}

TEST_F(ControlServiceTest, GetStatusReportsDaemonStoreAndAgents) {
  Ingest(1);
  grpc::ClientContext ctx;
  v1::DaemonStatus st;
  ASSERT_TRUE(stub().GetStatus(&ctx, v1::GetStatusRequest(), &st).ok());
  EXPECT_EQ(st.version(), "test");
  EXPECT_EQ(st.pid(), static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(st.unix_socket(), daemon_->socket);
  EXPECT_EQ(st.agents(), 1u);
  EXPECT_EQ(st.store().captures(), 1u);
  EXPECT_EQ(st.store().chunk_size(), 64u << 10);
  EXPECT_GT(st.store().unique_chunks(), 0u);
}

TEST_F(ControlServiceTest, AgentsAndArmsDelegate) {
  {
    grpc::ClientContext ctx;
    v1::ListAgentsResponse resp;
    ASSERT_TRUE(stub().ListAgents(&ctx, v1::ListAgentsRequest(), &resp).ok());
    ASSERT_EQ(resp.agents_size(), 1);
    EXPECT_EQ(resp.agents(0).agent_id(), "agent-1");
  }
  v1::ArmInfo armed;
  {
    grpc::ClientContext ctx;
    v1::ArmRequest req;
    req.mutable_selector()->set_kernel("matmul");
    (*req.mutable_tags())["run"] = "base";
    ASSERT_TRUE(stub().Arm(&ctx, req, &armed).ok());
    EXPECT_EQ(armed.selector().kernel(), "matmul");
    EXPECT_EQ(armed.tags().at("run"), "base");
  }
  {
    grpc::ClientContext ctx;
    v1::ListArmsResponse resp;
    ASSERT_TRUE(stub().ListArms(&ctx, v1::ListArmsRequest(), &resp).ok());
    ASSERT_EQ(resp.arms_size(), 1);
    EXPECT_EQ(resp.arms(0).arm_id(), armed.arm_id());
  }
  {
    grpc::ClientContext ctx;
    v1::DisarmRequest req;
    req.set_arm_id(armed.arm_id());
    v1::DisarmResponse resp;
    ASSERT_TRUE(stub().Disarm(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.disarmed_size(), 1);
  }
  {
    grpc::ClientContext ctx;
    v1::ListArmsRequest req;
    v1::ListArmsResponse resp;
    ASSERT_TRUE(stub().ListArms(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.arms_size(), 0);
    grpc::ClientContext ctx2;
    req.set_include_finished(true);
    ASSERT_TRUE(stub().ListArms(&ctx2, req, &resp).ok());
    EXPECT_EQ(resp.arms_size(), 1);
  }
}

TEST_F(ControlServiceTest, ArmAndDisarmRejectBadInput) {
  auto arm = [&](v1::ArmRequest req) {
    grpc::ClientContext ctx;
    v1::ArmInfo info;
    return stub().Arm(&ctx, req, &info).error_code();
  };
  v1::ArmRequest regex_without_pattern;
  regex_without_pattern.mutable_selector()->set_match(v1::NAME_REGEX);
  EXPECT_EQ(arm(regex_without_pattern), grpc::StatusCode::INVALID_ARGUMENT);
  v1::ArmRequest both_expiry;
  both_expiry.mutable_selector()->set_kernel("k");
  both_expiry.set_ttl_ms(1000);
  both_expiry.set_expires_unix_ms(1);
  EXPECT_EQ(arm(both_expiry), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(daemon_->agents.arm_calls(), 0) << "invalid arms must not reach the agents";

  auto disarm = [&](v1::DisarmRequest req) {
    grpc::ClientContext ctx;
    v1::DisarmResponse resp;
    return stub().Disarm(&ctx, req, &resp).error_code();
  };
  EXPECT_EQ(disarm(v1::DisarmRequest()), grpc::StatusCode::INVALID_ARGUMENT);
  v1::DisarmRequest unknown;
  unknown.set_arm_id("arm-999");
  EXPECT_EQ(disarm(unknown), grpc::StatusCode::NOT_FOUND);
  v1::DisarmRequest traversal;
  traversal.set_arm_id("../arm");
  EXPECT_EQ(disarm(traversal), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ControlServiceTest, ListAndGetCaptures) {
  v1::CaptureManifest tagged;
  (*tagged.mutable_tags())["run"] = "a";
  tagged.mutable_kernel()->set_demangled_name("matmul(float*)");
  std::string a = Ingest(1, tagged);
  std::string b = Ingest(2);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(CaptureCount(stub()), 2u);
  {
    grpc::ClientContext ctx;
    v1::ListCapturesRequest req;
    req.set_limit(1);
    v1::ListCapturesResponse resp;
    ASSERT_TRUE(stub().ListCaptures(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.captures_size(), 1);
  }
  {
    grpc::ClientContext ctx;
    v1::ListCapturesRequest req;
    req.set_tag("run=a");
    v1::ListCapturesResponse resp;
    ASSERT_TRUE(stub().ListCaptures(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.captures_size(), 1);
    EXPECT_EQ(resp.captures(0).capture_id(), a);
  }
  {
    grpc::ClientContext ctx;
    v1::GetCaptureRequest req;
    req.set_capture_id(a);
    v1::CaptureDetail d;
    ASSERT_TRUE(stub().GetCapture(&ctx, req, &d).ok());
    EXPECT_EQ(d.summary().capture_id(), a);
    EXPECT_EQ(d.summary().kernel(), "matmul(float*)");
    EXPECT_EQ(d.manifest().pre().regions_size(), 3);
    EXPECT_GT(d.stored_bytes(), 0u);
    EXPECT_GT(d.exclusive_raw_bytes(), 0u);
  }
}

TEST_F(ControlServiceTest, CaptureRpcsRejectBadIds) {
  Ingest(1);
  struct Case {
    std::string id;
    grpc::StatusCode code;
  };
  for (const Case& c : {Case{"", grpc::StatusCode::INVALID_ARGUMENT},
                        Case{"../../etc/passwd", grpc::StatusCode::INVALID_ARGUMENT},
                        Case{"cap-x/y", grpc::StatusCode::INVALID_ARGUMENT},
                        Case{std::string(500, 'a'), grpc::StatusCode::INVALID_ARGUMENT},
                        Case{"cap-ffffffffffff", grpc::StatusCode::NOT_FOUND}}) {
    grpc::ClientContext c1, c2, c3;
    v1::GetCaptureRequest get;
    get.set_capture_id(c.id);
    v1::CaptureDetail detail;
    EXPECT_EQ(stub().GetCapture(&c1, get, &detail).error_code(), c.code) << c.id;
    v1::DeleteCaptureRequest del;
    del.set_capture_id(c.id);
    v1::DeleteCaptureResponse del_resp;
    EXPECT_EQ(stub().DeleteCapture(&c2, del, &del_resp).error_code(), c.code) << c.id;
    v1::ExportCaptureRequest exp;
    exp.set_capture_id(c.id);
    auto reader = stub().ExportCapture(&c3, exp);
    v1::TransferFrame f;
    EXPECT_FALSE(reader->Read(&f));
    EXPECT_EQ(reader->Finish().error_code(), c.code) << c.id;
  }
  grpc::ClientContext ctx;
  v1::ListCapturesRequest absurd;
  absurd.set_limit(kMaxListLimit + 1);
  v1::ListCapturesResponse resp;
  EXPECT_EQ(stub().ListCaptures(&ctx, absurd, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  grpc::ClientContext ctx2;
  v1::ListCapturesRequest bad_tag;
  bad_tag.set_tag("=novalue");
  EXPECT_EQ(stub().ListCaptures(&ctx2, bad_tag, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // ... and the daemon still serves.
  EXPECT_EQ(CaptureCount(stub()), 1u);
}

TEST_F(ControlServiceTest, DeleteCaptureByPrefix) {
  std::string id = Ingest(1);
  grpc::ClientContext ctx;
  v1::DeleteCaptureRequest req;
  req.set_capture_id(id.substr(0, 10));
  v1::DeleteCaptureResponse resp;
  ASSERT_TRUE(stub().DeleteCapture(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.capture_id(), id);
  EXPECT_EQ(CaptureCount(stub()), 0u);
}

TEST_F(ControlServiceTest, ExportImportBetweenStoresSendsOnlyMissingChunks) {
  std::string first = Ingest(7);
  std::string second = Ingest(7);  // same bytes: shares every chunk with `first`
  TestDaemon dest(tmp_.Sub("dest"));

  grpc::Status st;
  v1::ExportCaptureRequest req;
  req.set_capture_id(first);
  auto frames = Export(stub(), req, &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_GE(frames.size(), 2u);
  ASSERT_TRUE(frames[0].has_manifest());
  EXPECT_EQ(frames[0].chunks_total(), frames.size() - 1);
  EXPECT_GT(frames[0].bytes_total(), 0u);
  v1::ImportCaptureResponse resp;
  st = Import(*dest.stub, frames, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.capture_id(), first);
  EXPECT_EQ(resp.chunks_received(), frames.size() - 1);

  // The pull protocol for the second capture: manifest only, ask what is
  // missing, export the rest.
  req.set_capture_id(second);
  req.set_manifest_only(true);
  auto manifest_frames = Export(stub(), req, &st);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(manifest_frames.size(), 1u);
  auto refs = ManifestChunks(manifest_frames[0].manifest());
  ASSERT_TRUE(refs.ok());
  v1::FindMissingChunksRequest find;
  for (const auto& r : *refs) find.add_digests(r.digest.ToBytes());
  v1::FindMissingChunksResponse missing;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(dest.stub->FindMissingChunks(&ctx, find, &missing).ok());
  }
  EXPECT_EQ(missing.missing_size(), 0);
  req.set_manifest_only(false);
  for (const auto& d : find.digests()) req.add_skip_digests(d);
  frames = Export(stub(), req, &st);
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(frames.size(), 1u) << "dedup: no chunk should be sent";
  EXPECT_EQ(frames[0].chunks_total(), 0u);
  st = Import(*dest.stub, frames, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.chunks_received(), 0u);
  EXPECT_EQ(CaptureCount(*dest.stub), 2u);

  // The bytes arrived intact.
  auto src_manifest = store().GetManifest(first);
  auto dst_manifest = dest.store->GetManifest(first);
  ASSERT_TRUE(src_manifest.ok() && dst_manifest.ok());
  EXPECT_EQ(dst_manifest->source(), v1::SOURCE_IMPORT);
  for (int i = 0; i < src_manifest->pre().regions_size(); ++i) {
    EXPECT_EQ(store::testing::ReadPre(store(), *src_manifest, i),
              store::testing::ReadPre(*dest.store, *dst_manifest, i));
  }
}

TEST_F(ControlServiceTest, ImportRejectsCorruptChunkAndCommitsNothing) {
  std::string id = Ingest(3);
  grpc::Status st;
  v1::ExportCaptureRequest req;
  req.set_capture_id(id);
  auto frames = Export(stub(), req, &st);
  ASSERT_TRUE(st.ok());
  ASSERT_GE(frames.size(), 3u);
  std::string* data = frames[2].mutable_chunk()->mutable_data();
  (*data)[data->size() / 2] ^= 0x5a;
  TestDaemon dest(tmp_.Sub("dest"));
  v1::ImportCaptureResponse resp;
  st = Import(*dest.stub, frames, &resp);
  EXPECT_TRUE(st.error_code() == grpc::StatusCode::DATA_LOSS ||
              st.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
      << st.error_code() << " " << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "nothing committed")) << st.error_message();
  EXPECT_EQ(CaptureCount(*dest.stub), 0u);
}

TEST_F(ControlServiceTest, ImportRejectsMalformedStreams) {
  std::string id = Ingest(4);
  grpc::Status st;
  v1::ExportCaptureRequest req;
  req.set_capture_id(id);
  const auto good = Export(stub(), req, &st);
  ASSERT_TRUE(st.ok());
  ASSERT_GE(good.size(), 3u);
  TestDaemon dest(tmp_.Sub("dest"));
  auto expect_invalid = [&](std::vector<v1::TransferFrame> frames, const char* what) {
    v1::ImportCaptureResponse resp;
    grpc::Status s = Import(*dest.stub, frames, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << what << ": " << s.error_message();
  };
  expect_invalid({}, "empty stream");
  expect_invalid({good[1], good[0]}, "chunk before manifest");
  expect_invalid({good.begin(), good.end() - 1}, "truncated stream");
  auto dup = good;
  dup.push_back(good[0]);
  expect_invalid(dup, "second manifest");
  auto short_digest = good;
  short_digest[1].mutable_chunk()->set_digest("12345");
  expect_invalid(short_digest, "short digest");
  auto foreign = good;
  foreign[1].mutable_chunk()->set_digest(Sha256("not in the manifest").ToBytes());
  expect_invalid(foreign, "foreign chunk");
  auto bad_id = good;
  bad_id[0].mutable_manifest()->set_capture_id("../escape");
  expect_invalid(bad_id, "bad capture id");
  EXPECT_EQ(CaptureCount(*dest.stub), 0u);
  // The daemon keeps serving; the good stream still imports.
  v1::ImportCaptureResponse resp;
  ASSERT_TRUE(Import(*dest.stub, good, &resp).ok());
  EXPECT_EQ(CaptureCount(*dest.stub), 1u);
}

TEST_F(ControlServiceTest, FindMissingChunksValidatesInput) {
  std::string id = Ingest(5);
  auto manifest = store().GetManifest(id);
  ASSERT_TRUE(manifest.ok());
  auto refs = ManifestChunks(*manifest);
  ASSERT_TRUE(refs.ok());
  v1::FindMissingChunksRequest req;
  req.add_digests((*refs)[0].digest.ToBytes());
  req.add_digests(Sha256("absent").ToBytes());
  req.add_digests(Sha256("absent").ToBytes());
  v1::FindMissingChunksResponse resp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub().FindMissingChunks(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.missing_size(), 1);
    EXPECT_EQ(resp.missing(0), Sha256("absent").ToBytes());
  }
  {
    grpc::ClientContext ctx;
    v1::FindMissingChunksRequest bad;
    bad.add_digests("short");
    EXPECT_EQ(stub().FindMissingChunks(&ctx, bad, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    v1::FindMissingChunksRequest huge;
    std::string d = Sha256("x").ToBytes();
    for (size_t i = 0; i <= kMaxDigestsPerRequest; ++i) huge.add_digests(d);
    grpc::Status s = stub().FindMissingChunks(&ctx, huge, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "at most")) << s.error_message();
  }
}

TEST_F(ControlServiceTest, WatchEventsDeliversPublishedAndImportEvents) {
  grpc::ClientContext ctx;
  auto reader = stub().WatchEvents(&ctx, v1::WatchEventsRequest());
  reader->WaitForInitialMetadata();  // subscribed from here on
  v1::Event arm_event;
  arm_event.mutable_arm_changed()->set_arm_id("arm-77");
  daemon_->bus.Publish(arm_event);
  v1::Event got;
  ASSERT_TRUE(reader->Read(&got));
  EXPECT_EQ(got.arm_changed().arm_id(), "arm-77");
  EXPECT_GT(got.unix_ms(), 0);

  // An import publishes capture_committed.
  std::string id = Ingest(6);
  TestDaemon dest(tmp_.Sub("dest"));
  grpc::ClientContext dctx;
  auto dest_reader = dest.stub->WatchEvents(&dctx, v1::WatchEventsRequest());
  dest_reader->WaitForInitialMetadata();
  grpc::Status st;
  v1::ExportCaptureRequest req;
  req.set_capture_id(id);
  auto frames = Export(stub(), req, &st);
  v1::ImportCaptureResponse resp;
  ASSERT_TRUE(Import(*dest.stub, frames, &resp).ok());
  ASSERT_TRUE(dest_reader->Read(&got));
  EXPECT_EQ(got.capture_committed().capture_id(), id);
  dctx.TryCancel();
  (void)dest_reader->Finish();

  ctx.TryCancel();
  EXPECT_FALSE(reader->Read(&got));
  (void)reader->Finish();
}

TEST_F(ControlServiceTest, WatchEventsEndsOnShutdown) {
  grpc::ClientContext ctx;
  auto reader = stub().WatchEvents(&ctx, v1::WatchEventsRequest());
  reader->WaitForInitialMetadata();
  daemon_->service->BeginShutdown();
  v1::Event got;
  EXPECT_FALSE(reader->Read(&got));
  EXPECT_TRUE(reader->Finish().ok());
}

// A CUDA capture whose code object (not ELF: no line table, so a
// binary-only project) is larger than two stream pieces.
std::string IngestWithCode(store::Store& store, std::string* code) {
  *code = RandomBytes((9 << 20) + 123, 77);
  auto ingest = store.BeginCapture();
  EXPECT_TRUE(ingest.ok()) << ingest.status();
  v1::Region region;
  region.set_va(0x7f0000000000);
  region.set_kind(v1::REGION_DEVICE);
  std::string bytes = TextBytes(64 << 10, 3);
  region.mutable_data()->set_size(bytes.size());
  auto h = (*ingest)->AddRegion(ImageKind::kPre, region);
  EXPECT_TRUE(h.ok());
  EXPECT_TRUE((*ingest)->WriteRegion(*h, 0, bytes.data(), bytes.size(), nullptr).ok());
  v1::CodeObject co;
  co.set_format(v1::CODE_OBJECT_CUBIN);
  EXPECT_TRUE((*ingest)->AddCodeObject(co, code->data(), code->size()).ok());
  v1::CaptureManifest m;
  m.mutable_kernel()->set_mangled_name("_Z5scalePfi");
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  m.mutable_kernel()->set_arch("sm_90");
  std::string blob(8, '\0');
  uint64_t ptr = 0x7f0000000010;
  std::memcpy(blob.data(), &ptr, 8);
  m.set_argument_blob(blob);
  v1::Argument* a = m.add_arguments();
  a->set_size(8);
  a->set_kind(v1::ARG_POINTER);
  auto id = (*ingest)->Commit(std::move(m));
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : "";
}

// A capture of a Triton kernel with the Triton shim's metadata.
std::string IngestTriton(store::Store& store, const std::string& code) {
  auto ingest = store.BeginCapture();
  EXPECT_TRUE(ingest.ok()) << ingest.status();
  v1::Region region;
  region.set_va(0x7f0000000000);
  region.set_kind(v1::REGION_DEVICE);
  std::string bytes = TextBytes(64 << 10, 5);
  region.mutable_data()->set_size(bytes.size());
  auto h = (*ingest)->AddRegion(ImageKind::kPre, region);
  EXPECT_TRUE(h.ok());
  EXPECT_TRUE((*ingest)->WriteRegion(*h, 0, bytes.data(), bytes.size(), nullptr).ok());
  v1::CodeObject co;
  co.set_format(v1::CODE_OBJECT_CUBIN);
  EXPECT_TRUE((*ingest)->AddCodeObject(co, code.data(), code.size()).ok());
  const std::string source = "def kc_add_one(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n";
  nlohmann::ordered_json doc = {
      {"schema", "kerncap.triton-jit/1"},
      {"kernel_name", "kc_add_one"},
      {"current", "v"},
      {"variants",
       {{{"id", "v"},
         {"name", "kc_add_one"},
         {"binary", {{"format", "cubin"}, {"sha256", Sha256(code).ToHex()}}},
         {"num_warps", 4},
         {"num_stages", 3},
         {"signature", {{"x_ptr", "*fp32"}, {"n", "i32"}, {"BLOCK", "constexpr"}}},
         {"constexprs", {{"BLOCK", 1024}}},
         {"function", "f"}}}},
      {"functions",
       {{"f",
         {{"name", "kc_add_one"},
          {"file", "/nonexistent/app/kernels.py"},
          {"source", source},
          {"source_truncated", false}}}}}};
  v1::CaptureManifest m;
  m.mutable_kernel()->set_mangled_name("kc_add_one");
  m.mutable_kernel()->set_platform(v1::PLATFORM_CUDA);
  m.mutable_kernel()->set_arch("sm_90");
  m.mutable_kernel()->set_jit_metadata_json(doc.dump());
  std::string blob(16, '\0');
  uint64_t ptr = 0x7f0000000000;
  int32_t n = 4096;
  std::memcpy(blob.data(), &ptr, 8);
  std::memcpy(blob.data() + 8, &n, 4);
  m.set_argument_blob(blob);
  for (uint32_t off : {0u, 8u}) {
    v1::Argument* a = m.add_arguments();
    a->set_offset(off);
    a->set_size(off == 0 ? 8 : 4);
  }
  auto id = (*ingest)->Commit(std::move(m));
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : "";
}

TEST_F(ControlServiceTest, GenerateReproducerTritonProject) {
  const std::string code = "\x7f" "ELF cubin of kc_add_one";
  const std::string id = IngestTriton(store(), code);
  auto generate = [&](v1::ReproducerKind kind, const std::string& out) {
    v1::GenerateReproducerRequest req;
    req.set_capture_id(id);
    req.set_kind(kind);
    req.set_out_dir(out);
    grpc::ClientContext ctx;
    auto reader = stub().GenerateReproducer(&ctx, req);
    v1::ReproducerFile f;
    std::string project_json;
    while (reader->Read(&f)) project_json = f.project_json();
    grpc::Status st = reader->Finish();
    EXPECT_TRUE(st.ok()) << st.error_message();
    return nlohmann::json::parse(project_json.empty() ? "{}" : project_json);
  };
  // The automatic kind and TRITON give the Python project.
  for (v1::ReproducerKind kind : {v1::REPRODUCER_KIND_UNSPECIFIED, v1::REPRODUCER_TRITON}) {
    const std::string out = tmp_.path() + "/triton-" + std::to_string(kind);
    nlohmann::json p = generate(kind, out);
    EXPECT_EQ(p["kind"], "triton") << p.dump();
    EXPECT_EQ(p["triton"]["variant"]["selected_by"], "code_object_digest");
    EXPECT_EQ(p["triton"]["kernel_source"]["origin"], "recorded_source");
    for (const char* f : {"run.py", "kernel.py", "kerncap_replay.py", "Makefile", "capture.kcap"}) {
      EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
    }
    EXPECT_TRUE(absl::StrContains(*ReadFile(out + "/kernel.py"),
                                  "@triton.jit\ndef kc_add_one(x_ptr, n, BLOCK: tl.constexpr):"));
  }
  // CUDA: the native project of the same capture.
  nlohmann::json p = generate(v1::REPRODUCER_CUDA, tmp_.path() + "/native");
  EXPECT_NE(p["kind"], "triton");
  EXPECT_FALSE(p.contains("triton"));
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() + "/native/run.py"));
}

TEST_F(ControlServiceTest, GenerateReproducerStreamsProjectInPieces) {
  std::string code;
  std::string id = IngestWithCode(store(), &code);
  grpc::ClientContext ctx;
  v1::GenerateReproducerRequest req;
  req.set_capture_id(id.substr(0, 8));  // a prefix
  auto reader = stub().GenerateReproducer(&ctx, req);
  const std::string out = tmp_.path() + "/client/proj";
  auto stage = repro::ProjectStage::Begin(out, false);
  ASSERT_TRUE(stage.ok()) << stage.status();
  repro::ProjectReceiver receiver(stage->get());
  v1::ReproducerFile f;
  std::string project_json;
  int code_frames = 0;
  while (reader->Read(&f)) {
    if (f.path().empty()) {
      project_json = f.project_json();
      EXPECT_TRUE(f.written_to().empty());
      continue;
    }
    if (f.path() == "code/kernel.cubin") ++code_frames;
    ASSERT_TRUE(receiver.Add(f).ok());
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_TRUE(receiver.Finish().ok());
  ASSERT_TRUE((*stage)->Commit().ok());
  EXPECT_EQ(code_frames, 10);  // 9 MiB + 123 bytes in 1 MiB pieces
  EXPECT_EQ(*ReadFile(out + "/code/kernel.cubin"), code);
  auto p = nlohmann::json::parse(project_json);
  EXPECT_EQ(p["provenance"]["capture_id"], id);
  EXPECT_EQ(p["kind"], "binary");
  EXPECT_EQ(p["source"]["outcome"], "not_an_object_file");
  EXPECT_EQ(p["arguments"][0]["pointer"]["region"]["base"], "0x7f0000000000");
  EXPECT_EQ(nlohmann::json::parse(*ReadFile(out + "/kerncap.json")), p);
  EXPECT_TRUE(std::filesystem::exists(out + "/Makefile"));
  // capture.kcap is the capture's export: it imports back as the same capture.
  auto kcap = kcap::KcapReader::Open(out + "/capture.kcap");
  ASSERT_TRUE(kcap.ok()) << kcap.status();
  v1::TransferFrame first;
  ASSERT_TRUE(*(*kcap)->Next(&first));
  EXPECT_EQ(first.manifest().capture_id(), id);
}

TEST_F(ControlServiceTest, GenerateReproducerWritesOutDirOnDaemonHost) {
  std::string code;
  std::string id = IngestWithCode(store(), &code);
  const std::string out = tmp_.path() + "/daemon-side";
  v1::GenerateReproducerRequest req;
  req.set_capture_id(id);
  req.set_out_dir(out);
  req.set_kind(v1::REPRODUCER_BINARY);
  auto run = [&](const v1::GenerateReproducerRequest& r, std::vector<v1::ReproducerFile>* frames) {
    grpc::ClientContext ctx;
    auto reader = stub().GenerateReproducer(&ctx, r);
    v1::ReproducerFile f;
    while (reader->Read(&f)) frames->push_back(f);
    return reader->Finish();
  };
  std::vector<v1::ReproducerFile> frames;
  grpc::Status st = run(req, &frames);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(frames.size(), 1u);  // only the final frame
  EXPECT_EQ(frames[0].written_to(), out);
  EXPECT_EQ(*ReadFile(out + "/code/kernel.cubin"), code);

  // A second generation into the same non-empty folder is refused and
  // leaves it as it was; the store is untouched.
  const std::string before = *ReadFile(out + "/kerncap.json");
  frames.clear();
  st = run(req, &frames);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS) << st.error_message();
  EXPECT_EQ(*ReadFile(out + "/kerncap.json"), before);
  EXPECT_EQ(CaptureCount(stub()), 1u);
  EXPECT_TRUE(store::testing::VerifyProblems(store()).empty());
  req.set_force(true);
  frames.clear();
  EXPECT_TRUE(run(req, &frames).ok());
}

TEST_F(ControlServiceTest, GenerateReproducerRejectsBadRequests) {
  std::string code;
  std::string id = IngestWithCode(store(), &code);
  auto code_of = [&](const v1::GenerateReproducerRequest& r) {
    grpc::ClientContext ctx;
    auto reader = stub().GenerateReproducer(&ctx, r);
    v1::ReproducerFile f;
    EXPECT_FALSE(reader->Read(&f));
    return reader->Finish().error_code();
  };
  v1::GenerateReproducerRequest req;
  req.set_capture_id("cap-000000000000");
  EXPECT_EQ(code_of(req), grpc::StatusCode::NOT_FOUND);
  req.set_capture_id(id);
  req.set_out_dir("relative/dir");
  EXPECT_EQ(code_of(req), grpc::StatusCode::INVALID_ARGUMENT);
  req.set_out_dir("");
  req.set_source_dir("src");
  EXPECT_EQ(code_of(req), grpc::StatusCode::INVALID_ARGUMENT);
  req.set_source_dir("");
  // Triton asked of a capture without the Triton shim's metadata.
  req.set_kind(v1::REPRODUCER_TRITON);
  {
    grpc::ClientContext ctx;
    auto reader = stub().GenerateReproducer(&ctx, req);
    v1::ReproducerFile f;
    EXPECT_FALSE(reader->Read(&f));
    grpc::Status st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
    EXPECT_TRUE(absl::StrContains(st.error_message(), "no Triton metadata")) << st.error_message();
  }
  // A synthetic capture with no code object: nothing to reproduce.
  req.set_kind(v1::REPRODUCER_KIND_UNSPECIFIED);
  req.set_capture_id(Ingest(8));
  req.set_out_dir(tmp_.path() + "/never");
  EXPECT_EQ(code_of(req), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() + "/never"));
}

TEST_F(ControlServiceTest, GcAndVerify) {
  std::string id = Ingest(9);
  {
    grpc::ClientContext ctx;
    v1::RunGcRequest req;
    req.set_dry_run(true);
    v1::GcReport report;
    ASSERT_TRUE(stub().RunGc(&ctx, req, &report).ok());
    EXPECT_TRUE(report.dry_run());
    EXPECT_EQ(report.dead_chunks(), 0u);
  }
  {
    grpc::ClientContext ctx;
    v1::VerifyStoreRequest req;
    req.set_rehash(true);
    auto reader = stub().VerifyStore(&ctx, req);
    v1::VerifyProgress p;
    v1::VerifyProgress last;
    int problems = 0;
    while (reader->Read(&p)) {
      problems += p.problems_size();
      last = p;
    }
    ASSERT_TRUE(reader->Finish().ok());
    EXPECT_TRUE(last.done());
    EXPECT_GT(last.chunks_checked(), 0u);
    EXPECT_EQ(problems, 0);
  }
  {
    grpc::ClientContext ctx;
    v1::VerifyStoreRequest req;
    req.set_capture_id("cap-000000000000");
    auto reader = stub().VerifyStore(&ctx, req);
    v1::VerifyProgress p;
    EXPECT_FALSE(reader->Read(&p));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    // Deleting then collecting reclaims the capture's chunks.
    grpc::ClientContext c1, c2;
    v1::DeleteCaptureRequest del;
    del.set_capture_id(id);
    v1::DeleteCaptureResponse dresp;
    ASSERT_TRUE(stub().DeleteCapture(&c1, del, &dresp).ok());
    v1::GcReport report;
    ASSERT_TRUE(stub().RunGc(&c2, v1::RunGcRequest(), &report).ok());
    EXPECT_GT(report.dead_chunks(), 0u);
  }
}

TEST(ControlServiceImportReferenceTest, PathRulesAndImporter) {
  store::testing::TempDir tmp;
  std::string seen_folder;
  TestDaemon d(tmp.path(),
               [&](const std::string& folder, CaptureSink& sink) -> absl::StatusOr<std::string> {
                 seen_folder = folder;
                 auto& st = static_cast<store::Store&>(sink);
                 return IngestCapture(st, {{0x1000, TextBytes(70 << 10, 1)}}, {});
               });
  auto call = [&](const std::string& path, v1::ImportCaptureResponse* resp) {
    grpc::ClientContext ctx;
    v1::ImportReferenceCaptureRequest req;
    req.set_path(path);
    return d.stub->ImportReferenceCapture(&ctx, req, resp);
  };
  v1::ImportCaptureResponse resp;
  EXPECT_EQ(call("", &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(call("relative/dir", &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(call(tmp.path() + "/../x", &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(call(tmp.path() + "/missing", &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(call(d.socket, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);  // not a dir
  EXPECT_TRUE(seen_folder.empty());
  std::string folder = tmp.Sub("ref");
  std::filesystem::create_directories(folder);
  grpc::Status st = call(folder, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(seen_folder, folder);
  EXPECT_FALSE(resp.capture_id().empty());
  EXPECT_EQ(CaptureCount(*d.stub), 1u);
}

TEST(ControlServiceImportReferenceTest, WithoutImporterIsUnimplemented) {
  store::testing::TempDir tmp;
  TestDaemon d(tmp.path());
  grpc::ClientContext ctx;
  v1::ImportReferenceCaptureRequest req;
  req.set_path(tmp.path());
  v1::ImportCaptureResponse resp;
  EXPECT_EQ(d.stub->ImportReferenceCapture(&ctx, req, &resp).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

// Daemon-host paths in GenerateReproducer are for local users only; a
// remote client still gets the project streamed back.
TEST(ControlServiceAuthTest, ReproducerHostPathsOnlyOverTheUnixSocket) {
  store::testing::TempDir tmp;
  TestDaemon d(tmp.path(), nullptr, "t0ken");
  ASSERT_GT(d.tcp_port, 0);
  std::string code;
  const std::string id = IngestWithCode(*d.store, &code);
  auto tcp = v1::KerncapControl::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", d.tcp_port),
                                                             grpc::InsecureChannelCredentials()));
  auto code_of = [&](v1::KerncapControl::Stub& stub, const v1::GenerateReproducerRequest& r,
                     int* frames) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer t0ken");
    auto reader = stub.GenerateReproducer(&ctx, r);
    v1::ReproducerFile f;
    *frames = 0;
    while (reader->Read(&f)) ++*frames;
    return reader->Finish().error_code();
  };
  int frames = 0;
  for (const char* field : {"out_dir", "source_dir", "compile_commands"}) {
    v1::GenerateReproducerRequest req;
    req.set_capture_id(id);
    const std::string path = tmp.path() + "/elsewhere";
    if (std::string(field) == "out_dir") req.set_out_dir(path);
    if (std::string(field) == "source_dir") req.set_source_dir(path);
    if (std::string(field) == "compile_commands") req.set_compile_commands(path);
    EXPECT_EQ(code_of(*tcp, req, &frames), grpc::StatusCode::PERMISSION_DENIED) << field;
    EXPECT_EQ(frames, 0) << field;
  }
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/elsewhere"));
  v1::GenerateReproducerRequest streamed;
  streamed.set_capture_id(id);
  EXPECT_EQ(code_of(*tcp, streamed, &frames), grpc::StatusCode::OK);
  EXPECT_GT(frames, 0);
  // The same out_dir request is fine over the Unix socket.
  v1::GenerateReproducerRequest local = streamed;
  local.set_out_dir(tmp.path() + "/elsewhere");
  EXPECT_EQ(code_of(*d.stub, local, &frames), grpc::StatusCode::OK);
  EXPECT_TRUE(std::filesystem::exists(tmp.path() + "/elsewhere/kerncap.json"));
}

// Reference folders are daemon-host paths: a remote client cannot make the
// daemon read them.
TEST(ControlServiceAuthTest, ReferenceFoldersOnlyOverTheUnixSocket) {
  store::testing::TempDir tmp;
  bool called = false;
  TestDaemon d(
      tmp.path(),
      [&](const std::string&, CaptureSink&) -> absl::StatusOr<std::string> {
        called = true;
        return absl::InternalError("not reached");
      },
      "t0ken");
  ASSERT_GT(d.tcp_port, 0);
  auto tcp = v1::KerncapControl::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", d.tcp_port),
                                                             grpc::InsecureChannelCredentials()));
  std::filesystem::create_directories(tmp.Sub("ref"));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer t0ken");
  v1::ImportReferenceCaptureRequest req;
  req.set_path(tmp.Sub("ref"));
  v1::ImportCaptureResponse resp;
  grpc::Status st = tcp->ImportReferenceCapture(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("local Unix socket"), std::string::npos);
  EXPECT_FALSE(called);
}

// A crafted capture (a code object claiming 4 GiB, one digest) used to
// import, and then made GenerateReproducer allocate 4 GiB.
TEST_F(ControlServiceTest, ACraftedImportIsRefusedBeforeAnythingIsAllocated) {
  std::string code;
  const std::string id = IngestWithCode(store(), &code);
  grpc::Status st;
  v1::ExportCaptureRequest req;
  req.set_capture_id(id);
  std::vector<v1::TransferFrame> frames = Export(stub(), req, &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  TestDaemon dest(tmp_.Sub("dest"));
  v1::CaptureManifest* m = frames[0].mutable_manifest();
  m->mutable_code_objects(0)->mutable_data()->set_size(4ull << 30);
  v1::ImportCaptureResponse resp;
  st = Import(*dest.stub, frames, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("code object 0"), std::string::npos) << st.error_message();
  EXPECT_EQ(CaptureCount(*dest.stub), 0u);
  // Digest counts that disagree with the size are refused the same way.
  m->mutable_code_objects(0)->mutable_data()->set_size(code.size() + (1u << 20));
  st = Import(*dest.stub, frames, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("digests for"), std::string::npos) << st.error_message();
}

// A GC while an import streams in must keep what the import wrote (its
// chunks are in sealed packs but no manifest names them yet): large
// imports used to fail with "references chunk ... which is not in the store".
TEST_F(ControlServiceTest, GcDuringAnImportKeepsWhatTheImportWrote) {
  std::string code;
  const std::string id = IngestWithCode(store(), &code);  // 9 MiB: several 1 MiB packs
  grpc::Status st;
  v1::ExportCaptureRequest req;
  req.set_capture_id(id);
  std::vector<v1::TransferFrame> frames = Export(stub(), req, &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_GT(frames.size(), 20u);
  auto first = Digest::FromBytes(frames[1].chunk().digest());
  ASSERT_TRUE(first.ok());

  TestDaemon dest(tmp_.Sub("dest"));
  grpc::ClientContext ctx;
  v1::ImportCaptureResponse resp;
  auto writer = dest.stub->ImportCapture(&ctx, &resp);
  for (const auto& f : frames) ASSERT_TRUE(writer->Write(f));
  // Once the first chunks sit in a sealed pack, collect garbage.
  for (int i = 0; i < 500 && !dest.store->HasChunk(*first); ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(dest.store->HasChunk(*first));
  {
    grpc::ClientContext gc_ctx;
    v1::RunGcRequest gc;
    v1::GcReport report;
    ASSERT_TRUE(dest.stub->RunGc(&gc_ctx, gc, &report).ok());
    EXPECT_EQ(report.dead_chunks(), 0u);
  }
  writer->WritesDone();
  st = writer->Finish();
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.capture_id(), id);
  EXPECT_TRUE(store::testing::VerifyProblems(*dest.store, id).empty());
}

TEST(ControlServiceAuthTest, TcpNeedsTokenUnixDoesNot) {
  store::testing::TempDir tmp;
  TestDaemon d(tmp.path(), nullptr, "t0ken");
  ASSERT_GT(d.tcp_port, 0);
  auto tcp = v1::KerncapControl::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", d.tcp_port),
                                                             grpc::InsecureChannelCredentials()));
  v1::DaemonStatus st;
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(tcp->GetStatus(&ctx, v1::GetStatusRequest(), &st).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer wrong");
    EXPECT_EQ(tcp->GetStatus(&ctx, v1::GetStatusRequest(), &st).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer t0ken");
    EXPECT_TRUE(tcp->GetStatus(&ctx, v1::GetStatusRequest(), &st).ok());
  }
  {
    grpc::ClientContext ctx;
    EXPECT_TRUE(d.stub->GetStatus(&ctx, v1::GetStatusRequest(), &st).ok());
  }
  {
    // Streaming RPCs are guarded too.
    grpc::ClientContext ctx;
    auto reader = tcp->WatchEvents(&ctx, v1::WatchEventsRequest());
    v1::Event e;
    EXPECT_FALSE(reader->Read(&e));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
}

}  // namespace
}  // namespace kerncap::service
