// pack_format.h: the byte format of a pack file, the store's unit of chunk
// storage. A pack is written front to back as a stream and closed with a
// self-describing trailer (in the manner of restic's pack header-at-the-end),
// so a writer never seeks and a reader can rebuild the chunk index from the
// packs alone.
//
// Grammar (all integers little-endian):
//
//   pack         := blob{n} entry{n} tail
//   blob         := byte{entry.stored_len}        ; chunk as stored (raw or zstd frame)
//   entry        := digest offset stored_len raw_len codec reserved xxh3     ; 64 bytes
//     digest     := byte[32]                      ; SHA-256 of the chunk's raw bytes
//     offset     := u64                           ; where the blob starts in the file
//     stored_len := u32                           ; bytes of the blob
//     raw_len    := u32                           ; bytes after decoding
//     codec      := u8                            ; 1 = raw, 2 = zstd (ChunkCodec values)
//     reserved   := byte[7]                       ; zero
//     xxh3       := u64                           ; XXH3-64 of the blob's stored bytes
//   tail         := version entry_count entries_xxh3 entries_len magic        ; 32 bytes
//     version    := u32                           ; kPackVersion
//     entry_count:= u32                           ; n
//     entries_xxh3 := u64                         ; XXH3-64 of the n entries' bytes
//     entries_len := u64                          ; n * 64 (checked against entry_count)
//     magic      := "KCPACK01"                    ; last 8 bytes of the file
//
// A pack is valid iff its last 8 bytes are the magic, entries_len equals
// entry_count*64 and fits in the file, the entry bytes hash to entries_xxh3,
// and every blob lies inside [0, file_size - trailer_size). A pack that is
// not valid (torn write, truncation) is quarantined on Open, never read.
#ifndef KERNCAP_FORMAT_PACK_FORMAT_H_
#define KERNCAP_FORMAT_PACK_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/digest.h"

namespace kerncap::store {

inline constexpr uint32_t kPackVersion = 1;
inline constexpr size_t kPackEntrySize = 64;
inline constexpr size_t kPackTailSize = 32;
inline constexpr char kPackMagic[9] = "KCPACK01";

// Codec byte values; identical to v1::ChunkCodec so they convert 1:1.
inline constexpr uint8_t kCodecRaw = 1;
inline constexpr uint8_t kCodecZstd = 2;

struct PackEntry {
  Digest digest;
  uint64_t offset = 0;
  uint32_t stored_len = 0;
  uint32_t raw_len = 0;
  uint8_t codec = kCodecRaw;
  uint64_t xxh3 = 0;
};

// Serializes the entries and tail that close a pack whose blobs are done.
std::string EncodePackTrailer(const std::vector<PackEntry>& entries);

// Size of the trailer the given number of entries produce.
inline uint64_t PackTrailerSize(size_t entries) { return entries * kPackEntrySize + kPackTailSize; }

// Parses and validates the trailer of a pack whose total size is
// `file_size`. `tail` must hold the file's last kPackTailSize bytes; on
// success returns entries_len so the caller can read the entries, which it
// then passes to DecodePackEntries. DataLoss (naming `what`) on any mismatch.
absl::StatusOr<uint64_t> DecodePackTail(absl::string_view tail, uint64_t file_size,
                                        absl::string_view what);
absl::StatusOr<std::vector<PackEntry>> DecodePackEntries(absl::string_view tail,
                                                         absl::string_view entries,
                                                         uint64_t file_size,
                                                         absl::string_view what);

}  // namespace kerncap::store

#endif  // KERNCAP_FORMAT_PACK_FORMAT_H_
