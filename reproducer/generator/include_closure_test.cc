#include "reproducer/generator/include_closure.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace kerncap::repro {
namespace {

namespace fs = std::filesystem;

TEST(IncludeClosureTest, ParseMakeDeps) {
  EXPECT_EQ(ParseMakeDeps("k.o : src/k.cu \\\n    include/a.h \\\n  /usr/include/x.h\n"),
            (std::vector<std::string>{"src/k.cu", "include/a.h", "/usr/include/x.h"}));
  EXPECT_EQ(ParseMakeDeps("k.o: a\\ b.h c.h\n\nc.h:\n"),
            (std::vector<std::string>{"a b.h", "c.h"}));
  EXPECT_TRUE(ParseMakeDeps("").empty());
}

TEST(IncludeClosureTest, ScanFollowsQuotedAndAngledIncludesUnderRoot) {
  std::string t = (fs::temp_directory_path() / "kc-ic-XXXXXX").string();
  const std::string root = ::mkdtemp(t.data());
  fs::create_directories(root + "/src");
  fs::create_directories(root + "/inc/sub");
  std::ofstream(root + "/src/k.cu")
      << "#include <stdio.h>\n#include \"a.h\"\n  # include <sub/b.h>\n";
  std::ofstream(root + "/inc/a.h") << "#include \"sub/b.h\"\n";
  std::ofstream(root + "/inc/sub/b.h") << "#include \"a.h\"\n#include \"missing.h\"\n";
  std::ofstream(root + "/inc/unused.h") << "\n";
  auto files = ScanIncludes({root + "/src/k.cu"}, {root + "/inc"}, root);
  EXPECT_EQ(files, (std::vector<std::string>{root + "/src/k.cu", root + "/inc/a.h",
                                             root + "/inc/sub/b.h"}));
  fs::remove_all(root);
}

}  // namespace
}  // namespace kerncap::repro
