#include "agent/hsa/packets.h"

#include <cstring>

#include "gtest/gtest.h"

namespace kerncap::agent::hsa {
namespace {

TEST(PacketsTest, TypeAndLaunch) {
  hsa_kernel_dispatch_packet_t p;
  std::memset(&p, 0, sizeof(p));
  p.header = HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE;
  p.setup = 1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
  p.workgroup_size_x = 64;
  p.workgroup_size_y = p.workgroup_size_z = 1;
  p.grid_size_x = 1000;  // partial last work-group
  p.grid_size_y = p.grid_size_z = 1;
  p.group_segment_size = 128;
  EXPECT_TRUE(IsKernelDispatch(&p));
  LaunchDesc d = LaunchOf(p);
  EXPECT_EQ(d.grid[0], 1000u);  // work-items, as in the manifest for HSA
  EXPECT_EQ(d.block[0], 64u);
  EXPECT_EQ(d.shared_mem_bytes, 128u);
  EXPECT_EQ(d.attributes["aql.grid_size_x"], 1000);
  EXPECT_EQ(d.attributes["aql.dimensions"], 1);
}

TEST(PacketsTest, Barrier) {
  hsa_barrier_and_packet_t b = MakeBarrier(hsa_signal_t{42});
  EXPECT_EQ(PacketType(&b), HSA_PACKET_TYPE_BARRIER_AND);
  EXPECT_FALSE(IsKernelDispatch(&b));
  EXPECT_TRUE(b.header & (1 << HSA_PACKET_HEADER_BARRIER));
  EXPECT_EQ(b.completion_signal.handle, 42u);
  EXPECT_EQ(b.dep_signal[0].handle, 0u);
}

}  // namespace
}  // namespace kerncap::agent::hsa
