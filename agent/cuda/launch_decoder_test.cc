#include "agent/cuda/launch_decoder.h"

#include <cupti.h>  // includes generated_cuda_meta.h (which has no include guard)

#include "gtest/gtest.h"

namespace kerncap::agent::cuda {
namespace {

TEST(LaunchDecoderTest, ClassicLaunch) {
  int a = 1;
  void* args[] = {&a};
  cuLaunchKernel_params p{};
  p.f = reinterpret_cast<CUfunction>(0x1234);
  p.gridDimX = 10; p.gridDimY = 2; p.gridDimZ = 1;
  p.blockDimX = 128; p.blockDimY = 1; p.blockDimZ = 1;
  p.sharedMemBytes = 99000;
  p.hStream = reinterpret_cast<CUstream>(0x55);
  p.kernelParams = args;
  auto call = DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p);
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->function, p.f);
  EXPECT_EQ(call->desc.grid, (std::array<uint32_t, 3>{10, 2, 1}));
  EXPECT_EQ(call->desc.block, (std::array<uint32_t, 3>{128, 1, 1}));
  EXPECT_EQ(call->desc.shared_mem_bytes, 99000u);
  EXPECT_EQ(call->desc.stream, 0x55u);
  EXPECT_EQ(call->kernel_params, args);
  EXPECT_FALSE(call->desc.cooperative);
  EXPECT_FALSE(call->per_thread_stream);
  EXPECT_TRUE(call.has_value() && IsKernelLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz));
  auto ptsz = DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &p);
  EXPECT_TRUE(ptsz->per_thread_stream);
}

TEST(LaunchDecoderTest, ExWithClusterAndCooperativeAttributes) {
  CUlaunchAttribute attrs[3] = {};
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[0].value.clusterDim.x = 2; attrs[0].value.clusterDim.y = 1; attrs[0].value.clusterDim.z = 1;
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attrs[1].value.cooperative = 1;
  attrs[2].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attrs[2].value.priority = -1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = 8; cfg.gridDimY = 1; cfg.gridDimZ = 1;
  cfg.blockDimX = 256; cfg.blockDimY = 1; cfg.blockDimZ = 1;
  cfg.sharedMemBytes = 1024;
  cfg.attrs = attrs;
  cfg.numAttrs = 3;
  cuLaunchKernelEx_params p{};
  p.config = &cfg;
  p.f = reinterpret_cast<CUfunction>(0x99);
  auto call = DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &p);
  ASSERT_TRUE(call.has_value());
  EXPECT_EQ(call->desc.cluster, (std::array<uint32_t, 3>{2, 1, 1}));
  EXPECT_TRUE(call->desc.cooperative);
  EXPECT_EQ(call->desc.attributes.at("launch.priority"), -1);
  EXPECT_EQ(call->desc.grid[0], 8u);
  EXPECT_EQ(call->desc.shared_mem_bytes, 1024u);
}

TEST(LaunchDecoderTest, SetLaunchFunctionSwapsOnlyTheFunction) {
  const CUfunction variant = reinterpret_cast<CUfunction>(0x9999);
  cuLaunchKernel_params classic{};
  classic.f = reinterpret_cast<CUfunction>(0x1234);
  classic.gridDimX = 7;
  ASSERT_TRUE(SetLaunchFunction(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &classic, variant));
  auto call = DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &classic);
  EXPECT_EQ(call->function, variant);
  EXPECT_EQ(call->desc.grid[0], 7u);
  CUlaunchConfig config{};
  config.gridDimX = 3;
  cuLaunchKernelEx_params ex{};
  ex.config = &config;
  ex.f = reinterpret_cast<CUfunction>(0x1234);
  ASSERT_TRUE(SetLaunchFunction(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &ex, variant));
  EXPECT_EQ(ex.f, variant);
  EXPECT_EQ(ex.config, &config);
  cuLaunchCooperativeKernel_params coop{};
  ASSERT_TRUE(SetLaunchFunction(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, &coop, variant));
  EXPECT_EQ(coop.f, variant);
  EXPECT_FALSE(SetLaunchFunction(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &classic, variant));
  EXPECT_FALSE(SetLaunchFunction(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, nullptr, variant));
}

TEST(LaunchDecoderTest, CooperativeAndNonLaunches) {
  cuLaunchCooperativeKernel_params p{};
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 32;
  auto call = DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, &p);
  ASSERT_TRUE(call.has_value());
  EXPECT_TRUE(call->desc.cooperative);
  EXPECT_FALSE(DecodeLaunch(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p).has_value());
  EXPECT_TRUE(IsGraphLaunch(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
  EXPECT_FALSE(IsKernelLaunch(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
}

}  // namespace
}  // namespace kerncap::agent::cuda
