#include "format/pack_format.h"

#include "gtest/gtest.h"

namespace kerncap::store {
namespace {

std::vector<PackEntry> SampleEntries() {
  std::vector<PackEntry> entries(3);
  for (int i = 0; i < 3; ++i) {
    entries[i].digest = Sha256(std::string(1, static_cast<char>('a' + i)));
    entries[i].offset = static_cast<uint64_t>(i) * 100;
    entries[i].stored_len = 100;
    entries[i].raw_len = 4096;
    entries[i].codec = i % 2 ? kCodecZstd : kCodecRaw;
    entries[i].xxh3 = 0x1234 + i;
  }
  return entries;
}

absl::StatusOr<std::vector<PackEntry>> Decode(const std::string& file) {
  absl::string_view f(file);
  absl::string_view tail = f.substr(f.size() - kPackTailSize);
  auto len = DecodePackTail(tail, f.size(), "pack p");
  if (!len.ok()) return len.status();
  return DecodePackEntries(tail, f.substr(f.size() - kPackTailSize - *len, *len), f.size(),
                           "pack p");
}

TEST(PackFormatTest, TrailerRoundTrips) {
  auto entries = SampleEntries();
  std::string file(300, 'x');
  file += EncodePackTrailer(entries);
  EXPECT_EQ(file.size(), 300 + PackTrailerSize(3));
  EXPECT_EQ(file.substr(file.size() - 8), "KCPACK01");
  auto decoded = Decode(file);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*decoded)[i].digest, entries[i].digest);
    EXPECT_EQ((*decoded)[i].offset, entries[i].offset);
    EXPECT_EQ((*decoded)[i].codec, entries[i].codec);
    EXPECT_EQ((*decoded)[i].xxh3, entries[i].xxh3);
    EXPECT_EQ((*decoded)[i].raw_len, 4096u);
  }
}

TEST(PackFormatTest, EmptyPackIsValid) {
  auto decoded = Decode(EncodePackTrailer({}));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->empty());
}

TEST(PackFormatTest, FlippedEntryByteIsDataLoss) {
  std::string file(300, 'x');
  file += EncodePackTrailer(SampleEntries());
  file[310] ^= 1;  // inside the first entry
  auto decoded = Decode(file);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(decoded.status().message().find("checksum"), std::string::npos);
}

TEST(PackFormatTest, TruncatedPackHasNoMagic) {
  std::string file(300, 'x');
  file += EncodePackTrailer(SampleEntries());
  file.resize(file.size() - 5);
  auto decoded = Decode(file);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
}

TEST(PackFormatTest, BlobOutOfRangeIsDataLoss) {
  auto entries = SampleEntries();
  entries[2].offset = 1000;  // past the blob area of a 300-byte body
  std::string file(300, 'x');
  file += EncodePackTrailer(entries);
  auto decoded = Decode(file);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(decoded.status().message().find("out of range"), std::string::npos);
}

}  // namespace
}  // namespace kerncap::store
