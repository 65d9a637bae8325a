#include "agent/cuda/cupti_api.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kerncap::agent::cuda {
namespace {

std::vector<std::string> Paths(const std::vector<CuptiCandidate>& c) {
  std::vector<std::string> out;
  for (const CuptiCandidate& x : c) out.push_back(x.path);
  return out;
}

size_t IndexOf(const std::vector<std::string>& v, const std::string& s) {
  return static_cast<size_t>(std::find(v.begin(), v.end(), s) - v.begin());
}

TEST(CuptiApiTest, MajorFromFileName) {
  EXPECT_EQ(CuptiMajorOf("/x/libcupti.so.13"), 13);
  EXPECT_EQ(CuptiMajorOf("libcupti.so.12.8.90"), 12);
  EXPECT_EQ(CuptiMajorOf("/x/libcupti.so"), 0);
  EXPECT_EQ(CuptiMajorOf("/x/libcudart.so.12"), 0);
}

TEST(CuptiApiTest, OverrideIsTheOnlyPlaceLookedAt) {
  CuptiSearch s;
  s.driver_major = 13;
  s.override_path = "/opt/cupti";
  s.loaded_libraries = {"/usr/lib/libcupti.so.13"};
  EXPECT_EQ(Paths(CuptiCandidates(s)),
            (std::vector<std::string>{"/opt/cupti/libcupti.so.13", "/opt/cupti/libcupti.so.12"}));
  s.override_path = "/opt/x/libcupti.so.12.4.1";
  auto c = CuptiCandidates(s);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].major, 12);
}

TEST(CuptiApiTest, ACuptiAlreadyLoadedIsTheOneUsed) {
  CuptiSearch s;
  s.driver_major = 13;
  s.loaded_libraries = {"/venv/nvidia/cuda_runtime/lib/libcudart.so.12",
                        "/venv/nvidia/cuda_cupti/lib/libcupti.so.12"};
  auto c = CuptiCandidates(s);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].path, "/venv/nvidia/cuda_cupti/lib/libcupti.so.12");
  EXPECT_EQ(c[0].major, 12);
}

TEST(CuptiApiTest, DriverMajorFirstThenOlderNeverNewer) {
  CuptiSearch s;
  s.driver_major = 13;
  s.loaded_libraries = {"/sp/nvidia/cuda_runtime/lib/libcudart.so.12", "/lib/x86_64-linux-gnu/libc.so.6"};
  s.python_prefixes = {"/venv"};
  s.toolkit_roots = {"/opt/cuda"};
  auto c = CuptiCandidates(s);
  std::vector<std::string> p = Paths(c);
  for (const CuptiCandidate& x : c) {
    EXPECT_TRUE(x.major == 13 || x.major == 12) << x.path;
    EXPECT_EQ(x.path.find("libc.so"), std::string::npos);
    EXPECT_EQ(x.path.find("x86_64-linux-gnu"), std::string::npos) << "not a CUDA library's folder";
  }
  // Every 13 before any 12.
  size_t last13 = 0, first12 = p.size();
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].major == 13) last13 = i;
    if (c[i].major == 12 && first12 == p.size()) first12 = i;
  }
  EXPECT_LT(last13, first12);
  // Within one major: beside the loaded wheels, the Python environment, the
  // linker, the toolkits.
  const size_t wheel = IndexOf(p, "/sp/nvidia/cuda_cupti/lib/libcupti.so.12");
  const size_t cu13 = IndexOf(p, "/sp/nvidia/cu13/lib/libcupti.so.13");
  const size_t venv = IndexOf(p, "/venv/lib/python3*/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12");
  const size_t linker = IndexOf(p, "libcupti.so.12");
  const size_t toolkit = IndexOf(p, "/opt/cuda/extras/CUPTI/lib64/libcupti.so.12");
  const size_t local = IndexOf(p, "/usr/local/cuda-12*/extras/CUPTI/lib64/libcupti.so.12");
  ASSERT_LT(cu13, p.size());
  ASSERT_LT(local, p.size());
  EXPECT_LT(wheel, venv);
  EXPECT_LT(venv, linker);
  EXPECT_LT(linker, toolkit);
  EXPECT_LT(toolkit, local);
}

TEST(CuptiApiTest, Cuda12DriverLooksOnlyForCupti12) {
  CuptiSearch s;
  s.driver_major = 12;
  s.python_paths = {"/pp"};
  for (const CuptiCandidate& c : CuptiCandidates(s)) {
    EXPECT_EQ(c.major, 12) << c.path;
    EXPECT_EQ(c.path.find(".so.13"), std::string::npos) << c.path;
  }
}

}  // namespace
}  // namespace kerncap::agent::cuda
