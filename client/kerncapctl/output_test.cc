#include "client/kerncapctl/output.h"

#include <sstream>

#include "client/kerncapctl/connection.h"
#include "client/kerncapctl/progress.h"
#include "gtest/gtest.h"

namespace kerncap::ctl {
namespace {

TEST(HumanBytesTest, Units) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.50 KiB");
  EXPECT_EQ(HumanBytes(10ull << 20), "10.0 MiB");
  EXPECT_EQ(HumanBytes(300ull << 30), "300 GiB");
}

TEST(TableTest, AlignsColumns) {
  Table t({"A", "SIZE", "NAME"});
  t.AlignRight(1);
  t.AddRow({"x", "1", "first"});
  t.AddRow({"long", "100", "second"});
  std::ostringstream out;
  t.Print(out);
  EXPECT_EQ(out.str(),
            "A     SIZE  NAME\n"
            "x        1  first\n"
            "long   100  second\n");
}

TEST(ProgressBarTest, Render) {
  EXPECT_EQ(ProgressBar::Render("pull", 5, 10, false, 10), "pull [#####.....] 50% 5/10");
  EXPECT_EQ(ProgressBar::Render("x", 20, 10, false, 4), "x [####] 100% 10/10");
}

TEST(ExitCodeTest, Mapping) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeFor(absl::InternalError("")), 1);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("")), 2);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("")), 3);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("")), 4);
  EXPECT_EQ(ExitCodeFor(absl::DataLossError("")), 5);
  EXPECT_EQ(ExitCodeFor(absl::UnauthenticatedError("")), 6);
  EXPECT_EQ(ExitCodeFor(absl::PermissionDeniedError("")), 6);
  EXPECT_EQ(ExitCodeFor(absl::UnimplementedError("")), 1);
}

}  // namespace
}  // namespace kerncap::ctl
