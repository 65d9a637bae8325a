#include "reproducer/generator/project_writer.h"

#include <filesystem>
#include <fstream>

#include "common/file_util.h"
#include "gtest/gtest.h"
#include "reproducer/generator/project_stream.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    std::string t = (fs::temp_directory_path() / "kc-pw-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

size_t Entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(ProjectStageTest, NothingVisibleUntilCommit) {
  TempDir t;
  const std::string out = t.path + "/proj";
  {
    auto s = ProjectStage::Begin(out, false);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->WriteFile("a/b.txt", "x").ok());
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE((*s)->WriteFile("../escape", "x").ok());
    EXPECT_FALSE((*s)->WriteFile("/abs", "x").ok());
  }  // abandoned
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(Entries(t.path), 0u);
  auto s = ProjectStage::Begin(out, false);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->WriteFile("a/b.txt", "x").ok());
  ASSERT_TRUE((*s)->Commit().ok());
  EXPECT_EQ(*ReadFile(out + "/a/b.txt"), "x");
  EXPECT_EQ(Entries(t.path), 1u);
}

TEST(ProjectStageTest, NonEmptyOutNeedsForce) {
  TempDir t;
  const std::string out = t.path + "/proj";
  fs::create_directories(out);
  std::ofstream(out + "/old") << "old";
  auto s = ProjectStage::Begin(out, false);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kAlreadyExists);
  std::ofstream(t.path + "/file") << "f";
  EXPECT_EQ(ProjectStage::Begin(t.path + "/file", true).status().code(),
            absl::StatusCode::kInvalidArgument);
  // --force replaces earlier reproducers only.
  EXPECT_EQ(ProjectStage::Begin(out, true).status().code(), absl::StatusCode::kFailedPrecondition);
  std::ofstream(out + "/kerncap.json") << "{}";
  s = ProjectStage::Begin(out, true);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->WriteFile("new", "n").ok());
  EXPECT_TRUE(fs::exists(out + "/old"));  // still there until the commit
  ASSERT_TRUE((*s)->Commit().ok());
  EXPECT_FALSE(fs::exists(out + "/old"));
  EXPECT_TRUE(fs::exists(out + "/new"));
  EXPECT_EQ(Entries(t.path), 2u);  // proj and file: no leftovers
  // An empty existing folder is fine without force.
  fs::create_directories(t.path + "/empty");
  EXPECT_TRUE(ProjectStage::Begin(t.path + "/empty", false).ok());
}

TEST(ProjectStreamTest, LargeFilesRoundTripInPieces) {
  TempDir t;
  std::string big(10000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  std::ofstream(t.path + "/big", std::ios::binary) << big;
  std::ofstream(t.path + "/empty");
  auto stage = ProjectStage::Begin(t.path + "/copy", false);
  ASSERT_TRUE(stage.ok());
  ProjectReceiver rx(stage->get());
  int frames = 0;
  for (const char* f : {"big", "empty"}) {
    ASSERT_TRUE(StreamProjectFile(
                    t.path, f,
                    [&](const v1::ReproducerFile& fr) {
                      ++frames;
                      return rx.Add(fr).ok();
                    },
                    4096)
                    .ok());
  }
  EXPECT_EQ(frames, 4);  // 3 pieces + 1 empty file
  ASSERT_TRUE(rx.Finish().ok());
  ASSERT_TRUE((*stage)->Commit().ok());
  EXPECT_EQ(*ReadFile(t.path + "/copy/big"), big);
  EXPECT_EQ(rx.paths(), (std::vector<std::string>{"big", "empty"}));
}

TEST(ProjectStreamTest, ReceiverRejectsGapsEscapesAndShortFiles) {
  TempDir t;
  auto stage = ProjectStage::Begin(t.path + "/p", false);
  ASSERT_TRUE(stage.ok());
  ProjectReceiver rx(stage->get());
  v1::ReproducerFile f;
  f.set_path("a");
  f.set_total_size(10);
  f.set_content("12345");
  ASSERT_TRUE(rx.Add(f).ok());
  EXPECT_FALSE(rx.Finish().ok());  // 5 of 10
  f.set_offset(7);                 // gap
  EXPECT_FALSE(rx.Add(f).ok());
  f.set_offset(5);
  f.set_content("123456");  // past total_size
  EXPECT_FALSE(rx.Add(f).ok());
  f.set_content("67890");
  EXPECT_TRUE(rx.Add(f).ok());
  EXPECT_TRUE(rx.Finish().ok());
  v1::ReproducerFile bad;
  bad.set_path("../x");
  EXPECT_FALSE(rx.Add(bad).ok());
}

}  // namespace
}  // namespace kerncap::repro
