#include "reproducer/replay/core/capture_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "common/control/api_names.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "format/kcap_file.h"
#include "common/digest.h"
#include "common/errno_status.h"
#include "common/status_macros.h"
#include "format/store_reader.h"
#include "format/chunk_read.h"
#include "format/manifest_check.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap::replay {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

// Bytes of each chunk payload read at open. A canonical chunk record
// (TransferFrame{chunk: {digest, codec, raw_size, data}}, data last) has
// everything but the data in its first ~52 bytes: frame tag + length (<= 5),
// digest (34), codec (2), raw_size (<= 6), data tag + length (<= 5).
constexpr size_t kIndexPrefixBytes = 64;

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

// ---- index: the layout of a chunk record, from the protobuf wire format ----

// What the index needs of a chunk record. Offsets are in the payload.
struct ChunkLayout {
  std::string digest;
  int codec = 0;
  uint32_t raw_size = 0;
  uint64_t data_offset = 0;
  uint64_t data_length = 0;
};

enum class WalkResult {
  kComplete,          // every field is known
  kNeedWholePayload,  // only a prefix was given and it is not enough
  kMalformed,         // not a valid TransferFrame encoding
  kNotAChunk,         // a valid TransferFrame that carries no chunk
};

// Walks a serialized TransferFrame with the semantics of the protobuf parser
// (fields in any order, the last occurrence of a singular field wins, a
// repeated `chunk` field merges into one message, `manifest` after `chunk`
// replaces it in the oneof, unknown fields are skipped), without copying the
// `data` bytes. `bytes` may be only the first part of a payload of
// `payload_size` bytes: the walk then completes when `data` is the last field
// (its end is the payload's end, so nothing can follow it) and otherwise asks
// for the whole payload.
class ChunkFrameWalker {
 public:
  ChunkFrameWalker(absl::string_view bytes, uint64_t payload_size)
      : in_(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int>(bytes.size())),
        available_(bytes.size()),
        payload_size_(payload_size) {}

  WalkResult Walk(ChunkLayout* out) {
    out_ = out;
    bool in_chunk = false;
    while (Pos() < payload_size_) {
      uint32_t tag;
      if (!ReadTag(&tag)) return Failed();
      const int field = WireFormatLite::GetTagFieldNumber(tag);
      const bool is_message =
          WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
      if (field == 2 && is_message) {  // TransferFrame.chunk
        if (!in_chunk) *out_ = ChunkLayout{};
        in_chunk = true;
        uint64_t length;
        if (!in_.ReadVarint64(&length)) return Failed();
        if (length > payload_size_ - Pos()) return WalkResult::kMalformed;
        const WalkResult r = WalkChunk(Pos() + length);
        if (r != WalkResult::kComplete) return r;
        if (data_is_last_) return WalkResult::kComplete;
      } else {
        if (field == 1 && is_message) in_chunk = false;  // TransferFrame.manifest
        if (!WireFormatLite::SkipField(&in_, tag)) return Failed();
      }
    }
    return in_chunk ? WalkResult::kComplete : WalkResult::kNotAChunk;
  }

 private:
  uint64_t Pos() const { return static_cast<uint64_t>(in_.CurrentPosition()); }
  bool Partial() const { return available_ < payload_size_; }
  // A read failed: the prefix ran out, or (whole payload) the encoding is bad.
  WalkResult Failed() const {
    return Partial() ? WalkResult::kNeedWholePayload : WalkResult::kMalformed;
  }
  bool ReadTag(uint32_t* tag) {
    *tag = in_.ReadTag();
    return *tag != 0;
  }

  // The fields of one TransferChunk occurrence ending at payload byte `end`.
  WalkResult WalkChunk(uint64_t end) {
    while (Pos() < end) {
      uint32_t tag;
      if (!ReadTag(&tag)) return Failed();
      const WireFormatLite::WireType type = WireFormatLite::GetTagWireType(tag);
      const int field = WireFormatLite::GetTagFieldNumber(tag);
      bool ok = true;
      if (field == 1 && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {  // digest
        uint64_t length;
        ok = in_.ReadVarint64(&length) && length <= end - Pos() &&
             in_.ReadString(&out_->digest, static_cast<int>(length));
      } else if (field == 2 && type == WireFormatLite::WIRETYPE_VARINT) {  // codec (int32 enum)
        uint64_t v;
        ok = in_.ReadVarint64(&v);
        out_->codec = static_cast<int>(static_cast<int32_t>(v));
      } else if (field == 3 && type == WireFormatLite::WIRETYPE_VARINT) {  // raw_size (uint32)
        uint64_t v;
        ok = in_.ReadVarint64(&v);
        out_->raw_size = static_cast<uint32_t>(v);
      } else if (field == 4 && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {  // data
        const WalkResult r = WalkData(end);
        if (r != WalkResult::kComplete || data_is_last_) return r;
      } else {
        ok = WireFormatLite::SkipField(&in_, tag);
      }
      if (!ok) return Failed();
      if (Pos() > end) return WalkResult::kMalformed;  // a field ran past the message
    }
    return WalkResult::kComplete;
  }

  // TransferChunk.data: note where it is and step over it.
  WalkResult WalkData(uint64_t chunk_end) {
    uint64_t length;
    if (!in_.ReadVarint64(&length)) return Failed();
    if (length > chunk_end - std::min(chunk_end, Pos())) return WalkResult::kMalformed;
    out_->data_offset = Pos();
    out_->data_length = length;
    const uint64_t data_end = Pos() + length;
    if (data_end <= available_) {
      return in_.Skip(static_cast<int>(length)) ? WalkResult::kComplete : Failed();
    }
    // Past the prefix: complete only if nothing can follow the data.
    if (data_end == payload_size_) {
      data_is_last_ = true;
      return WalkResult::kComplete;
    }
    return WalkResult::kNeedWholePayload;
  }

  CodedInputStream in_;
  const uint64_t available_;
  const uint64_t payload_size_;
  ChunkLayout* out_ = nullptr;
  bool data_is_last_ = false;
};

std::string HexOf(const std::string& digest) {
  return digest.size() == Digest::kSize ? Digest::FromBytes(digest).value_or(Digest{}).ToHex()
                                        : "(malformed digest)";
}

}  // namespace

absl::StatusOr<std::unique_ptr<CaptureSource>> CaptureSource::OpenKcap(const std::string& path,
                                                                     bool unlink_after_open) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<kcap::KcapReader> reader, kcap::KcapReader::Open(path));
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", path));
  std::unique_ptr<CaptureSource> src(new CaptureSource(path, fd));
  if (unlink_after_open) ::unlink(path.c_str());
  KC_RETURN_IF_ERROR(src->ReadManifest(*reader));
  KC_RETURN_IF_ERROR(src->IndexChunks(*reader));
  return src;
}

absl::StatusOr<std::unique_ptr<CaptureSource>> CaptureSource::OpenStore(
    const std::string& store_dir, const std::string& capture_id) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<store::StoreReader> reader,
                      store::StoreReader::Open(store_dir));
  KC_ASSIGN_OR_RETURN(std::unique_ptr<store::StoreCapture> capture,
                      reader->OpenCapture(capture_id));
  std::unique_ptr<CaptureSource> src(new CaptureSource(reader->dir(), -1));
  src->origin_ = "store:" + reader->dir();
  src->manifest_ = capture->manifest();
  src->store_ = std::move(capture);
  return src;
}

size_t CaptureSource::chunk_count() const {
  return store_ != nullptr ? store_->chunk_count() : index_.size();
}

// The first record, read whole and checksummed by the reader.
absl::Status CaptureSource::ReadManifest(kcap::KcapReader& reader) {
  v1::TransferFrame frame;
  KC_ASSIGN_OR_RETURN(bool more, reader.Next(&frame));
  if (!more || !frame.has_manifest()) {
    return absl::DataLossError(absl::StrCat(path_, ": first record is not a manifest"));
  }
  manifest_ = std::move(*frame.mutable_manifest());
  // Nothing below may allocate from a number the file chose unchecked.
  if (absl::Status valid = format::ValidateManifest(manifest_); !valid.ok()) {
    return absl::DataLossError(absl::StrCat(path_, ": malformed manifest: ", valid.message()));
  }
  return absl::OkStatus();
}

// Every other record: its header and the first bytes of its payload; the
// reader checks the lengths against the file and the trailer's record count.
absl::Status CaptureSource::IndexChunks(kcap::KcapReader& reader) {
  kcap::KcapReader::RecordInfo record;
  std::string prefix, digest;
  while (true) {
    KC_ASSIGN_OR_RETURN(bool more, reader.NextRecord(&record, kIndexPrefixBytes, &prefix));
    if (!more) return absl::OkStatus();
    KC_ASSIGN_OR_RETURN(Entry e, IndexRecord(record, prefix, &digest));
    index_.emplace(std::move(digest), e);
  }
}

// The index entry of one chunk record. When the prefix does not suffice (a
// field after `data`, or long unknown fields first) the whole payload is
// read, checksummed and walked.
absl::StatusOr<CaptureSource::Entry> CaptureSource::IndexRecord(
    const kcap::KcapReader::RecordInfo& record, const std::string& prefix,
    std::string* digest) const {
  Entry e;
  e.record_offset = record.offset;
  e.checksum = record.checksum;
  e.payload_length = record.length;
  ChunkLayout layout;
  WalkResult r = ChunkFrameWalker(prefix, record.length).Walk(&layout);
  if (r == WalkResult::kNeedWholePayload) {
    std::string payload(record.length, '\0');
    KC_RETURN_IF_ERROR(
        PreadAll(fd_, payload.data(), payload.size(), record.payload_offset(), path_));
    if (Xxh3(payload.data(), payload.size()) != record.checksum) {
      return DataLoss(e, "record checksum mismatch");
    }
    layout = ChunkLayout{};
    r = ChunkFrameWalker(payload, record.length).Walk(&layout);
  }
  switch (r) {
    case WalkResult::kComplete:
      break;
    case WalkResult::kNotAChunk:
      return absl::DataLossError(
          absl::StrCat(path_, ": record at byte ", record.offset, " is not a chunk"));
    default:
      return DataLoss(e, "unparsable chunk record");
  }
  e.data_offset = static_cast<uint32_t>(layout.data_offset);
  e.data_length = static_cast<uint32_t>(layout.data_length);
  e.raw_size = layout.raw_size;
  e.codec = layout.codec;
  *digest = std::move(layout.digest);
  return e;
}

CaptureSource::CaptureSource(std::string path, int fd)
    : path_(std::move(path)), fd_(fd), origin_("kcap:" + path_) {}

CaptureSource::~CaptureSource() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status CaptureSource::DataLoss(const Entry& e, absl::string_view what) const {
  return absl::DataLossError(absl::StrCat(path_, ": ", what, " (chunk record at byte ",
                                          e.record_offset, ")"));
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
  if (store_ != nullptr) {
    KC_ASSIGN_OR_RETURN(Digest d, Digest::FromBytes(digest));
    absl::Status st = store_->ReadChunkInto(d, raw_size, out);
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("store ", path_, ": ", st.message()));
    }
    if (verify_content_digests_ && Sha256(out, raw_size) != d) {
      return absl::DataLossError(absl::StrCat("store ", path_, ": chunk ", d.ToHex(),
                                              " does not match its SHA-256 address"));
    }
    return absl::OkStatus();
  }
  auto it = index_.find(digest);
  if (it == index_.end()) {
    return absl::NotFoundError(
        absl::StrCat(path_, ": chunk ", HexOf(digest), " is not in the file"));
  }
  const Entry& e = it->second;
  if (e.raw_size != raw_size) {
    return DataLoss(e, absl::StrCat("chunk has ", e.raw_size, " raw bytes, expected ", raw_size));
  }
  format::StoredChunkSpan span;
  span.offset = e.record_offset + kcap::kKcapRecordHeaderBytes;
  span.length = e.payload_length;
  span.data_offset = e.data_offset;
  span.data_length = e.data_length;
  span.codec = e.codec;
  span.xxh3 = e.checksum;
  KC_RETURN_IF_ERROR(format::ReadVerifiedChunk(fd_, span, raw_size, out, [&] {
    return absl::StrCat(path_, ": chunk record at byte ", e.record_offset);
  }));
  if (verify_content_digests_ && Sha256(out, raw_size).ToBytes() != digest) {
    return DataLoss(e, "chunk does not match its SHA-256 address");
  }
  return absl::OkStatus();
}

uint64_t ChunkOffset(const v1::ChunkList& list, uint64_t i) {
  return i * static_cast<uint64_t>(list.chunk_size());
}

absl::Status CheckRegion(const v1::Region& region, absl::string_view where) {
  return format::ValidateChunkList(region.data(), &region,
                                   absl::StrFormat("%s region at va 0x%x", where, region.va()));
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
  // The one spelling of every region kind (common/control/api_names.h).
  absl::string_view name = api::Name(kind);
  return name.empty() ? "unspecified" : name.data();
}

}  // namespace kerncap::replay
