#include "reproducer/generator/compile_db.h"

#include "gtest/gtest.h"
#include "reproducer/generator/source_locator.h"

namespace kerncap::repro {
namespace {

TEST(SplitCommandLineTest, ShellWords) {
  auto w = SplitCommandLine(R"(nvcc -DX="a b" -I'/p q' \"lit\" -DY=\"s\"  k.cu)");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(
      *w, (std::vector<std::string>{"nvcc", "-DX=a b", "-I/p q", "\"lit\"", "-DY=\"s\"", "k.cu"}));
  EXPECT_FALSE(SplitCommandLine("nvcc -DX=\"open").ok());
  EXPECT_FALSE(SplitCommandLine("nvcc 'open").ok());
}

TEST(CompileDatabaseTest, ParsesCommandAndArgumentsForms) {
  auto db = ParseCompileDatabase(R"([
    {"directory": "/app/build", "file": "../src/a.cu", "command": "nvcc -O3 -c ../src/a.cu"},
    {"directory": "/app/build", "file": "/app/src/b.hip", "arguments": ["clang++", "-x", "hip"]},
    {"directory": "/app/build", "file": "c.cu"},
    42])",
                                 "/app/build/compile_commands.json");
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_EQ(db->size(), 2u);  // the entry without a command and the number are skipped
  EXPECT_EQ((*db)[0].file, "/app/src/a.cu");
  EXPECT_EQ((*db)[0].argv.size(), 4u);
  EXPECT_EQ((*db)[1].argv[0], "clang++");
  EXPECT_FALSE(ParseCompileDatabase("{}", "x.json").ok());
  EXPECT_FALSE(ParseCompileDatabase("not json", "x.json").ok());
}

TEST(CompileDatabaseTest, RemapsCaptureHostPaths) {
  auto db = ParseCompileDatabase(
      R"([{"directory": "/build/app/b", "file": "../src/k.cu", "command": "nvcc -I/build/app/inc -c ../src/k.cu"}])",
      "/db.json");
  ASSERT_TRUE(db.ok());
  ASSERT_EQ(db->size(), 1u);
  PathRemap remap{"/build/app", "/home/me/app"};
  EXPECT_EQ(remap.Apply((*db)[0].file), "/home/me/app/src/k.cu");
  const CompileCommand* c = &(*db)[0];
  EXPECT_EQ(RemapArgv(c->argv, remap),
            (std::vector<std::string>{"nvcc", "-I/home/me/app/inc", "-c", "../src/k.cu"}));
  EXPECT_EQ(remap.Apply("/build/app"), "/home/me/app");
  EXPECT_EQ(remap.Apply("/build/application/x"), "/build/application/x");
}

}  // namespace
}  // namespace kerncap::repro
