#include "agent/core/jit_metadata_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace kerncap::agent {
namespace {

TEST(JitMetadataRegistry, SetLookupReplace) {
  JitMetadataRegistry r;
  EXPECT_EQ(r.Lookup("add_kernel"), "");
  EXPECT_EQ(r.Set("add_kernel", R"({"num_warps":4})"), JitMetadataRegistry::SetResult::kOk);
  EXPECT_EQ(r.Lookup("add_kernel"), R"({"num_warps":4})");
  EXPECT_EQ(r.Set("add_kernel", R"({"num_warps":8})"), JitMetadataRegistry::SetResult::kOk);
  EXPECT_EQ(r.Lookup("add_kernel"), R"({"num_warps":8})");
  EXPECT_EQ(r.size(), 1u);
}

TEST(JitMetadataRegistry, RefusesEmptyNameAndOversizedJson) {
  JitMetadataRegistry r;
  EXPECT_EQ(r.Set("", "{}"), JitMetadataRegistry::SetResult::kEmptyName);
  EXPECT_EQ(r.Set("k", std::string(JitMetadataRegistry::kMaxJsonBytes + 1, ' ')),
            JitMetadataRegistry::SetResult::kTooLarge);
  EXPECT_EQ(r.size(), 0u);
}

TEST(JitMetadataRegistry, CApiCodes) {
  JitMetadataRegistry r;
  EXPECT_EQ(r.SetFromC(nullptr, "{}"), 1);
  EXPECT_EQ(r.SetFromC("k", nullptr), 1);
  EXPECT_EQ(r.SetFromC("", "{}"), 1);
  EXPECT_EQ(r.SetFromC("k", std::string(JitMetadataRegistry::kMaxJsonBytes + 1, 'x').c_str()), 2);
  EXPECT_EQ(r.SetFromC("k", R"({"a":1})"), 0);
  EXPECT_EQ(r.Lookup("k"), R"({"a":1})");
}

TEST(JitMetadataRegistry, DropsOldestBeyondTheBound) {
  JitMetadataRegistry r;
  const size_t n = JitMetadataRegistry::kMaxEntries + 10;
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(r.Set("k" + std::to_string(i), "{}"), JitMetadataRegistry::SetResult::kOk);
  EXPECT_EQ(r.size(), JitMetadataRegistry::kMaxEntries);
  EXPECT_EQ(r.Lookup("k0"), "");
  EXPECT_EQ(r.Lookup("k9"), "");
  EXPECT_EQ(r.Lookup("k10"), "{}");
  EXPECT_EQ(r.Lookup("k" + std::to_string(n - 1)), "{}");
}

TEST(JitMetadataRegistry, AReplacedEntryIsNotDroppedByItsStalePosition) {
  JitMetadataRegistry r;
  ASSERT_EQ(r.Set("hot", "old"), JitMetadataRegistry::SetResult::kOk);
  for (size_t i = 0; i + 1 < JitMetadataRegistry::kMaxEntries; ++i) {
    ASSERT_EQ(r.Set("k" + std::to_string(i), "{}"), JitMetadataRegistry::SetResult::kOk);
  }
  ASSERT_EQ(r.Set("hot", "new"), JitMetadataRegistry::SetResult::kOk);  // refreshed
  ASSERT_EQ(r.Set("one-more", "{}"), JitMetadataRegistry::SetResult::kOk);
  EXPECT_EQ(r.Lookup("hot"), "new");
  EXPECT_EQ(r.Lookup("k0"), "");  // the oldest live one went instead
}

TEST(JitMetadataRegistry, ConcurrentWritersAndReaders) {
  JitMetadataRegistry r;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&r, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::string name = "k" + std::to_string(i % 50);
        ASSERT_EQ(r.Set(name, std::to_string(t)), JitMetadataRegistry::SetResult::kOk);
        const std::string got = r.Lookup(name);
        ASSERT_FALSE(got.empty());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(r.size(), 50u);
}

}  // namespace
}  // namespace kerncap::agent
