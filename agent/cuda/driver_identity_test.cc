#include "agent/cuda/driver_identity.h"

#include "gtest/gtest.h"

namespace kerncap::agent::cuda {
namespace {

TEST(DriverIdentityTest, ParsesProprietaryModuleLine) {
  EXPECT_EQ(ParseNvidiaProcVersion(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Apr 10 "
                "20:05:06 UTC 2025\nGCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2)\n"),
            "580.159.04");
}

TEST(DriverIdentityTest, ParsesOpenModuleLine) {
  // The open kernel module says "Open Kernel Module for x86_64": the word
  // after "Kernel Module" is not the version.
  EXPECT_EQ(ParseNvidiaProcVersion(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release "
                "Build  (dvs-builder@U16-I3-B03-4-3)  Sun Jul 27 06:54:38 UTC 2025\n"
                "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"),
            "580.65.06");
}

TEST(DriverIdentityTest, NothingUsable) {
  EXPECT_EQ(ParseNvidiaProcVersion(""), "");
  EXPECT_EQ(ParseNvidiaProcVersion("GCC version:  gcc version 12.2.0\n"), "");
  EXPECT_EQ(ParseNvidiaProcVersion("NVRM version: NVIDIA UNIX x86_64 Kernel Module\n"), "");
  // Only the NVRM line counts.
  EXPECT_EQ(ParseNvidiaProcVersion("NVRM version: unknown\nGCC version: 12.2.0\n"), "");
}

TEST(DriverIdentityTest, CudaVersionString) {
  EXPECT_EQ(CudaVersionString(13000), "13.0");
  EXPECT_EQ(CudaVersionString(12040), "12.4");
  EXPECT_EQ(CudaVersionString(12090), "12.9");
  EXPECT_EQ(CudaVersionString(0), "");
}

TEST(DriverIdentityTest, KernelDriverVersionIsCachedAndWellFormed) {
  // No driver here: "" (a GPU machine: its version). Either way stable.
  const std::string& a = NvidiaKernelDriverVersion();
  EXPECT_EQ(&a, &NvidiaKernelDriverVersion());
  if (!a.empty()) {
    EXPECT_NE(a.find('.'), std::string::npos) << a;
  }
}

}  // namespace
}  // namespace kerncap::agent::cuda
