// The agent must export only its entry points: anything else could clash with
// (or be interposed by) the application's own libraries, e.g. a protobuf or
// Abseil bundled by PyTorch. Checked with nm on the built library.
#include <cstdio>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace {

std::string RunCommand(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::set<std::string> Symbols(const std::string& nm_flags) {
  std::set<std::string> names;
  std::istringstream in(RunCommand("nm -D " + nm_flags + " '" + std::string(KERNCAP_AGENT_SO) + "'"));
  std::string line;
  while (std::getline(in, line)) {
    auto sp = line.find_last_of(' ');
    names.insert(sp == std::string::npos ? line : line.substr(sp + 1));
  }
  return names;
}

TEST(AgentExportsTest, OnlyEntryPointsAreExported) {
  if (RunCommand("command -v nm").empty()) GTEST_SKIP() << "nm (binutils) not installed";
  std::set<std::string> defined = Symbols("--defined-only");
  ASSERT_FALSE(defined.empty()) << "nm found no symbols in " << KERNCAP_AGENT_SO;
  EXPECT_TRUE(defined.count("InitializeInjection"));
  EXPECT_TRUE(defined.count("kerncap_agent_active"));
  for (const std::string& s : defined) {
    bool allowed = s == "InitializeInjection" || s.rfind("kerncap_agent_", 0) == 0 ||
                   s.rfind("KERNCAP_", 0) == 0 /* version node, if any */;
    EXPECT_TRUE(allowed) << "unexpected exported symbol: " << s;
  }
}

TEST(AgentExportsTest, NoAbseilProtobufOrGrpcDependencies) {
  if (RunCommand("command -v nm").empty()) GTEST_SKIP() << "nm (binutils) not installed";
  for (const std::string& s : Symbols("--undefined-only")) {
    EXPECT_EQ(s.find("absl"), std::string::npos) << s;
    EXPECT_EQ(s.find("protobuf"), std::string::npos) << s;
    EXPECT_EQ(s.find("grpc"), std::string::npos) << s;
  }
  std::string needed = RunCommand("objdump -p '" + std::string(KERNCAP_AGENT_SO) + "' | grep NEEDED");
  EXPECT_EQ(needed.find("absl"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("protobuf"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("grpc"), std::string::npos) << needed;
  // Both are loaded at run time (driver_api.h, cupti_api.h): the library
  // loads on hosts without a driver.
  EXPECT_EQ(needed.find("libcupti"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("libcuda"), std::string::npos) << needed;
}

}  // namespace
