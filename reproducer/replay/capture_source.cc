#include "reproducer/replay/capture_source.h"

#include <fcntl.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/kerncapctl/kcap_file.h"
#include "common/digest.h"
#include "common/errno_status.h"
#include "common/status_macros.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap::replay {
namespace {

const std::string& EmptyDigest() {
  static const std::string* empty = new std::string();
  return *empty;
}

absl::Status PreadAll(int fd, void* buf, size_t size, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(buf);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, absl::StrCat("pread ", path));
    }
    if (n == 0) return absl::DataLossError(absl::StrCat(path, ": truncated at byte ", offset));
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

uint64_t GetU64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CaptureSource>> CaptureSource::OpenKcap(const std::string& path,
                                                                     bool unlink_after_open) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<kcap::KcapReader> reader, kcap::KcapReader::Open(path));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", path));
  std::unique_ptr<CaptureSource> src(new CaptureSource(path, fd));
  if (unlink_after_open) ::unlink(path.c_str());
  v1::TransferFrame frame;
  bool first = true;
  while (true) {
    const uint64_t offset = reader->offset();
    KC_ASSIGN_OR_RETURN(bool more, reader->Next(&frame));
    if (!more) break;
    if (first) {
      if (!frame.has_manifest()) {
        return absl::DataLossError(absl::StrCat(path, ": first record is not a manifest"));
      }
      src->manifest_ = frame.manifest();
      first = false;
      continue;
    }
    if (!frame.has_chunk()) {
      return absl::DataLossError(absl::StrCat(path, ": record at byte ", offset, " is not a chunk"));
    }
    src->index_.emplace(frame.chunk().digest(), Entry{offset});
  }
  return src;
}

CaptureSource::~CaptureSource() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status CaptureSource::ReadChunk(const std::string& digest, uint32_t raw_size,
                                      std::string* out) const {
  out->resize(raw_size);
  return ReadChunkInto(digest, raw_size, out->data());
}

absl::Status CaptureSource::ReadChunkInto(const std::string& digest, uint32_t raw_size,
                                          char* out) const {
  if (digest.empty()) {
    std::memset(out, 0, raw_size);
    return absl::OkStatus();
  }
  auto it = index_.find(digest);
  if (it == index_.end()) {
    std::string hex = digest.size() == Digest::kSize
                          ? Digest::FromBytes(digest).value_or(Digest{}).ToHex()
                          : "(malformed digest)";
    return absl::NotFoundError(absl::StrCat(path_, ": chunk ", hex, " is not in the file"));
  }
  unsigned char head[kcap::kKcapRecordHeaderBytes];
  KC_RETURN_IF_ERROR(PreadAll(fd_, head, sizeof(head), it->second.offset, path_));
  uint32_t length;
  std::memcpy(&length, head, 4);
  if (length == 0 || length > kcap::kMaxKcapRecordBytes) {
    return absl::DataLossError(absl::StrCat(path_, ": bad record length at byte ", it->second.offset));
  }
  std::string payload(length, '\0');
  KC_RETURN_IF_ERROR(
      PreadAll(fd_, payload.data(), length, it->second.offset + sizeof(head), path_));
  if (Xxh3(payload.data(), payload.size()) != GetU64(head + 4)) {
    return absl::DataLossError(
        absl::StrCat(path_, ": record checksum mismatch at byte ", it->second.offset));
  }
  v1::TransferFrame frame;
  if (!frame.ParseFromString(payload) || !frame.has_chunk()) {
    return absl::DataLossError(absl::StrCat(path_, ": unparsable chunk record at byte ",
                                            it->second.offset));
  }
  payload.clear();
  payload.shrink_to_fit();
  const v1::TransferChunk& c = frame.chunk();
  if (c.raw_size() != raw_size) {
    return absl::DataLossError(absl::StrFormat("%s: chunk at byte %u has %u raw bytes, expected %u",
                                               path_, it->second.offset, c.raw_size(), raw_size));
  }
  if (c.codec() == v1::CODEC_ZSTD) {
    // One decompression context per thread (ZSTD_decompress would make one per call).
    thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(),
                                                                         &ZSTD_freeDCtx);
    if (dctx == nullptr) return absl::ResourceExhaustedError("ZSTD_createDCtx failed");
    size_t n = ZSTD_decompressDCtx(dctx.get(), out, raw_size, c.data().data(), c.data().size());
    if (ZSTD_isError(n) || n != raw_size) {
      return absl::DataLossError(absl::StrCat(path_, ": zstd decode of chunk at byte ",
                                              it->second.offset, " failed: ",
                                              ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short"));
    }
  } else if (c.codec() == v1::CODEC_RAW || c.codec() == v1::CODEC_UNSPECIFIED) {
    if (c.data().size() != raw_size) {
      return absl::DataLossError(absl::StrCat(path_, ": raw chunk size mismatch"));
    }
    std::memcpy(out, c.data().data(), raw_size);
  } else {
    return absl::DataLossError(absl::StrCat(path_, ": unknown codec ", c.codec()));
  }
  if (Sha256(out, raw_size).ToBytes() != digest) {
    return absl::DataLossError(absl::StrCat(path_, ": chunk at byte ", it->second.offset,
                                            " does not match its SHA-256 address"));
  }
  return absl::OkStatus();
}

uint64_t ChunkCount(const v1::ChunkList& list) {
  if (list.chunk_size() == 0) return 0;
  return (list.size() + list.chunk_size() - 1) / list.chunk_size();
}

uint64_t ChunkOffset(const v1::ChunkList& list, uint64_t i) {
  return i * static_cast<uint64_t>(list.chunk_size());
}

uint32_t ChunkLength(const v1::ChunkList& list, uint64_t i) {
  const uint64_t off = ChunkOffset(list, i);
  return static_cast<uint32_t>(std::min<uint64_t>(list.chunk_size(), list.size() - off));
}

absl::Status CheckRegion(const v1::Region& region, absl::string_view where) {
  const v1::ChunkList& d = region.data();
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s region at va 0x%x: %s", where, region.va(), what));
  };
  if (d.size() > 0 && d.chunk_size() == 0) return bad("chunk_size is 0");
  const uint64_t n = ChunkCount(d);
  for (const std::string& dig : d.chunk_digests()) {
    if (!dig.empty() && dig.size() != Digest::kSize) return bad("malformed chunk digest");
  }
  if (region.diff()) {
    if (static_cast<uint64_t>(region.changed_chunks_size()) != static_cast<uint64_t>(d.chunk_digests_size())) {
      return bad("changed_chunks and chunk_digests differ in length");
    }
    for (int i = 0; i < region.changed_chunks_size(); ++i) {
      if (region.changed_chunks(i) >= n) return bad("changed chunk index out of range");
      if (i > 0 && region.changed_chunks(i) <= region.changed_chunks(i - 1)) {
        return bad("changed_chunks not increasing");
      }
    }
  } else if (static_cast<uint64_t>(d.chunk_digests_size()) != n) {
    return bad(absl::StrCat(d.chunk_digests_size(), " chunk digests for ", n, " chunks"));
  }
  return absl::OkStatus();
}

const std::string& PostDigest(const v1::Region& pre, const v1::Region* post, uint64_t i) {
  if (post != nullptr) {
    if (!post->diff()) {
      return i < static_cast<uint64_t>(post->data().chunk_digests_size())
                 ? post->data().chunk_digests(static_cast<int>(i))
                 : EmptyDigest();
    }
    const auto& cc = post->changed_chunks();
    auto it = std::lower_bound(cc.begin(), cc.end(), static_cast<uint32_t>(i));
    if (it != cc.end() && *it == i) {
      return post->data().chunk_digests(static_cast<int>(it - cc.begin()));
    }
  }
  return i < static_cast<uint64_t>(pre.data().chunk_digests_size())
             ? pre.data().chunk_digests(static_cast<int>(i))
             : EmptyDigest();
}

const char* RegionKindName(v1::RegionKind kind) {
  switch (kind) {
    case v1::REGION_DEVICE: return "device";
    case v1::REGION_DEVICE_VMM: return "vmm";
    case v1::REGION_MANAGED: return "managed";
    case v1::REGION_HOST_PINNED: return "host_pinned";
    case v1::REGION_MODULE_GLOBAL: return "module_global";
    case v1::REGION_CONSTANT: return "constant";
    case v1::REGION_KERNARG: return "kernarg";
    default: return "unspecified";
  }
}

}  // namespace kerncap::replay
