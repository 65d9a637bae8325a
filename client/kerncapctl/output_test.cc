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
  // The rate and the time left at that rate; an unknown total has neither
  // bar nor time left.
  EXPECT_EQ(ProgressBar::Render("export", 1 << 30, 3u << 30, true, 4, 2.0),
            "export [#...] 33% 1.00 GiB/3.00 GiB  512 MiB/s  4s left");
  EXPECT_EQ(ProgressBar::Render("export", 3u << 30, 3u << 30, true, 4, 6.0),
            "export [####] 100% 3.00 GiB/3.00 GiB  512 MiB/s  in 6s");
  EXPECT_EQ(ProgressBar::Render("repro", 5u << 20, 0, true, 4, 1.0), "repro 5.00 MiB  5.00 MiB/s");
  EXPECT_EQ(ProgressBar::Duration(185), "3m05s");
  EXPECT_EQ(ProgressBar::Duration(3720), "1h02m");
}

TEST(FieldSelectorTest, PathsTemplatesColumnsAndSort) {
  const nlohmann::json doc = nlohmann::json::parse(R"({"captures":[
      {"capture_id":"cap-b","logical_bytes":2048,"tags":{"run":"r1"}},
      {"capture_id":"cap-a","logical_bytes":512}]})");
  auto ids = SelectField(doc, ".captures[*].capture_id");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<nlohmann::json>{"cap-b", "cap-a"}));
  EXPECT_EQ(SelectField(doc, "captures[1].logical_bytes")->at(0), 512);
  EXPECT_TRUE(SelectField(doc, ".captures[5].capture_id")->empty());
  EXPECT_EQ(*JsonPathText(doc, "{.captures[*].capture_id}"), "cap-b cap-a");
  EXPECT_EQ(*JsonPathText(doc, "id={.captures[1].capture_id} run={.captures[1].tags.run}\\n"),
            "id=cap-a run=<none>\n");
  for (const char* bad : {"{.captures[", "{.a..b}", "x}", "{.a[x]}", "{}"}) {
    EXPECT_FALSE(JsonPathText(doc, bad).ok()) << bad;
  }
  const std::vector<nlohmann::json> items = ListItems(doc);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(*SortOrder(items, "logical_bytes"), (std::vector<size_t>{1, 0}));  // numbers
  EXPECT_EQ(*SortOrder(items, ".capture_id"), (std::vector<size_t>{1, 0}));    // text
  EXPECT_EQ(*SortOrder(items, "tags.run"), (std::vector<size_t>{1, 0}));       // missing first
  EXPECT_FALSE(SortOrder(items, "nope").ok());
  EXPECT_EQ(ListItems(nlohmann::json{{"a", 1}}).size(), 1u);  // not a list: the document

  EXPECT_EQ(ParseOutputSpec("jsonpath={.a}")->format, Format::kJsonPath);
  EXPECT_EQ(ParseOutputSpec("custom-columns=ID:capture_id,SIZE:logical_bytes")->format,
            Format::kCustomColumns);
  EXPECT_FALSE(ParseOutputSpec("custom-columns=ID").ok());
  EXPECT_FALSE(ParseOutputSpec("custom-columns=ID:a[").ok());
  EXPECT_FALSE(ParseOutputSpec("xml").ok());
  EXPECT_EQ(ParseOutputSpec("wide")->format, Format::kWide);

  std::ostringstream table;
  Output o{table, Format::kCustomColumns};
  o.spec = "ID:capture_id,RUN:tags.run";
  Emit(o, doc);
  EXPECT_EQ(table.str(), "ID     RUN\ncap-b  r1\ncap-a  <none>\n");
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
