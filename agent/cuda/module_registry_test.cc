#include "agent/cuda/module_registry.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace kerncap::agent::cuda {
namespace {

// Empty when nvcc was missing at configure time (the tests skip).
std::string TestCubin() {
  std::ifstream f(KERNCAP_TEST_CUBIN, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// An autotuner loads several modules that define the same kernel name; each
// launch must be attributed to its own module's image, whatever the order of
// loads and lookups (the case Triton's autotuner hit: the newest image was
// shipped for every winner).
TEST(ModuleRegistryTest, SameKernelNameInSeveralModulesIsFoundByHandle) {
  const std::string cubin = TestCubin();
  if (cubin.empty()) GTEST_SKIP() << "nvcc was not found at configure time; no test cubin built";
  // Distinct images defining the same kernels: a trailing byte differs.
  const std::string a = cubin + std::string(1, 'a');
  const std::string b = cubin + std::string(1, 'b');
  const std::string c = cubin + std::string(1, 'c');
  ModuleRegistry reg;
  // Module 1 and 2 loaded during their own get-function calls.
  reg.DiscardPending();
  reg.OnModuleLoaded(1, 7, a.data(), a.size());
  reg.AttributePending(0x1000);
  reg.DiscardPending();
  reg.OnModuleLoaded(2, 7, b.data(), b.size());
  reg.AttributePending(0x2000);
  // Module 3 loaded lazily somewhere else (no attribution window).
  reg.OnModuleLoaded(3, 7, c.data(), c.size());
  reg.DiscardPending();  // the next attribution window starts: 3 stays unattributed

  auto r1 = reg.FindForKernel(0x1000, "scale_kernel");
  auto r2 = reg.FindForKernel(0x2000, "scale_kernel");
  ASSERT_NE(r1, nullptr);
  ASSERT_NE(r2, nullptr);
  EXPECT_EQ(r1->module_id, 1u);
  EXPECT_EQ(r2->module_id, 2u);
  // Unknown handle: by name, the newest image.
  auto r3 = reg.FindForKernel(0x3000, "scale_kernel");
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ(r3->module_id, 3u);
  EXPECT_EQ(reg.FindForKernel(0x1000, "no_such_kernel"), nullptr);
}

// Attribution takes what is pending: nothing is left for a later handle.
TEST(ModuleRegistryTest, AttributionLeavesNothingPending) {
  const std::string cubin = TestCubin();
  if (cubin.empty()) GTEST_SKIP() << "nvcc was not found at configure time; no test cubin built";
  const std::string a = cubin + std::string(1, 'a');
  const std::string b = cubin + std::string(1, 'b');
  ModuleRegistry reg;
  reg.OnModuleLoaded(5, 7, a.data(), a.size());
  reg.AttributePending(0x5000);
  reg.AttributePending(0x7000);  // nothing loaded since: no mapping
  reg.OnModuleLoaded(6, 7, b.data(), b.size());
  reg.DiscardPending();
  auto r = reg.FindForKernel(0x7000, "scale_kernel");  // by name: the newest
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->module_id, 6u);
  EXPECT_EQ(reg.FindForKernel(0x5000, "scale_kernel")->module_id, 5u);
}

TEST(ModuleRegistryTest, UnloadForgetsTheHandle) {
  const std::string cubin = TestCubin();
  if (cubin.empty()) GTEST_SKIP() << "nvcc was not found at configure time; no test cubin built";
  ModuleRegistry reg;
  reg.OnModuleLoaded(5, 7, cubin.data(), cubin.size());
  reg.AttributePending(0x5000);
  EXPECT_EQ(reg.size(), 1u);
  EXPECT_EQ(reg.total_bytes(), cubin.size());
  reg.OnModuleUnloading(5);
  EXPECT_EQ(reg.size(), 0u);
  EXPECT_EQ(reg.total_bytes(), 0u);
  EXPECT_EQ(reg.FindForKernel(0x5000, "scale_kernel"), nullptr);
}

// The kernel census: every kernel of every registered image, by module; an
// image that does not parse contributes nothing; unloaded modules are gone.
TEST(ModuleRegistryTest, LoadedKernelsListsEveryImagesKernels) {
  const std::string cubin = TestCubin();
  if (cubin.empty()) GTEST_SKIP() << "nvcc was not found at configure time; no test cubin built";
  ModuleRegistry reg;
  reg.OnModuleLoaded(4, 7, cubin.data(), cubin.size());
  const std::string junk = "not a cubin";
  reg.OnModuleLoaded(5, 7, junk.data(), junk.size());
  reg.OnModuleLoaded(6, 7, cubin.data(), cubin.size());
  reg.DiscardPending();
  std::vector<ModuleRegistry::LoadedKernel> k = reg.LoadedKernels();
  size_t in4 = 0, in6 = 0;
  bool scale = false;
  for (const auto& e : k) {
    EXPECT_NE(e.module_id, 5u);
    in4 += e.module_id == 4;
    in6 += e.module_id == 6;
    scale |= e.mangled_name == "scale_kernel";
  }
  EXPECT_TRUE(scale);
  EXPECT_GE(in4, 1u);
  EXPECT_EQ(in4, in6);
  ASSERT_FALSE(k.empty());
  EXPECT_EQ(k.front().module_id, 4u);
  reg.OnModuleUnloading(4);
  for (const auto& e : reg.LoadedKernels()) EXPECT_NE(e.module_id, 4u);
}

}  // namespace
}  // namespace kerncap::agent::cuda
