// CaptureSource from a kerncap store (read-only, next to a live daemon)
// against the same capture exported to a .kcap, and the replayer's choice of
// source (OpenDaemonCapture) with an in-process kerncapd on a Unix socket.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "daemon/service/control_service.h"
#include "daemon/service/unix_listener.h"
#include "daemon/store/store_test_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "reproducer/replay/core/capture_source.h"
#include "reproducer/replay/core/daemon_fetch.h"

namespace kerncap::replay {
namespace {

using store::testing::IngestCapture;
using store::testing::RandomBytes;
using store::testing::TempDir;
using store::testing::TestRegion;
using store::testing::TextBytes;

constexpr size_t kChunk = 64 << 10;

class NoAgents : public AgentControl {
 public:
  std::vector<v1::AgentInfo> ListAgents(const Caller&) override { return {}; }
  absl::StatusOr<v1::ArmInfo> Arm(const v1::ArmRequest&, const Caller&) override {
    return absl::UnimplementedError("no agents");
  }
  absl::StatusOr<std::vector<v1::ArmInfo>> Disarm(const v1::DisarmRequest&,
                                                  const Caller&) override {
    return absl::UnimplementedError("no agents");
  }
  std::vector<v1::ArmInfo> ListArms(bool, const Caller&) override { return {}; }
  int IngestsInFlight() override { return 0; }
};

// A kerncapd in this process: a Store (which holds the LOCK) behind the
// control service on dir/kerncapd.sock.
struct Daemon {
  explicit Daemon(const std::string& dir, const std::string& hostname = "") {
    store_dir = dir + "/store";
    auto s = store::Store::Open(store::testing::SmallOptions(store_dir));
    EXPECT_TRUE(s.ok()) << s.status();
    store = std::move(*s);
    socket = dir + "/kerncapd.sock";
    service::ControlServiceOptions options;
    options.info.version = "test";
    options.info.pid = static_cast<uint32_t>(::getpid());
    options.info.hostname = hostname;
    options.info.unix_socket = socket;
    service = std::make_unique<service::ControlService>(*store, agents, bus, options);
    auto bound = service::UnixListener::Bind(socket, 0600);
    EXPECT_TRUE(bound.ok()) << bound.status();
    listener = std::move(*bound);
    grpc::ServerBuilder builder;
    builder.SetMaxSendMessageSize(64 << 20);
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    EXPECT_NE(server, nullptr);
    listener->Start(server.get());
  }
  ~Daemon() {
    service->BeginShutdown();
    listener->Stop();
    bus.Shutdown();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server->Wait();
  }

  std::string store_dir;
  std::string socket;
  std::unique_ptr<store::Store> store;
  EventBus bus;
  NoAgents agents;
  std::unique_ptr<service::UnixListener> listener;
  std::unique_ptr<service::ControlService> service;
  std::unique_ptr<grpc::Server> server;
};

// Pre regions (text, random, zero; not chunk-multiple) and a post image that
// changes part of the first one (stored as a diff).
std::vector<TestRegion> Pre() {
  return {{0x10000, TextBytes(5 * kChunk + 123, 1)},
          {0x90000, RandomBytes(4 * kChunk, 2)},
          {0xA00000, std::string(2 * kChunk, '\0')}};
}
std::vector<TestRegion> Post() {
  std::string changed = TextBytes(5 * kChunk + 123, 1);
  for (size_t i = kChunk; i < 2 * kChunk; ++i) changed[i] = static_cast<char>(i * 31);
  return {{0x10000, changed}};
}

std::string ReadList(const CaptureSource& src, const v1::ChunkList& l) {
  std::string out(l.size(), '\0');
  for (int i = 0; i < l.chunk_digests_size(); ++i) {
    const uint64_t off = ChunkOffset(l, static_cast<uint64_t>(i));
    absl::Status st = src.ReadChunkInto(l.chunk_digests(i), ChunkLength(l, static_cast<uint64_t>(i)),
                                        out.data() + off);
    EXPECT_TRUE(st.ok()) << st;
  }
  return out;
}

TEST(StoreSourceTest, StoreAndExportedKcapGiveTheSameCapture) {
  TempDir tmp;
  Daemon d(tmp.path());
  auto id = IngestCapture(*d.store, Pre(), Post());
  ASSERT_TRUE(id.ok()) << id.status();

  DaemonSourceOptions export_only;
  export_only.allow_store = false;
  std::string note;
  auto exported = OpenDaemonCapture("unix:" + d.socket, *id, export_only, &note);
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ((*exported)->origin(), "export");
  EXPECT_TRUE(absl::StrContains(note, "--via-export")) << note;

  auto direct = CaptureSource::OpenStore(d.store_dir, id->substr(0, 8));
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ((*direct)->origin(), "store:" + d.store_dir);

  const CaptureSource& a = **exported;
  const CaptureSource& b = **direct;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a.manifest(), b.manifest()));
  EXPECT_EQ(a.chunk_count(), b.chunk_count());
  ASSERT_EQ(b.manifest().pre().regions_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const v1::ChunkList& l = b.manifest().pre().regions(i).data();
    const std::string bytes = ReadList(b, l);
    EXPECT_TRUE(bytes == ReadList(a, l)) << "pre region " << i;
    EXPECT_TRUE(bytes == Pre()[static_cast<size_t>(i)].bytes) << "pre region " << i;
  }
  ASSERT_EQ(b.manifest().post().regions_size(), 1);
  const v1::Region& post = b.manifest().post().regions(0);
  EXPECT_TRUE(post.diff());
  for (int k = 0; k < post.data().chunk_digests_size(); ++k) {
    const uint64_t i = post.changed_chunks(k);
    const v1::ChunkList& l = b.manifest().pre().regions(0).data();
    std::string x(ChunkLength(l, i), '\0'), y(ChunkLength(l, i), '\0');
    ASSERT_TRUE(a.ReadChunkInto(post.data().chunk_digests(k), ChunkLength(l, i), x.data()).ok());
    ASSERT_TRUE(b.ReadChunkInto(post.data().chunk_digests(k), ChunkLength(l, i), y.data()).ok());
    EXPECT_TRUE(x == y);
    EXPECT_TRUE(x == Post()[0].bytes.substr(ChunkOffset(l, i), ChunkLength(l, i)));
  }

  // --verify-digests works on the store path too; an unknown digest is NotFound.
  (*direct)->set_verify_content_digests(true);
  EXPECT_TRUE(ReadList(b, b.manifest().pre().regions(1).data()) == Pre()[1].bytes);
  std::string buf(kChunk, '\0');
  EXPECT_TRUE(absl::IsNotFound(b.ReadChunkInto(std::string(32, '\x07'), kChunk, buf.data())));
}

TEST(StoreSourceTest, ReplayerReadsTheStoreOfALocalDaemon) {
  TempDir tmp;
  Daemon d(tmp.path());
  auto id = IngestCapture(*d.store, Pre(), Post());
  ASSERT_TRUE(id.ok()) << id.status();
  std::string note;
  auto src = OpenDaemonCapture("unix:" + d.socket, id->substr(0, 7), {}, &note);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->origin(), "store:" + d.store_dir);
  EXPECT_TRUE(absl::StrContains(note, "directly")) << note;
  EXPECT_EQ((*src)->manifest().capture_id(), *id);
  EXPECT_TRUE(ReadList(**src, (*src)->manifest().pre().regions(1).data()) == Pre()[1].bytes);

  // The daemon keeps working on its store meanwhile (it still holds the lock).
  auto more = IngestCapture(*d.store, {{0x5000, RandomBytes(kChunk, 9)}});
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_TRUE(ReadList(**src, (*src)->manifest().pre().regions(0).data()) == Pre()[0].bytes);

  // Unknown capture: the export's answer (the daemon's NotFound).
  auto missing = OpenDaemonCapture("unix:" + d.socket, "cap-0000000000ff", {}, &note);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
}

TEST(StoreSourceTest, FallsBackToTheExportForADaemonOnAnotherHost) {
  TempDir tmp;
  Daemon d(tmp.path(), "some-other-host.invalid");
  auto id = IngestCapture(*d.store, Pre());
  ASSERT_TRUE(id.ok()) << id.status();
  std::string note;
  auto src = OpenDaemonCapture("unix:" + d.socket, *id, {}, &note);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->origin(), "export");
  EXPECT_TRUE(absl::StrContains(note, "some-other-host.invalid")) << note;
  EXPECT_TRUE(ReadList(**src, (*src)->manifest().pre().regions(1).data()) == Pre()[1].bytes);
}

TEST(StoreSourceTest, DirectStoreDirNeedsAnAbsolutePathOnThisHost) {
  v1::DaemonStatus s;
  EXPECT_TRUE(absl::IsFailedPrecondition(DirectStoreDir(s, "h").status()));
  s.mutable_store()->set_path("relative/store");
  EXPECT_TRUE(absl::IsFailedPrecondition(DirectStoreDir(s, "h").status()));
  s.mutable_store()->set_path("/var/lib/kerncap/store");
  EXPECT_EQ(*DirectStoreDir(s, "h"), "/var/lib/kerncap/store");
  s.set_hostname("h");
  EXPECT_EQ(*DirectStoreDir(s, "h"), "/var/lib/kerncap/store");
  EXPECT_EQ(*DirectStoreDir(s, ""), "/var/lib/kerncap/store");
  s.set_hostname("other");
  EXPECT_TRUE(absl::IsFailedPrecondition(DirectStoreDir(s, "h").status()));
}

TEST(StoreSourceTest, OpenStoreErrorsNameTheProblem) {
  TempDir tmp;
  auto missing = CaptureSource::OpenStore(tmp.path() + "/nope", "cap-1");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  auto foreign = CaptureSource::OpenStore(tmp.path(), "cap-1");
  EXPECT_TRUE(absl::IsFailedPrecondition(foreign.status())) << foreign.status();
}

}  // namespace
}  // namespace kerncap::replay
