// wire.h: framing of the agent link, the Unix stream socket between an
// in-process agent (libkerncap_agent.so) and kerncapd.
//
// Std-only (no Abseil/protobuf): this file is compiled into the agent.
//
// Byte format of one frame (all integers little-endian):
//
//   offset size  field
//   0      4     magic           0x4C41434B, the bytes "KCAL"
//   4      2     version         kProtocolVersion (1)
//   6      2     type            MessageType
//   8      4     json_length     bytes of the JSON body, 1..limits.max_json
//   12     4     fd_count        file descriptors attached (0..kMaxFdsPerFrame)
//   16     8     payload_length  bytes of the binary payload, 0..limits.max_payload
//   24     json_length     JSON object (UTF-8), the message fields (messages.h)
//   ...    payload_length  opaque bytes: the argument blob of a CaptureBegin,
//                          the image of a CodeObject or the variant of a
//                          Substitute; every other type carries none
//                          (payload_length 0)
//
// File descriptors travel as SCM_RIGHTS ancillary data attached to the first
// byte of the frame's header, so a reader gets them with the header. A frame
// whose received descriptor count differs from fd_count is malformed.
//
// Any malformed frame (bad magic or version, oversize lengths, missing or
// extra descriptors, truncation) is a protocol error: the receiver drops the
// connection, because the stream can no longer be re-synchronized.
#ifndef KERNCAP_COMMON_AGENT_LINK_WIRE_H_
#define KERNCAP_COMMON_AGENT_LINK_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/agent_link/result.h"

namespace kerncap::link {

inline constexpr uint32_t kFrameMagic = 0x4C41434Bu;  // "KCAL" in memory order
inline constexpr uint16_t kProtocolVersion = 1;
inline constexpr size_t kFrameHeaderSize = 24;
// The only descriptor the protocol sends is the ring memfd; a few spare slots
// leave room for later (per-device rings) without a version bump.
inline constexpr uint32_t kMaxFdsPerFrame = 4;

enum class MessageType : uint16_t {
  kHello = 1,          // agent -> daemon
  kWelcome = 2,        // daemon -> agent, carries the ring memfd
  kArm = 3,            // daemon -> agent
  kDisarm = 4,         // daemon -> agent
  kCaptureBegin = 5,   // agent -> daemon, payload: kernel argument blob
  kRegionBegin = 6,    // agent -> daemon
  kSlotFilled = 7,     // agent -> daemon
  kSlotFree = 8,       // daemon -> agent
  kCodeObject = 9,     // agent -> daemon, payload: code object image
  kCaptureEnd = 10,    // agent -> daemon
  kCaptureAbort = 11,  // agent -> daemon
  kCaptureResult = 12, // daemon -> agent, exactly one per CaptureBegin
  kError = 13,         // either way, sent just before dropping the link
  // Added after protocol 1 shipped; sent only to a peer that announced the
  // matching feature (HelloMsg/WelcomeMsg.features), so older peers never
  // see them.
  kRingRequest = 14,     // agent -> daemon: create my ring now (lazy rings)
  kRingGrant = 15,       // daemon -> agent, carries the ring memfd (or an error)
  kDispatchSkipped = 16, // agent -> daemon: a selected dispatch was not captured
  kRingRevoke = 17,      // daemon -> agent: give your idle ring back
  kRingRelease = 18,     // agent -> daemon: my ring is unmapped, uncount it
  kKernelsRequest = 19,  // daemon -> agent: which kernels have you loaded?
  kKernelsReport = 20,   // agent -> daemon: the kernels of its loaded code objects
  kChunksUnchanged = 21,     // agent -> daemon: post chunks equal to the pre image's
  kSubstitute = 22,          // daemon -> agent, payload: the variant's code object
  kUnsubstitute = 23,        // daemon -> agent
  kSubstitutionReport = 24,  // agent -> daemon: a substitution's state, counts and timings
  kKnownChunksQuery = 25,    // agent -> daemon, payload: fingerprints; which do you hold?
  kKnownChunksAnswer = 26,   // daemon -> agent, payload: one byte per fingerprint
  kChunksKnown = 27,         // agent -> daemon, payload: fingerprints of chunks not sent
  kChunkFingerprints = 28,   // agent -> daemon, payload: fingerprints of chunks sent as bytes
  kSampleStart = 29,         // daemon -> agent: count your launches from now
  kSampleStop = 30,          // daemon -> agent: stop counting, report
  kSampleReport = 31,        // agent -> daemon: the launches counted while sampling
};
inline constexpr uint16_t kMaxMessageType = 31;
// Fingerprints (16 bytes each, chunk_fingerprint.h) in one KnownChunksQuery,
// KnownChunksAnswer (1 byte each), ChunksKnown or ChunkFingerprints payload.
inline constexpr size_t kMaxFingerprintsPerFrame = 1u << 16;

const char* MessageTypeName(MessageType type);

struct FrameLimits {
  // JSON bodies are small (a Hello with a long cmdline is the largest).
  uint32_t max_json = 1u << 20;
  // Code objects are the largest payload; a fatbin of a big library can be
  // hundreds of MiB. Payloads are read incrementally, so a lying header costs
  // the receiver nothing until the bytes actually arrive.
  uint64_t max_payload = 1ull << 30;
};

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint16_t version = kProtocolVersion;
  uint16_t type = 0;
  uint32_t json_length = 0;
  uint32_t fd_count = 0;
  uint64_t payload_length = 0;
};

void EncodeFrameHeader(const FrameHeader& header, uint8_t out[kFrameHeaderSize]);
// Decodes and validates a header against `limits`.
LinkStatus DecodeFrameHeader(const uint8_t in[kFrameHeaderSize], const FrameLimits& limits,
                             FrameHeader* header);

struct Frame {
  MessageType type = MessageType::kError;
  std::string json;
  std::string payload;
  std::vector<UniqueFd> fds;
};

// Writes one frame to a connected stream socket (MSG_NOSIGNAL: a dead peer is
// an error, never SIGPIPE in the application). Honors SO_SNDTIMEO. Not
// thread-safe per socket: callers serialize senders.
LinkStatus SendFrame(int sock, MessageType type, std::string_view json,
                     std::string_view payload = {}, const int* fds = nullptr,
                     size_t fd_count = 0);

// Like SendFrame, but the whole frame must be written within `timeout_ms`
// (a peer that reads slowly cannot hold the sender longer, whatever the
// payload's size; SO_SNDTIMEO bounds only each call). A frame cut short by
// the deadline leaves the stream unusable: the caller drops the connection.
LinkStatus SendFrameWithin(int sock, int timeout_ms, MessageType type, std::string_view json,
                           std::string_view payload = {}, const int* fds = nullptr,
                           size_t fd_count = 0);

// Reads one frame. On an orderly EOF before the first header byte, returns an
// error and sets *clean_eof (if given) to true.
LinkResult<Frame> RecvFrame(int sock, const FrameLimits& limits, bool* clean_eof = nullptr);

// Connects to a Unix stream socket without blocking on a full backlog
// (EAGAIN is reported as an error: the caller retries later). The returned
// socket is blocking and close-on-exec.
LinkResult<UniqueFd> ConnectUnix(const std::string& path);

// Sets SO_SNDTIMEO so a peer that stops reading cannot block a sender forever.
LinkStatus SetSendTimeout(int sock, int timeout_ms);

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_AGENT_LINK_WIRE_H_
