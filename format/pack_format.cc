#include "format/pack_format.h"

#include <cstring>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"

namespace kerncap::store {
namespace {

// Fixed-width little-endian fields (Abseil's endian helpers do the byte order).
void PutU32(std::string* out, uint32_t v) {
  char b[4];
  absl::little_endian::Store32(b, v);
  out->append(b, 4);
}
void PutU64(std::string* out, uint64_t v) {
  char b[8];
  absl::little_endian::Store64(b, v);
  out->append(b, 8);
}
uint32_t GetU32(const char* p) { return absl::little_endian::Load32(p); }
uint64_t GetU64(const char* p) { return absl::little_endian::Load64(p); }

}  // namespace

std::string EncodePackTrailer(const std::vector<PackEntry>& entries) {
  std::string out;
  out.reserve(PackTrailerSize(entries.size()));
  for (const PackEntry& e : entries) {
    out.append(reinterpret_cast<const char*>(e.digest.bytes.data()), Digest::kSize);
    PutU64(&out, e.offset);
    PutU32(&out, e.stored_len);
    PutU32(&out, e.raw_len);
    out.push_back(static_cast<char>(e.codec));
    out.append(7, '\0');
    PutU64(&out, e.xxh3);
  }
  const uint64_t entries_len = out.size();
  const uint64_t entries_xxh3 = Xxh3(out.data(), out.size());
  PutU32(&out, kPackVersion);
  PutU32(&out, static_cast<uint32_t>(entries.size()));
  PutU64(&out, entries_xxh3);
  PutU64(&out, entries_len);
  out.append(kPackMagic, 8);
  return out;
}

absl::StatusOr<uint64_t> DecodePackTail(absl::string_view tail, uint64_t file_size,
                                        absl::string_view what) {
  if (file_size < kPackTailSize || tail.size() != kPackTailSize) {
    return absl::DataLossError(
        absl::StrCat(what, ": too short for a pack trailer (", file_size, " bytes)"));
  }
  if (std::memcmp(tail.data() + 24, kPackMagic, 8) != 0) {
    return absl::DataLossError(absl::StrCat(what, ": no pack trailer magic (torn or truncated)"));
  }
  const uint32_t version = GetU32(tail.data());
  if (version != kPackVersion) {
    return absl::DataLossError(absl::StrCat(what, ": unknown pack version ", version));
  }
  const uint32_t count = GetU32(tail.data() + 4);
  const uint64_t entries_len = GetU64(tail.data() + 16);
  if (entries_len != static_cast<uint64_t>(count) * kPackEntrySize ||
      entries_len > file_size - kPackTailSize) {
    return absl::DataLossError(absl::StrCat(what, ": inconsistent trailer (", count, " entries, ",
                                            entries_len, " bytes)"));
  }
  return entries_len;
}

absl::StatusOr<std::vector<PackEntry>> DecodePackEntries(absl::string_view tail,
                                                         absl::string_view entries,
                                                         uint64_t file_size,
                                                         absl::string_view what) {
  auto len = DecodePackTail(tail, file_size, what);
  if (!len.ok()) return len.status();
  if (entries.size() != *len) {
    return absl::DataLossError(absl::StrCat(what, ": short entry table"));
  }
  if (Xxh3(entries.data(), entries.size()) != GetU64(tail.data() + 8)) {
    return absl::DataLossError(absl::StrCat(what, ": entry table checksum mismatch"));
  }
  const uint64_t blob_end = file_size - kPackTailSize - *len;
  std::vector<PackEntry> out(entries.size() / kPackEntrySize);
  for (size_t i = 0; i < out.size(); ++i) {
    const char* p = entries.data() + i * kPackEntrySize;
    PackEntry& e = out[i];
    std::memcpy(e.digest.bytes.data(), p, Digest::kSize);
    e.offset = GetU64(p + 32);
    e.stored_len = GetU32(p + 40);
    e.raw_len = GetU32(p + 44);
    e.codec = static_cast<uint8_t>(p[48]);
    e.xxh3 = GetU64(p + 56);
    if (e.offset > blob_end || e.stored_len > blob_end - e.offset ||
        (e.codec != kCodecRaw && e.codec != kCodecZstd)) {
      return absl::DataLossError(
          absl::StrCat(what, ": entry ", i, " (chunk ", e.digest.ToHex(), ") is out of range"));
    }
  }
  return out;
}

}  // namespace kerncap::store
