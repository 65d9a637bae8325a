// The HSA tool library exports exactly its entry points: nothing of LLVM,
// the agent core or the C++ runtime that could clash with the application.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace {

TEST(HsaAgentExportsTest, OnlyEntryPoints) {
  std::string cmd = std::string("nm -D --defined-only ") + KERNCAP_HSA_AGENT_SO;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof(line), p) != nullptr) {
    std::string s(line);
    std::string name = s.substr(s.rfind(' ') + 1);
    name.erase(name.find_last_not_of("\n") + 1);
    bool ok = name == "OnLoad" || name == "OnUnload" || name == "HSA_AMD_TOOL_PRIORITY" ||
              name.rfind("kerncap_agent_", 0) == 0;
    EXPECT_TRUE(ok) << "unexpected export: " << name;
    ++n;
  }
  pclose(p);
  EXPECT_GE(n, 4);
}

TEST(HsaAgentExportsTest, LoadsAndResolves) {
  void* h = dlopen(KERNCAP_HSA_AGENT_SO, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  EXPECT_NE(dlsym(h, "OnLoad"), nullptr);
  EXPECT_NE(dlsym(h, "OnUnload"), nullptr);
  auto* prio = static_cast<const uint32_t*>(dlsym(h, "HSA_AMD_TOOL_PRIORITY"));
  ASSERT_NE(prio, nullptr);
  EXPECT_GT(*prio, 0u);
  // No LLVM symbol is visible.
  EXPECT_EQ(dlsym(h, "_ZN4llvm7msgpack8Document12readFromBlobENS_9StringRefEbNS_12function_refIFiPNS0_7DocNodeES5_S5_EEE"), nullptr);
  dlclose(h);
}

}  // namespace
