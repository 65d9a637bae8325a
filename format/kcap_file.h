// kcap_file.h: the `.kcap` file, one capture exported from a kerncapd store
// (`kerncapctl export`) and importable into any other (`kerncapctl import`).
// It is exactly the ExportCapture/ImportCapture stream of TransferFrame
// messages, framed and checksummed so that a truncated or damaged file is
// detected before anything reaches the daemon's store.
//
// Byte format (all integers little-endian):
//
//   file    := header record+ trailer
//   header  := magic[8] version:u32 reserved:u32
//              magic   = 89 'K' 'C' 'A' 'P' 0D 0A 1A  (PNG-style: the high byte
//                        and CR LF / ^Z catch 7-bit and newline-mangling copies)
//              version = 1, reserved = 0
//   record  := length:u32 checksum:u64 payload[length]
//              1 <= length <= kMaxKcapRecordBytes
//              payload  = one serialized kerncap.v1.TransferFrame
//              checksum = XXH3-64 of payload
//   trailer := 00 00 00 00 record_count:u64 end_magic[8]
//              (a zero length marks the trailer; a serialized TransferFrame
//              is never empty in a valid file)
//              record_count = number of records, end_magic = "KCAP-END"
//
// The first record carries the manifest (and chunks_total); every other
// record carries one chunk. Chunk bytes are as stored (zstd or raw); their
// SHA-256 is checked again by the importing store. Nothing may follow the
// trailer. Writers write a temp file next to the target and rename it into
// place only after the trailer is written and fsynced.
#ifndef KERNCAP_FORMAT_KCAP_FILE_H_
#define KERNCAP_FORMAT_KCAP_FILE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerncap/v1/control.pb.h"

namespace kerncap::kcap {

inline constexpr char kKcapMagic[8] = {'\x89', 'K', 'C', 'A', 'P', '\r', '\n', '\x1a'};
inline constexpr char kKcapEndMagic[8] = {'K', 'C', 'A', 'P', '-', 'E', 'N', 'D'};
inline constexpr uint32_t kKcapVersion = 1;
inline constexpr size_t kKcapHeaderBytes = 16;
inline constexpr size_t kKcapRecordHeaderBytes = 12;
inline constexpr size_t kKcapTrailerBytes = 20;
// One frame holds at most one chunk (<= 4 MiB) or one manifest; 256 MiB is far
// above both and keeps a corrupt length from asking for gigabytes.
inline constexpr uint32_t kMaxKcapRecordBytes = 256u << 20;

// Writes a .kcap file. Nothing is visible at `path` until Finish() succeeds;
// destroying an unfinished writer removes its temp file.
class KcapWriter {
 public:
  static absl::StatusOr<std::unique_ptr<KcapWriter>> Create(const std::string& path);
  ~KcapWriter();

  absl::Status Append(const v1::TransferFrame& frame);
  // Appends one record whose payload is an already serialized TransferFrame
  // (1..kMaxKcapRecordBytes bytes), written as given: for relaying frames
  // without re-encoding them, and for tests of readers that must accept any
  // valid encoding (e.g. fields in a non-canonical order).
  absl::Status AppendSerialized(absl::string_view payload);
  // Writes the trailer, fsyncs, renames the temp file over `path`, fsyncs the
  // directory.
  absl::Status Finish();

  uint64_t bytes_written() const { return bytes_written_; }

 private:
  KcapWriter(std::string path, std::string tmp_path, int fd)
      : path_(std::move(path)), tmp_path_(std::move(tmp_path)), fd_(fd) {}

  std::string path_;
  std::string tmp_path_;
  int fd_;
  uint64_t records_ = 0;
  uint64_t bytes_written_ = 0;
  bool finished_ = false;
};

// Reads a .kcap file record by record. Every error is DataLoss (or NotFound /
// PermissionDenied from open) with a message naming the file and the offset.
class KcapReader {
 public:
  static absl::StatusOr<std::unique_ptr<KcapReader>> Open(const std::string& path);
  ~KcapReader();

  // Reads the next frame into *frame. Returns false after the trailer (having
  // checked the record count and that nothing follows it).
  absl::StatusOr<bool> Next(v1::TransferFrame* frame);

  // Where a record is, as NextRecord finds it.
  struct RecordInfo {
    uint64_t offset = 0;    // of the record's length field
    uint32_t length = 0;    // payload bytes; the payload starts 12 bytes after `offset`
    uint64_t checksum = 0;  // XXH3-64 the payload must have (not yet checked)
    uint64_t payload_offset() const { return offset + kKcapRecordHeaderBytes; }
  };
  // Index scan: reads the next record's header and the first
  // min(length, max_prefix) bytes of its payload into *prefix, and skips the
  // rest of the payload without reading it. Nothing of the payload is
  // verified: whoever reads it later must check it against info->checksum.
  // The file's structure is checked as by Next() (lengths within the file,
  // trailer, record count, nothing after the trailer); the record's type is
  // not. Returns false after the trailer. May be mixed with Next().
  absl::StatusOr<bool> NextRecord(RecordInfo* info, size_t max_prefix, std::string* prefix);

  uint64_t file_size() const { return file_size_; }
  uint64_t offset() const { return offset_; }

 private:
  KcapReader(std::string path, std::FILE* file, uint64_t size)
      : path_(std::move(path)), file_(file), file_size_(size) {}
  absl::Status Read(void* out, size_t size, const char* what);
  absl::Status Skip(uint64_t size, const char* what);
  // Reads a record's length and checksum, or the trailer (then false).
  absl::StatusOr<bool> ReadRecordHeader(RecordInfo* info);
  absl::Status Corrupt(const std::string& what) const;

  std::string path_;
  std::FILE* file_;
  uint64_t file_size_;
  uint64_t offset_ = 0;
  uint64_t records_ = 0;
  bool done_ = false;
  std::string buffer_;
};

}  // namespace kerncap::kcap

#endif  // KERNCAP_FORMAT_KCAP_FILE_H_
