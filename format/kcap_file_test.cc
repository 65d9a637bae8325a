#include "format/kcap_file.h"

#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "common/digest.h"
#include "common/file_util.h"
#include "gtest/gtest.h"

namespace kerncap::kcap {
namespace {

class KcapFileTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "/kcap_test_" + std::to_string(::getpid()) + "_" +
           testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/cap.kcap";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::vector<v1::TransferFrame> Frames() {
    std::vector<v1::TransferFrame> frames(3);
    frames[0].mutable_manifest()->set_capture_id("cap-abc");
    frames[0].set_chunks_total(2);
    frames[0].set_bytes_total(8);
    for (int i = 1; i <= 2; ++i) {
      std::string raw(4, static_cast<char>('a' + i));
      auto* c = frames[i].mutable_chunk();
      c->set_digest(Sha256(raw).ToBytes());
      c->set_codec(v1::CODEC_RAW);
      c->set_raw_size(4);
      c->set_data(raw);
    }
    return frames;
  }

  void WriteGood() {
    auto w = KcapWriter::Create(path_);
    ASSERT_TRUE(w.ok()) << w.status();
    for (const auto& f : Frames()) ASSERT_TRUE((*w)->Append(f).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }

  absl::Status ReadAll(std::vector<v1::TransferFrame>* out) {
    auto r = KcapReader::Open(path_);
    if (!r.ok()) return r.status();
    while (true) {
      v1::TransferFrame f;
      auto more = (*r)->Next(&f);
      if (!more.ok()) return more.status();
      if (!*more) return absl::OkStatus();
      out->push_back(f);
    }
  }

  std::string Contents() { return *ReadFile(path_); }
  void Overwrite(const std::string& data) { ASSERT_TRUE(WriteFileAtomic(path_, data).ok()); }

  std::string dir_;
  std::string path_;
};

TEST_F(KcapFileTest, RoundTrip) {
  WriteGood();
  std::vector<v1::TransferFrame> got;
  ASSERT_TRUE(ReadAll(&got).ok());
  auto want = Frames();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].SerializeAsString(), want[i].SerializeAsString()) << i;
  }
  EXPECT_EQ(Contents().substr(0, 8), std::string(kKcapMagic, 8));
}

TEST_F(KcapFileTest, NothingVisibleUntilFinish) {
  {
    auto w = KcapWriter::Create(path_);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Append(Frames()[0]).ok());
    EXPECT_FALSE(std::filesystem::exists(path_));
  }  // destroyed unfinished
  EXPECT_FALSE(std::filesystem::exists(path_));
  EXPECT_TRUE(std::filesystem::is_empty(dir_)) << "temp file left behind";
}

TEST_F(KcapFileTest, TruncatedFileIsDataLoss) {
  WriteGood();
  std::string full = Contents();
  // Cut inside the trailer, inside a payload, and right after the last record.
  for (size_t cut : {full.size() - 1, full.size() - 25, full.size() - kKcapTrailerBytes}) {
    Overwrite(full.substr(0, cut));
    std::vector<v1::TransferFrame> got;
    absl::Status s = ReadAll(&got);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << cut << ": " << s;
    EXPECT_NE(s.message().find("truncated"), absl::string_view::npos) << s;
  }
}

// A record length is checked against the file before a buffer of that size
// exists (the fuzzer made the reader allocate 256 MiB for a 60-byte file).
TEST_F(KcapFileTest, ARecordLongerThanTheFileIsRefusedBeforeAllocating) {
  WriteGood();
  std::string bytes = Contents();
  const uint32_t huge = 200u << 20;
  std::memcpy(bytes.data() + kKcapHeaderBytes, &huge, 4);  // the first record's length
  Overwrite(bytes);
  std::vector<v1::TransferFrame> got;
  absl::Status s = ReadAll(&got);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("record 1 claims 209715200 bytes"), absl::string_view::npos) << s;
}

TEST_F(KcapFileTest, FlippedPayloadByteIsDataLoss) {
  WriteGood();
  std::string data = Contents();
  data[data.size() - kKcapTrailerBytes - 2] ^= 0x40;  // inside the last chunk's bytes
  Overwrite(data);
  std::vector<v1::TransferFrame> got;
  absl::Status s = ReadAll(&got);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("checksum"), absl::string_view::npos) << s;
}

TEST_F(KcapFileTest, BadMagicAndTrailingGarbage) {
  WriteGood();
  std::string good = Contents();
  Overwrite("GARBAGE!" + good.substr(8));
  EXPECT_EQ(KcapReader::Open(path_).status().code(), absl::StatusCode::kDataLoss);
  Overwrite(good + "x");
  std::vector<v1::TransferFrame> got;
  EXPECT_EQ(ReadAll(&got).code(), absl::StatusCode::kDataLoss);
  Overwrite("short");
  EXPECT_EQ(KcapReader::Open(path_).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(KcapFileTest, FirstRecordMustBeManifest) {
  auto w = KcapWriter::Create(path_);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append(Frames()[1]).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  std::vector<v1::TransferFrame> got;
  absl::Status s = ReadAll(&got);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("manifest"), absl::string_view::npos) << s;
}

TEST_F(KcapFileTest, MissingFileIsNotFound) {
  EXPECT_EQ(KcapReader::Open(dir_ + "/none.kcap").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace kerncap::kcap
