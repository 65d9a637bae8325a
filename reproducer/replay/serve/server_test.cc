// The serve socket loop with a fake evaluator, over a real Unix socket.
#include "reproducer/replay/serve/server.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "reproducer/replay/serve/client.h"

namespace kerncap::replay::serve {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// Answers from the request alone: the "kernel" echoes code_object_path;
// a path of "fault" loses the state; "fail" is an ordinary error.
class FakeEvaluator : public Evaluator {
 public:
  json Info() override { return {{"capture_id", "cap-fake"}, {"evaluations", calls.load()}}; }
  absl::StatusOr<EvaluateResult> Evaluate(const EvaluateRequest& r) override {
    ++calls;
    if (r.code_object_path == "fault") {
      lost_ = true;
      return absl::AbortedError("the candidate faulted; the CUDA context is lost");
    }
    if (r.code_object_path == "fail") return absl::NotFoundError("no kernel 'k'");
    EvaluateResult res;
    res.kernel = r.code_object.has_value() ? *r.code_object : r.code_object_path;
    res.validated = r.validate;
    res.validation.regions_compared = 1;
    res.kernel_ms = ComputeBenchStats({static_cast<double>(r.iterations)});
    return res;
  }
  bool lost() const override { return lost_; }

  std::atomic<int> calls{0};
  bool lost_ = false;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("kc_serve_test_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "s.sock").string();
  }
  void TearDown() override {
    if (thread_.joinable()) {
      if (server_) server_->Stop();
      thread_.join();
    }
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Start() {
    auto s = Server::Listen(ServerOptions{path_, 4096, 30});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    thread_ = std::thread([this] { result_ = server_->Serve(fake_); });
  }
  std::unique_ptr<Client> Connect() {
    auto c = Client::Connect(path_);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  json Call(Client& c, const std::string& line) {
    auto a = c.CallRaw(line, 10);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? json::parse(*a) : json();
  }

  std::filesystem::path dir_;
  std::string path_;
  FakeEvaluator fake_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  absl::Status result_ = absl::UnknownError("not run");
};

TEST_F(ServerTest, ServesSequentialClientsUntilShutdown) {
  ASSERT_NO_FATAL_FAILURE(Start());
  // The socket is owner-only.
  EXPECT_EQ(std::filesystem::status(path_).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  for (int client = 0; client < 3; ++client) {
    auto c = Connect();
    ASSERT_NE(c, nullptr);
    // Several requests on one connection, answered in order.
    for (int k = 0; k < 3; ++k) {
      json a = Call(*c, json{{"op", "evaluate"},
                             {"id", client * 10 + k},
                             {"code_object_path", absl::StrCat("c", client)},
                             {"iterations", k}}
                            .dump());
      EXPECT_TRUE(a["ok"].get<bool>()) << a.dump();
      EXPECT_EQ(a["id"], client * 10 + k);
      EXPECT_EQ(a["kernel"], absl::StrCat("c", client));
      EXPECT_EQ(a["kernel_ms"]["median"], static_cast<double>(k));
    }
  }
  EXPECT_EQ(fake_.calls.load(), 9);
  auto c = Connect();
  json info = Call(*c, R"({"op":"info","id":"i"})");
  EXPECT_TRUE(info["ok"].get<bool>());
  EXPECT_EQ(info["capture_id"], "cap-fake");
  EXPECT_EQ(info["id"], "i");
  json bye = Call(*c, R"({"op":"shutdown"})");
  EXPECT_TRUE(bye["ok"].get<bool>());
  EXPECT_EQ(bye["op"], "shutdown");
  thread_.join();
  EXPECT_TRUE(result_.ok()) << result_;
  EXPECT_EQ(server_->requests_served(), 11u);
  server_.reset();
  EXPECT_FALSE(std::filesystem::exists(path_));  // removed on close
}

TEST_F(ServerTest, AnswersBadRequestsAndKeepsServing) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  json a = Call(*c, "this is not json");
  EXPECT_FALSE(a["ok"].get<bool>());
  EXPECT_THAT(a["error"].get<std::string>(), HasSubstr("not JSON"));
  EXPECT_EQ(a["code"], "INVALID_ARGUMENT");
  a = Call(*c, R"({"op":"frobnicate","id":5})");
  EXPECT_THAT(a["error"].get<std::string>(), HasSubstr("unknown op 'frobnicate'"));
  EXPECT_EQ(a["id"], 5);  // recovered from the bad request
  a = Call(*c, R"({"op":"evaluate","code_object_path":"x","iterations":-4})");
  EXPECT_THAT(a["error"].get<std::string>(), HasSubstr("'iterations' must be between"));
  a = Call(*c, R"({"op":"evaluate","code_object_path":"fail"})");
  EXPECT_FALSE(a["ok"].get<bool>());
  EXPECT_EQ(a["error"], "no kernel 'k'");
  EXPECT_FALSE(a.contains("context_lost"));
  a = Call(*c, R"({"op":"evaluate","code_object_b64":"aGk="})");
  EXPECT_TRUE(a["ok"].get<bool>());
  EXPECT_EQ(a["kernel"], "hi");
  EXPECT_EQ(fake_.calls.load(), 2);  // the malformed ones never reached it
}

TEST_F(ServerTest, RefusesOverlongRequestsAndDropsTheClient) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  json a = Call(*c, std::string(10000, 'x'));  // limit 4096 in this test
  EXPECT_FALSE(a["ok"].get<bool>());
  EXPECT_THAT(a["error"].get<std::string>(), HasSubstr("longer than 4096 bytes"));
  // That connection is closed; others are served.
  auto again = c->CallRaw(R"({"op":"info"})", 5);
  EXPECT_FALSE(again.ok());
  auto d = Connect();
  EXPECT_TRUE(Call(*d, R"({"op":"info"})")["ok"].get<bool>());
}

TEST_F(ServerTest, InterleavedConnectionsAreEachAnswered) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto a = Connect();
  auto b = Connect();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(Call(*b, R"({"op":"info","id":"b"})")["id"], "b");
  EXPECT_EQ(Call(*a, R"({"op":"info","id":"a"})")["id"], "a");
  // A client that disconnects mid-line does not disturb the others.
  {
    auto gone = Connect();
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::write(fd, "{\"op\":", 6), 6);
    ::close(fd);
  }
  EXPECT_EQ(Call(*a, R"({"op":"info","id":"a2"})")["id"], "a2");
}

TEST_F(ServerTest, StopsWithAnErrorWhenTheStateIsLost) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  json a = Call(*c, R"({"op":"evaluate","id":1,"code_object_path":"fault"})");
  EXPECT_FALSE(a["ok"].get<bool>());
  EXPECT_TRUE(a["context_lost"].get<bool>());
  EXPECT_THAT(a["error"].get<std::string>(), HasSubstr("context is lost"));
  thread_.join();
  EXPECT_EQ(result_.code(), absl::StatusCode::kAborted);
  // Nothing is served any more.
  auto more = c->CallRaw(R"({"op":"info"})", 5);
  EXPECT_FALSE(more.ok());
}

TEST_F(ServerTest, StopReturnsOk) {
  ASSERT_NO_FATAL_FAILURE(Start());
  server_->Stop();
  thread_.join();
  EXPECT_TRUE(result_.ok()) << result_;
}

TEST_F(ServerTest, SocketPathRules) {
  // A stale socket (a server that died: the file stays, nobody listens)
  // is replaced.
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
  }
  ASSERT_TRUE(std::filesystem::exists(path_));
  auto s = Server::Listen(ServerOptions{path_});
  ASSERT_TRUE(s.ok()) << s.status();
  // A live one is not taken over.
  auto second = Server::Listen(ServerOptions{path_});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  s->reset();
  // A regular file is never replaced.
  std::ofstream(path_) << "data";
  auto file = Server::Listen(ServerOptions{path_});
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(std::filesystem::exists(path_));
  // Too long for sockaddr_un.
  auto longp = Server::Listen(ServerOptions{std::string(200, 'a')});
  EXPECT_EQ(longp.status().code(), absl::StatusCode::kInvalidArgument);
  // A client to nowhere says what to do.
  auto nobody = Client::Connect((dir_ / "none.sock").string());
  ASSERT_FALSE(nobody.ok());
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(nobody.status().message()), HasSubstr("kerncap-replay serve"));
}

}  // namespace
}  // namespace kerncap::replay::serve
