#include "common/file_util.h"

#include <dirent.h>
#include <stdlib.h>

#include <string>

#include "gtest/gtest.h"

namespace kerncap {
namespace {

std::string MakeTempDir() {
  char tmpl[] = "/tmp/kc_file_util_XXXXXX";
  return mkdtemp(tmpl);
}

int CountEntries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++n;
  }
  closedir(d);
  return n;
}

TEST(FileUtilTest, WriteFileAtomicReplacesAndLeavesNoTemp) {
  std::string dir = MakeTempDir();
  std::string path = dir + "/ref";
  ASSERT_TRUE(WriteFileAtomic(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "two").ok());
  auto data = ReadFile(path);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, "two");
  EXPECT_EQ(CountEntries(dir), 1);
}

TEST(FileUtilTest, WriteIntoMissingDirFailsWithNotFound) {
  auto st = WriteFileAtomic("/nonexistent-kerncap-dir/x", "data");
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
}

TEST(FileUtilTest, MakeDirsCreatesParents) {
  std::string dir = MakeTempDir() + "/a/b/c";
  ASSERT_TRUE(MakeDirs(dir).ok());
  EXPECT_TRUE(WriteFileAtomic(dir + "/f", "x").ok());
}

TEST(FileUtilTest, SafePathComponent) {
  EXPECT_TRUE(IsSafePathComponent("cap-1234"));
  EXPECT_FALSE(IsSafePathComponent(".."));
  EXPECT_FALSE(IsSafePathComponent("a/b"));
  EXPECT_FALSE(IsSafePathComponent(""));
  EXPECT_FALSE(IsSafePathComponent(std::string(300, 'a')));
}

}  // namespace
}  // namespace kerncap
