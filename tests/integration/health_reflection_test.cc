// kerncapd serves the standard gRPC health service and server reflection, so
// generic tools (grpc_health_probe, grpcurl, Kubernetes probes) work without
// our protos. This test speaks both protocols with raw protobuf bytes through
// gRPC's generic stub, exactly as such a tool would.
#include <signal.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "tests/integration/subprocess.h"

namespace kerncap::testing {
namespace {

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

grpc::ByteBuffer FromString(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// Waits for the next completion-queue event and returns whether it succeeded.
bool Await(grpc::CompletionQueue& cq, void* expected_tag) {
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok)) return false;
  EXPECT_EQ(tag, expected_tag);
  return ok;
}

class HealthReflectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("kc_health");
    daemon_ = std::make_unique<Background>(std::vector<std::string>{
        BinaryPath("kerncapd"), "--store=" + dir_ + "/store", "--socket=" + dir_ + "/d.sock",
        "--agent-socket=" + dir_ + "/a.sock"});
    ASSERT_TRUE(WaitFor([&] {
      return RunProcess({BinaryPath("kerncapctl"), "--socket=" + dir_ + "/d.sock", "status"})
                 .exit_code == 0;
    })) << daemon_->Stderr();
    channel_ = grpc::CreateChannel("unix:" + dir_ + "/d.sock", grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    channel_.reset();
    EXPECT_EQ(daemon_->Stop(SIGTERM).exit_code, 0);
    RemoveTree(dir_);
  }

  std::string dir_;
  std::unique_ptr<Background> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
};

// One unary grpc.health.v1.Health/Check for `service`; returns the status
// and the response bytes.
std::pair<grpc::Status, std::string> HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                                                 const std::string& service) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  // HealthCheckRequest{service}: field 1, length-delimited (empty: no field).
  std::string req;
  if (!service.empty()) req = std::string("\x0a") + static_cast<char>(service.size()) + service;
  auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", FromString(req), &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  int tag = 1;
  call->Finish(&response, &status, &tag);
  EXPECT_TRUE(Await(cq, &tag));
  return {status, status.ok() ? ToString(response) : std::string()};
}

// One request on a ServerReflectionInfo stream of `service` (v1 or
// v1alpha); returns the response bytes.
std::string Reflect(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                    const std::string& request) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = stub.PrepareCall(&ctx, "/" + service + "/ServerReflectionInfo", &cq);
  int start = 1, write = 2, done = 3, read = 4, finish = 5;
  call->StartCall(&start);
  EXPECT_TRUE(Await(cq, &start));
  call->Write(FromString(request), &write);
  EXPECT_TRUE(Await(cq, &write));
  call->WritesDone(&done);
  EXPECT_TRUE(Await(cq, &done));
  grpc::ByteBuffer response;
  call->Read(&response, &read);
  std::string out = Await(cq, &read) ? ToString(response) : std::string();
  grpc::ByteBuffer extra;
  call->Read(&extra, &read);
  Await(cq, &read);  // end of stream
  grpc::Status status;
  call->Finish(&status, &finish);
  EXPECT_TRUE(Await(cq, &finish));
  EXPECT_TRUE(status.ok()) << status.error_message();
  return out;
}

// Kubernetes gRPC probes and grpc_health_probe -service name the service.
TEST_F(HealthReflectionTest, HealthAnswersForTheServiceNameAndRefusesUnknownOnes) {
  auto [named, named_body] = HealthCheck(channel_, "kerncap.v1.KerncapControl");
  ASSERT_TRUE(named.ok()) << named.error_message();
  EXPECT_EQ(named_body, std::string("\x08\x01", 2));  // SERVING
  auto [server, server_body] = HealthCheck(channel_, "");
  ASSERT_TRUE(server.ok()) << server.error_message();
  EXPECT_EQ(server_body, std::string("\x08\x01", 2));
  auto [unknown, unknown_body] = HealthCheck(channel_, "kerncap.v1.NoSuchService");
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
}

// grpcurl and current tools ask for reflection v1 first; gRPC 1.51 only has
// v1alpha, so kerncapd serves v1 itself (daemon/kerncapd/reflection_v1.h).
TEST_F(HealthReflectionTest, ReflectionV1ListsServicesAndSendsDescriptors) {
  std::string list = Reflect(channel_, "grpc.reflection.v1.ServerReflection",
                             std::string("\x3a\x01*", 3));
  EXPECT_TRUE(absl::StrContains(list, "kerncap.v1.KerncapControl"));
  EXPECT_TRUE(absl::StrContains(list, "grpc.reflection.v1.ServerReflection"));
  EXPECT_TRUE(absl::StrContains(list, "grpc.health.v1.Health"));
  // file_containing_symbol (field 4): control.proto and the manifest it imports.
  const std::string symbol = "kerncap.v1.KerncapControl";
  std::string files = Reflect(channel_, "grpc.reflection.v1.ServerReflection",
                              std::string("\x22") + static_cast<char>(symbol.size()) + symbol);
  EXPECT_TRUE(absl::StrContains(files, "kerncap/v1/control.proto"));
  EXPECT_TRUE(absl::StrContains(files, "kerncap/v1/manifest.proto"));
  EXPECT_TRUE(absl::StrContains(files, "GetStatus"));
  // An unknown symbol: an error_response (field 7), not a broken stream.
  const std::string missing = "kerncap.v1.Nope";
  std::string err = Reflect(channel_, "grpc.reflection.v1.ServerReflection",
                            std::string("\x22") + static_cast<char>(missing.size()) + missing);
  EXPECT_TRUE(absl::StrContains(err, "symbol not found"));
}

TEST_F(HealthReflectionTest, HealthCheckReportsServing) {
  grpc::GenericStub stub(channel_);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  // grpc.health.v1.HealthCheckRequest{service: ""} is the empty message.
  auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", FromString(""), &cq);
  ASSERT_NE(call, nullptr);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  int tag = 1;
  call->Finish(&response, &status, &tag);
  ASSERT_TRUE(Await(cq, &tag));
  ASSERT_TRUE(status.ok()) << status.error_message();
  // HealthCheckResponse{status: SERVING(1)} encodes as field 1, varint 1.
  EXPECT_EQ(ToString(response), std::string("\x08\x01", 2));
}

TEST_F(HealthReflectionTest, ReflectionListsTheControlService) {
  grpc::GenericStub stub(channel_);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto call = stub.PrepareCall(
      &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  ASSERT_NE(call, nullptr);
  int start = 1, write = 2, done = 3, read = 4, finish = 5;
  call->StartCall(&start);
  ASSERT_TRUE(Await(cq, &start));
  // ServerReflectionRequest{list_services: "*"}: field 7, length-delimited.
  call->Write(FromString(std::string("\x3a\x01*", 3)), &write);
  ASSERT_TRUE(Await(cq, &write));
  call->WritesDone(&done);
  ASSERT_TRUE(Await(cq, &done));
  grpc::ByteBuffer response;
  call->Read(&response, &read);
  ASSERT_TRUE(Await(cq, &read));
  EXPECT_TRUE(absl::StrContains(ToString(response), "kerncap.v1.KerncapControl"));
  grpc::ByteBuffer extra;
  call->Read(&extra, &read);
  Await(cq, &read);  // end of stream
  grpc::Status status;
  call->Finish(&status, &finish);
  ASSERT_TRUE(Await(cq, &finish));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

}  // namespace
}  // namespace kerncap::testing
