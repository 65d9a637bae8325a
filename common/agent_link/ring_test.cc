#include "common/agent_link/ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "gtest/gtest.h"

namespace kerncap::link {
namespace {

TEST(RingTest, CreatedRingIsSealedSizedAndShared) {
  RingLayout layout{64 * 1024, 4};
  ASSERT_EQ(ValidateRingLayout(layout, 64 * 1024), "");
  LinkResult<UniqueFd> fd = CreateRingMemfd(layout, "kerncap-test-ring");
  ASSERT_TRUE(fd.ok()) << fd.error();
  ASSERT_TRUE(CheckRingFd(fd->get(), layout).ok());

  // The agent side cannot resize it (which would SIGBUS the daemon).
  EXPECT_NE(::ftruncate(fd->get(), 4096), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(fd->get(), layout.bytes() * 2), 0);
  EXPECT_NE(::fcntl(fd->get(), F_ADD_SEALS, F_SEAL_WRITE), 0);  // F_SEAL_SEAL

  LinkResult<RingMapping> writer = RingMapping::Map(fd->get(), layout, true);
  LinkResult<RingMapping> reader = RingMapping::Map(fd->get(), layout, false);
  ASSERT_TRUE(writer.ok() && reader.ok());
  std::memset(writer->slot(3), 0xAB, layout.slot_size);
  EXPECT_EQ(reader->slot(3)[0], 0xAB);
  EXPECT_EQ(reader->slot(3)[layout.slot_size - 1], 0xAB);
  EXPECT_EQ(reader->slot(2)[0], 0);
}

TEST(RingTest, UnsealedOrWrongSizeFdIsRefused) {
  RingLayout layout{4096, 2};
  UniqueFd fd(::memfd_create("plain", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(::ftruncate(fd.get(), layout.bytes()), 0);
  EXPECT_FALSE(CheckRingFd(fd.get(), layout).ok());
  ASSERT_EQ(::fcntl(fd.get(), F_ADD_SEALS, kRingSeals), 0);
  EXPECT_TRUE(CheckRingFd(fd.get(), layout).ok());
  RingLayout bigger{4096, 3};
  EXPECT_FALSE(CheckRingFd(fd.get(), bigger).ok());
}

TEST(RingTest, LayoutValidation) {
  EXPECT_NE(ValidateRingLayout({1000, 4}, 1000), "");           // below a page
  EXPECT_NE(ValidateRingLayout({1 << 20, 0}, 1 << 20), "");     // no slots
  EXPECT_NE(ValidateRingLayout({3 << 19, 4}, 1 << 20), "");     // not chunk multiple
  EXPECT_EQ(ValidateRingLayout({8 << 20, 8}, 1 << 20), "");
  EXPECT_EQ(ValidateRingLayout({64ull << 20, 1024}, 1 << 20), "");  // 64 GiB staging
  EXPECT_NE(ValidateRingLayout({1ull << 30, 2048}, 1 << 20), "");  // > 1 TiB
  EXPECT_NE(ValidateRingLayout({1 << 20, (1u << 16) + 1}, 1 << 20), "");  // too many slots
}

}  // namespace
}  // namespace kerncap::link
