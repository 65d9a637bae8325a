#include "common/agent_link/wire.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "common/agent_link/messages.h"
#include "common/agent_link/ring.h"
#include "gtest/gtest.h"

namespace kerncap::link {
namespace {

struct SocketPair {
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
  UniqueFd a, b;
};

void WriteRaw(int fd, const void* data, size_t size) {
  ASSERT_EQ(::write(fd, data, size), static_cast<ssize_t>(size));
}

std::string Header(uint32_t magic, uint16_t version, uint16_t type, uint32_t json_len,
                   uint32_t fds, uint64_t payload) {
  FrameHeader h;
  h.magic = magic;
  h.version = version;
  h.type = type;
  h.json_length = json_len;
  h.fd_count = fds;
  h.payload_length = payload;
  uint8_t buf[kFrameHeaderSize];
  EncodeFrameHeader(h, buf);
  return std::string(reinterpret_cast<char*>(buf), sizeof(buf));
}

// A peer that reads nothing cannot hold a sender past its deadline, however
// large the frame (SO_SNDTIMEO alone bounds each call, not the frame).
TEST(WireTest, SendFrameWithinGivesUpAtTheDeadline) {
  SocketPair p;
  const std::string payload(8u << 20, 'p');
  const auto t0 = std::chrono::steady_clock::now();
  LinkStatus st = SendFrameWithin(p.a.get(), 200, MessageType::kSubstitute, "{}", payload);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("timed out after 200 ms"), std::string::npos) << st.message();
  EXPECT_GE(took, std::chrono::milliseconds(150));
  EXPECT_LT(took, std::chrono::seconds(3));
  // A frame that fits goes whole, within the deadline.
  SocketPair q;
  ASSERT_TRUE(SendFrameWithin(q.a.get(), 1000, MessageType::kError, "{\"message\":\"x\"}").ok());
  LinkResult<Frame> f = RecvFrame(q.b.get(), FrameLimits());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->type, MessageType::kError);
}

TEST(WireTest, HeaderIsLittleEndianAndDocumented) {
  std::string h = Header(kFrameMagic, 1, 7, 0x01020304, 1, 0x0A0B0C0D0E0F1011ull);
  ASSERT_EQ(h.size(), 24u);
  EXPECT_EQ(h.substr(0, 4), "KCAL");
  EXPECT_EQ(static_cast<uint8_t>(h[4]), 1);
  EXPECT_EQ(static_cast<uint8_t>(h[6]), 7);
  EXPECT_EQ(static_cast<uint8_t>(h[8]), 0x04);
  EXPECT_EQ(static_cast<uint8_t>(h[11]), 0x01);
  EXPECT_EQ(static_cast<uint8_t>(h[12]), 1);
  EXPECT_EQ(static_cast<uint8_t>(h[16]), 0x11);
  EXPECT_EQ(static_cast<uint8_t>(h[23]), 0x0A);
}

TEST(WireTest, MessageRoundTripWithPayload) {
  SocketPair sp;
  CaptureBeginMsg begin;
  begin.token = 42;
  begin.arm_id = "arm-1";
  begin.mangled_name = "_Z6matmulPfS_";
  begin.demangled_name = "matmul(float*, float*)";
  begin.launch.grid = {4, 2, 1};
  begin.launch.attributes["max_threads"] = 1024;
  begin.arguments.push_back({0, 8, ArgumentKind::kPointer, "a", "float*", ""});
  begin.dispatch_index = 3;
  std::string blob("\x01\x00\x02\x00", 4);
  ASSERT_TRUE(SendMessage(sp.a.get(), begin, blob).ok());

  bool eof = true;
  LinkResult<Frame> frame = RecvFrame(sp.b.get(), FrameLimits(), &eof);
  ASSERT_TRUE(frame.ok()) << frame.error();
  EXPECT_FALSE(eof);
  EXPECT_EQ(frame->type, MessageType::kCaptureBegin);
  EXPECT_EQ(frame->payload, blob);
  CaptureBeginMsg got;
  ASSERT_TRUE(DecodeBody(*frame, &got).ok());
  EXPECT_EQ(got.token, 42u);
  EXPECT_EQ(got.demangled_name, begin.demangled_name);
  EXPECT_EQ(got.launch.grid, begin.launch.grid);
  EXPECT_EQ(got.launch.attributes.at("max_threads"), 1024);
  ASSERT_EQ(got.arguments.size(), 1u);
  EXPECT_EQ(got.arguments[0].type_name, "float*");
  EXPECT_EQ(got.arguments[0].kind, ArgumentKind::kPointer);
  EXPECT_EQ(got.dispatch_index, 3u);
}

TEST(WireTest, FeatureMessagesRoundTripAndOldBodiesDecode) {
  SocketPair sp;
  DispatchSkippedMsg skipped;
  skipped.arm_id = "arm-9";
  skipped.dispatch_index = 7;
  skipped.kernel = "gemm";
  skipped.reason = "stream capture";
  skipped.retried = true;
  ASSERT_TRUE(SendMessage(sp.a.get(), skipped).ok());
  RingGrantMsg grant;
  grant.slot_size = 64ull << 20;
  grant.slot_count = 1024;
  ASSERT_TRUE(SendMessage(sp.a.get(), grant).ok());

  LinkResult<Frame> f1 = RecvFrame(sp.b.get(), FrameLimits());
  ASSERT_TRUE(f1.ok()) << f1.error();
  EXPECT_EQ(f1->type, MessageType::kDispatchSkipped);
  EXPECT_STREQ(MessageTypeName(f1->type), "DispatchSkipped");
  DispatchSkippedMsg got;
  ASSERT_TRUE(DecodeBody(*f1, &got).ok());
  EXPECT_EQ(got.arm_id, "arm-9");
  EXPECT_EQ(got.dispatch_index, 7u);
  EXPECT_TRUE(got.retried);
  LinkResult<Frame> f2 = RecvFrame(sp.b.get(), FrameLimits());
  ASSERT_TRUE(f2.ok()) << f2.error();
  RingGrantMsg g;
  ASSERT_TRUE(DecodeBody(*f2, &g).ok());
  EXPECT_EQ(g.slot_count, 1024u);
  EXPECT_EQ(RingLayout({g.slot_size, g.slot_count}).bytes(), 64ull << 30);

  // A Hello/Welcome from before features existed decodes with none.
  Frame old;
  old.type = MessageType::kWelcome;
  old.json = R"({"agent_id": "agt-1", "slot_size": 4096, "slot_count": 2})";
  WelcomeMsg w;
  ASSERT_TRUE(DecodeBody(old, &w).ok());
  EXPECT_TRUE(w.features.empty());
  EXPECT_FALSE(HasFeature(w.features, kFeatureLazyRing));
  w.features.push_back(kFeatureLazyRing);
  EXPECT_TRUE(HasFeature(w.features, kFeatureLazyRing));
}

TEST(WireTest, DecodeWrongTypeOrBadJsonFails) {
  Frame f;
  f.type = MessageType::kSlotFree;
  f.json = R"({"slot": "not a number"})";
  SlotFreeMsg m;
  EXPECT_FALSE(DecodeBody(f, &m).ok());
  f.json = "{not json";
  EXPECT_FALSE(DecodeBody(f, &m).ok());
  f.json = "[1,2]";
  EXPECT_FALSE(DecodeBody(f, &m).ok());
  f.json = R"({"slot": 3, "future_field": true})";
  ASSERT_TRUE(DecodeBody(f, &m).ok());
  EXPECT_EQ(m.slot, 3u);
  HelloMsg hello;
  EXPECT_FALSE(DecodeBody(f, &hello).ok());  // wrong type
}

// nlohmann's own conversion cast a float into an integer field (undefined
// behaviour out of the field's range: UBSan "1e+300 is outside the range of
// representable values of type 'unsigned int'") and wrapped integers that do
// not fit; each is a decode error naming the field now.
TEST(WireTest, AnIntegerFieldTakesOnlyAnIntegerThatFits) {
  Frame f;
  f.type = MessageType::kSlotFree;
  SlotFreeMsg m;
  for (const char* body : {R"({"slot": 1e300})", R"({"slot": 2.0})", R"({"slot": -1})",
                           R"({"slot": 4294967296})", R"({"slot": true})", R"({"slot": null})"}) {
    f.json = body;
    LinkStatus st = DecodeBody(f, &m);
    ASSERT_FALSE(st.ok()) << body;
    EXPECT_NE(st.message().find("field 'slot'"), std::string::npos) << st.message();
  }
  f.json = R"({"slot": 4294967295})";
  ASSERT_TRUE(DecodeBody(f, &m).ok());
  EXPECT_EQ(m.slot, 4294967295u);
  // Nested: an array element of a struct field, a map value, a signed field.
  Frame begin;
  begin.type = MessageType::kCaptureBegin;
  CaptureBeginMsg cb;
  begin.json = R"({"token": 1, "launch": {"grid": [1, 1.5e20, 1]}})";
  LinkStatus st = DecodeBody(begin, &cb);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("field 'grid'"), std::string::npos) << st.message();
  begin.json = R"({"token": 1, "launch": {"attributes": {"a": 0.5}}})";
  EXPECT_FALSE(DecodeBody(begin, &cb).ok());
  begin.json = R"({"token": 1, "launch": {"grid": [2, 3, 4], "attributes": {"a": -7}}})";
  ASSERT_TRUE(DecodeBody(begin, &cb).ok());
  EXPECT_EQ(cb.launch.grid[1], 3u);
  EXPECT_EQ(cb.launch.attributes.at("a"), -7);
  // Double fields take any number.
  Frame report;
  report.type = MessageType::kSubstitutionReport;
  report.json = R"({"launch_rate_hz": 12, "variant": {"mean_us": 1e300}})";
  SubstitutionReportMsg r;
  ASSERT_TRUE(DecodeBody(report, &r).ok());
  EXPECT_EQ(r.launch_rate_hz, 12.0);
}

TEST(WireTest, InvalidUtf8IsReplacedNotFatal) {
  HelloMsg hello;
  hello.cmdline = {std::string("bad\xff\xfe", 5)};
  std::string body = EncodeBody(hello);
  EXPECT_FALSE(body.empty());
}

TEST(WireTest, EofAtFrameBoundaryIsClean) {
  SocketPair sp;
  sp.a.reset();
  bool eof = false;
  LinkResult<Frame> frame = RecvFrame(sp.b.get(), FrameLimits(), &eof);
  EXPECT_FALSE(frame.ok());
  EXPECT_TRUE(eof);
}

TEST(WireTest, TruncatedHeaderAndBodyAreErrors) {
  {
    SocketPair sp;
    std::string h = Header(kFrameMagic, 1, 8, 10, 0, 0);
    WriteRaw(sp.a.get(), h.data(), 10);
    sp.a.reset();
    bool eof = true;
    LinkResult<Frame> frame = RecvFrame(sp.b.get(), FrameLimits(), &eof);
    EXPECT_FALSE(frame.ok());
    EXPECT_FALSE(eof);
    EXPECT_NE(frame.error().find("truncated"), std::string::npos);
  }
  {
    SocketPair sp;
    std::string h = Header(kFrameMagic, 1, 8, 10, 0, 100) + R"({"slot":1})" + "short";
    WriteRaw(sp.a.get(), h.data(), h.size());
    sp.a.reset();
    LinkResult<Frame> frame = RecvFrame(sp.b.get(), FrameLimits());
    EXPECT_FALSE(frame.ok());
    EXPECT_NE(frame.error().find("payload"), std::string::npos);
  }
}

TEST(WireTest, BadMagicVersionTypeAndOversizeAreRejected) {
  FrameLimits limits;
  limits.max_json = 1024;
  limits.max_payload = 4096;
  struct Case {
    std::string header;
    const char* expect;
  } cases[] = {
      {Header(0xDEADBEEF, 1, 1, 2, 0, 0), "magic"},
      {Header(kFrameMagic, 9, 1, 2, 0, 0), "version"},
      {Header(kFrameMagic, 1, 0, 2, 0, 0), "type"},
      {Header(kFrameMagic, 1, 99, 2, 0, 0), "type"},
      {Header(kFrameMagic, 1, 1, 0, 0, 0), "json length"},
      {Header(kFrameMagic, 1, 1, 0xFFFFFFFF, 0, 0), "json length"},
      {Header(kFrameMagic, 1, 9, 2, 0, ~0ull), "payload length"},
      // Only CaptureBegin and CodeObject frames carry payloads.
      {Header(kFrameMagic, 1, 1, 2, 0, 1), "Hello frames carry no payload"},
      {Header(kFrameMagic, 1, 7, 2, 0, 4096), "SlotFilled frames carry no payload"},
      {Header(kFrameMagic, 1, 1, 2, 100, 0), "fd count"},
      // Fingerprint frames are bounded before their payload is read.
      {Header(kFrameMagic, 1, 27, 2, 0, kMaxFingerprintsPerFrame * 16 + 16),
       "ChunksKnown with more than"},
  };
  for (const Case& c : cases) {
    SocketPair sp;
    WriteRaw(sp.a.get(), c.header.data(), c.header.size());
    LinkResult<Frame> frame = RecvFrame(sp.b.get(), limits);
    ASSERT_FALSE(frame.ok()) << c.expect;
    EXPECT_NE(frame.error().find(c.expect), std::string::npos) << frame.error();
  }
}

TEST(WireTest, FingerprintFramesCarryTheirPayload) {
  SocketPair sp;
  ChunksKnownMsg m;
  m.token = 3;
  m.chunk_count = 2;
  ASSERT_TRUE(SendMessage(sp.a.get(), m, std::string(32, 'f')).ok());
  LinkResult<Frame> frame = RecvFrame(sp.b.get(), FrameLimits());
  ASSERT_TRUE(frame.ok()) << frame.error();
  EXPECT_EQ(frame->type, MessageType::kChunksKnown);
  EXPECT_EQ(frame->payload, std::string(32, 'f'));
}

TEST(WireTest, FileDescriptorRidesWithFrame) {
  SocketPair sp;
  int pipefd[2];
  ASSERT_EQ(::pipe2(pipefd, O_CLOEXEC), 0);
  UniqueFd r(pipefd[0]), w(pipefd[1]);
  WelcomeMsg welcome;
  welcome.agent_id = "agt-1";
  int fd = w.get();
  ASSERT_TRUE(SendMessage(sp.a.get(), welcome, {}, &fd, 1).ok());
  LinkResult<Frame> frame = RecvFrame(sp.b.get(), FrameLimits());
  ASSERT_TRUE(frame.ok()) << frame.error();
  ASSERT_EQ(frame->fds.size(), 1u);
  EXPECT_NE(frame->fds[0].get(), w.get());
  EXPECT_EQ(::fcntl(frame->fds[0].get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  ASSERT_EQ(::write(frame->fds[0].get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(r.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
}

TEST(WireTest, DeclaredFdsMissingIsAnError) {
  SocketPair sp;
  std::string h = Header(kFrameMagic, 1, 2, 2, 1, 0) + "{}";
  WriteRaw(sp.a.get(), h.data(), h.size());
  LinkResult<Frame> frame = RecvFrame(sp.b.get(), FrameLimits());
  ASSERT_FALSE(frame.ok());
  EXPECT_NE(frame.error().find("fds"), std::string::npos);
}

TEST(WireTest, SendToClosedPeerFailsWithoutSigpipe) {
  SocketPair sp;
  sp.b.reset();
  SlotFreeMsg m;
  EXPECT_FALSE(SendMessage(sp.a.get(), m).ok());
}

TEST(WireTest, ConnectToMissingSocketFails) {
  LinkResult<UniqueFd> fd = ConnectUnix("/tmp/kerncap-does-not-exist/agent.sock");
  EXPECT_FALSE(fd.ok());
  EXPECT_FALSE(ConnectUnix(std::string(200, 'x')).ok());
}

}  // namespace
}  // namespace kerncap::link
