#include "client/kerncapctl/output.h"

#include <sstream>

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

TEST(TableTest, NoHeaders) {
  Table t({"A", "B"});
  t.AddRow({"x", "y"});
  std::ostringstream out;
  t.Print(Output{out, Format::kTable, false, /*no_headers=*/true});
  EXPECT_EQ(out.str(), "x  y\n");
}

TEST(OutputTest, FormatsAndIds) {
  EXPECT_EQ(*ParseFormat("yaml"), Format::kYaml);
  EXPECT_FALSE(ParseFormat("xml").ok());
  std::ostringstream name_out;
  Ids(Output{name_out, Format::kName}, "capture", {"cap-1", "cap-2"});
  EXPECT_EQ(name_out.str(), "capture/cap-1\ncapture/cap-2\n");
  std::ostringstream quiet_out;
  Output q{quiet_out};
  q.quiet = true;
  EXPECT_TRUE(q.ids_only());
  Ids(q, "capture", {"cap-1"});
  EXPECT_EQ(quiet_out.str(), "cap-1\n");
}

TEST(OutputTest, YamlKeepsTypes) {
  nlohmann::json doc = {{"id", "cap-1"},
                        {"count", 3},
                        {"va", "0x10"},
                        {"no", "yes"},
                        {"empty", nlohmann::json::array()},
                        {"tags", {{"run", "base"}}},
                        {"regions", {{{"va", "0x1"}, {"kind", "device"}}, {{"va", "0x2"}}}}};
  EXPECT_EQ(ToYaml(doc),
            "count: 3\n"
            "empty: []\n"
            "id: \"cap-1\"\n"
            "\"no\": \"yes\"\n"
            "regions:\n"
            "  - kind: \"device\"\n"
            "    va: \"0x1\"\n"
            "  - va: \"0x2\"\n"
            "tags:\n"
            "  run: \"base\"\n"
            "va: \"0x10\"\n");
}

}  // namespace
}  // namespace kerncap::ctl
