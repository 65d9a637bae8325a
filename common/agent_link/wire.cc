#include "common/agent_link/wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include <algorithm>
#include <chrono>

namespace kerncap::link {
namespace {

void PutLe(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t GetLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

std::string ErrnoMessage(const char* what, int err) {
  return std::string(what) + ": " + strerror(err);
}

// Reads exactly `size` bytes (no descriptors expected here).
LinkStatus ReadExact(int sock, char* data, size_t size, const char* what) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::recv(sock, data + done, size - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0) {
      return LinkStatus::Error(std::string("truncated frame: eof inside ") + what);
    } else if (errno != EINTR) {
      return LinkStatus::Error(ErrnoMessage(what, errno));
    }
  }
  return LinkStatus::Ok();
}

}  // namespace

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kHello: return "Hello";
    case MessageType::kWelcome: return "Welcome";
    case MessageType::kArm: return "Arm";
    case MessageType::kDisarm: return "Disarm";
    case MessageType::kCaptureBegin: return "CaptureBegin";
    case MessageType::kRegionBegin: return "RegionBegin";
    case MessageType::kSlotFilled: return "SlotFilled";
    case MessageType::kSlotFree: return "SlotFree";
    case MessageType::kCodeObject: return "CodeObject";
    case MessageType::kCaptureEnd: return "CaptureEnd";
    case MessageType::kCaptureAbort: return "CaptureAbort";
    case MessageType::kCaptureResult: return "CaptureResult";
    case MessageType::kError: return "Error";
    case MessageType::kRingRequest: return "RingRequest";
    case MessageType::kRingGrant: return "RingGrant";
    case MessageType::kDispatchSkipped: return "DispatchSkipped";
    case MessageType::kRingRevoke: return "RingRevoke";
    case MessageType::kRingRelease: return "RingRelease";
    case MessageType::kKernelsRequest: return "KernelsRequest";
    case MessageType::kKernelsReport: return "KernelsReport";
    case MessageType::kChunksUnchanged: return "ChunksUnchanged";
    case MessageType::kSubstitute: return "Substitute";
    case MessageType::kUnsubstitute: return "Unsubstitute";
    case MessageType::kSubstitutionReport: return "SubstitutionReport";
    case MessageType::kKnownChunksQuery: return "KnownChunksQuery";
    case MessageType::kKnownChunksAnswer: return "KnownChunksAnswer";
    case MessageType::kChunksKnown: return "ChunksKnown";
    case MessageType::kChunkFingerprints: return "ChunkFingerprints";
    case MessageType::kSampleStart: return "SampleStart";
    case MessageType::kSampleStop: return "SampleStop";
    case MessageType::kSampleReport: return "SampleReport";
  }
  return "Unknown";
}

void EncodeFrameHeader(const FrameHeader& h, uint8_t out[kFrameHeaderSize]) {
  PutLe(out + 0, h.magic, 4);
  PutLe(out + 4, h.version, 2);
  PutLe(out + 6, h.type, 2);
  PutLe(out + 8, h.json_length, 4);
  PutLe(out + 12, h.fd_count, 4);
  PutLe(out + 16, h.payload_length, 8);
}

LinkStatus DecodeFrameHeader(const uint8_t in[kFrameHeaderSize], const FrameLimits& limits,
                             FrameHeader* h) {
  h->magic = static_cast<uint32_t>(GetLe(in + 0, 4));
  h->version = static_cast<uint16_t>(GetLe(in + 4, 2));
  h->type = static_cast<uint16_t>(GetLe(in + 6, 2));
  h->json_length = static_cast<uint32_t>(GetLe(in + 8, 4));
  h->fd_count = static_cast<uint32_t>(GetLe(in + 12, 4));
  h->payload_length = GetLe(in + 16, 8);
  if (h->magic != kFrameMagic) return LinkStatus::Error("bad frame magic");
  if (h->version != kProtocolVersion) {
    return LinkStatus::Error("unsupported protocol version " + std::to_string(h->version));
  }
  if (h->type == 0 || h->type > kMaxMessageType) {
    return LinkStatus::Error("unknown message type " + std::to_string(h->type));
  }
  if (h->json_length == 0 || h->json_length > limits.max_json) {
    return LinkStatus::Error("json length " + std::to_string(h->json_length) +
                             " outside [1, " + std::to_string(limits.max_json) + "]");
  }
  const MessageType type = static_cast<MessageType>(h->type);
  const bool fingerprints =
      type == MessageType::kKnownChunksQuery || type == MessageType::kKnownChunksAnswer ||
      type == MessageType::kChunksKnown || type == MessageType::kChunkFingerprints;
  if (h->payload_length > 0 && type != MessageType::kCaptureBegin &&
      type != MessageType::kCodeObject && type != MessageType::kSubstitute && !fingerprints) {
    return LinkStatus::Error(std::string(MessageTypeName(type)) + " frames carry no payload (" +
                             std::to_string(h->payload_length) + " bytes declared)");
  }
  // Refused before a byte of it is read (the receiver buffers payloads).
  if (fingerprints && h->payload_length > kMaxFingerprintsPerFrame * 16) {
    return LinkStatus::Error(std::string(MessageTypeName(type)) + " with more than " +
                             std::to_string(kMaxFingerprintsPerFrame) + " fingerprints (" +
                             std::to_string(h->payload_length) + " bytes declared)");
  }
  if (h->payload_length > limits.max_payload) {
    return LinkStatus::Error("payload length " + std::to_string(h->payload_length) +
                             " exceeds " + std::to_string(limits.max_payload));
  }
  if (h->fd_count > kMaxFdsPerFrame) {
    return LinkStatus::Error("fd count " + std::to_string(h->fd_count) + " exceeds " +
                             std::to_string(kMaxFdsPerFrame));
  }
  return LinkStatus::Ok();
}

namespace {

// SendFrame and SendFrameWithin: timeout_ms < 0 sends blocking (SO_SNDTIMEO
// bounds each call); otherwise the whole frame must leave within it.
LinkStatus SendFrameImpl(int sock, int timeout_ms, MessageType type, std::string_view json,
                         std::string_view payload, const int* fds, size_t fd_count) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      timeout_ms < 0 ? Clock::time_point::max()
                     : Clock::now() + std::chrono::milliseconds(timeout_ms);
  const int send_flags = MSG_NOSIGNAL | (timeout_ms < 0 ? 0 : MSG_DONTWAIT);
  if (fd_count > kMaxFdsPerFrame) return LinkStatus::Error("too many fds for one frame");
  FrameHeader h;
  h.type = static_cast<uint16_t>(type);
  h.json_length = static_cast<uint32_t>(json.size());
  h.fd_count = static_cast<uint32_t>(fd_count);
  h.payload_length = payload.size();
  uint8_t header[kFrameHeaderSize];
  EncodeFrameHeader(h, header);

  iovec iov[3];
  iov[0] = {header, kFrameHeaderSize};
  iov[1] = {const_cast<char*>(json.data()), json.size()};
  iov[2] = {const_cast<char*>(payload.data()), payload.size()};
  int iov_index = 0;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerFrame)];
  bool fds_pending = fd_count > 0;

  while (iov_index < 3) {
    if (iov[iov_index].iov_len == 0) {
      ++iov_index;
      continue;
    }
    msghdr msg{};
    msg.msg_iov = &iov[iov_index];
    msg.msg_iovlen = static_cast<size_t>(3 - iov_index);
    if (fds_pending) {
      memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fd_count);
      cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int) * fd_count);
      memcpy(CMSG_DATA(cm), fds, sizeof(int) * fd_count);
    }
    ssize_t n = ::sendmsg(sock, &msg, send_flags);
    if (n < 0) {
      if (errno == EINTR) continue;
      if ((errno == EAGAIN || errno == EWOULDBLOCK) && timeout_ms >= 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                              deadline - Clock::now()).count();
        if (left > 0) {
          pollfd p{sock, POLLOUT, 0};
          int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
          if (r > 0 || (r < 0 && errno == EINTR)) continue;
          if (r < 0) return LinkStatus::Error(ErrnoMessage("poll", errno));
        }
        return LinkStatus::Error("send timed out after " + std::to_string(timeout_ms) +
                                 " ms: peer is not reading");
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return LinkStatus::Error("send timed out: peer is not reading");
      }
      return LinkStatus::Error(ErrnoMessage("sendmsg", errno));
    }
    fds_pending = false;  // ancillary data went with the first byte sent
    size_t left = static_cast<size_t>(n);
    while (left > 0 && iov_index < 3) {
      size_t take = std::min(left, iov[iov_index].iov_len);
      iov[iov_index].iov_base = static_cast<char*>(iov[iov_index].iov_base) + take;
      iov[iov_index].iov_len -= take;
      left -= take;
      if (iov[iov_index].iov_len == 0) ++iov_index;
    }
  }
  return LinkStatus::Ok();
}

}  // namespace

LinkStatus SendFrame(int sock, MessageType type, std::string_view json,
                     std::string_view payload, const int* fds, size_t fd_count) {
  return SendFrameImpl(sock, -1, type, json, payload, fds, fd_count);
}

LinkStatus SendFrameWithin(int sock, int timeout_ms, MessageType type, std::string_view json,
                           std::string_view payload, const int* fds, size_t fd_count) {
  return SendFrameImpl(sock, std::max(timeout_ms, 0), type, json, payload, fds, fd_count);
}

LinkResult<Frame> RecvFrame(int sock, const FrameLimits& limits, bool* clean_eof) {
  if (clean_eof != nullptr) *clean_eof = false;
  Frame frame;
  uint8_t header[kFrameHeaderSize];
  size_t got = 0;
  bool ctrunc = false;
  while (got < kFrameHeaderSize) {
    iovec iov{header + got, kFrameHeaderSize - got};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerFrame)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      return LinkStatus::Error(ErrnoMessage("recvmsg", errno));
    }
    // Take ownership of descriptors first so that every error path closes them.
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
        size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int fd;
          memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
          frame.fds.emplace_back(fd);
        }
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) ctrunc = true;
    if (n == 0) {
      if (got == 0) {
        if (clean_eof != nullptr) *clean_eof = true;
        return LinkStatus::Error("connection closed by peer");
      }
      return LinkStatus::Error("truncated frame: eof inside header");
    }
    got += static_cast<size_t>(n);
  }
  if (ctrunc) return LinkStatus::Error("too many file descriptors attached to frame");
  FrameHeader h;
  LinkStatus status = DecodeFrameHeader(header, limits, &h);
  if (!status.ok()) return status;
  if (frame.fds.size() != h.fd_count) {
    return LinkStatus::Error("frame declares " + std::to_string(h.fd_count) +
                             " fds but carries " + std::to_string(frame.fds.size()));
  }
  frame.type = static_cast<MessageType>(h.type);
  frame.json.resize(h.json_length);
  status = ReadExact(sock, frame.json.data(), h.json_length, "json body");
  if (!status.ok()) return status;
  // Grow the payload as bytes arrive so that a lying length cannot make the
  // receiver allocate memory the sender never sends.
  constexpr uint64_t kStep = 4ull << 20;
  while (frame.payload.size() < h.payload_length) {
    size_t before = frame.payload.size();
    size_t step = static_cast<size_t>(std::min<uint64_t>(kStep, h.payload_length - before));
    frame.payload.resize(before + step);
    status = ReadExact(sock, frame.payload.data() + before, step, "payload");
    if (!status.ok()) return status;
  }
  return frame;
}

LinkResult<UniqueFd> ConnectUnix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return LinkStatus::Error("socket path empty or too long: " + path);
  }
  memcpy(addr.sun_path, path.data(), path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return LinkStatus::Error(ErrnoMessage("socket", errno));
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return LinkStatus::Error(ErrnoMessage(("connect " + path).c_str(), errno));
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return LinkStatus::Error(ErrnoMessage("fcntl", errno));
  }
  return fd;
}

LinkStatus SetSendTimeout(int sock, int timeout_ms) {
  timeval tv{};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (timeout_ms % 1000) * 1000;
  if (::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return LinkStatus::Error(ErrnoMessage("setsockopt(SO_SNDTIMEO)", errno));
  }
  return LinkStatus::Ok();
}

}  // namespace kerncap::link
