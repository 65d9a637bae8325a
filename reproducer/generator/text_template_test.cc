#include "reproducer/generator/text_template.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace kerncap::repro {
namespace {

TemplateValues Values() {
  TemplateValues v;
  v.text = {{"A", "x$y"}, {"EMPTY", ""}, {"TAGLIKE", "{{B}}"}};
  v.flags = {{"ON", true}, {"OFF", false}};
  return v;
}

std::string Render(std::string_view t) {
  absl::StatusOr<std::string> r = RenderTemplate("t", t, Values());
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : "";
}

std::string Error(std::string_view t, const TemplateValues& v = Values()) {
  absl::StatusOr<std::string> r = RenderTemplate("t", t, v);
  EXPECT_FALSE(r.ok()) << "rendered: " << *r;
  return r.ok() ? "" : std::string(r.status().message());
}

TEST(TextTemplateTest, ValuesAreInsertedAsIs) {
  EXPECT_EQ(Render("a {{A}} b{{EMPTY}}\n"), "a x$y b\n");
  // A value is not read as a template.
  EXPECT_EQ(Render("{{TAGLIKE}}"), "{{B}}");
  EXPECT_EQ(Render("no tags at all\n"), "no tags at all\n");
  EXPECT_EQ(Render("single { and } and }} alone\n"), "single { and } and }} alone\n");
}

TEST(TextTemplateTest, SectionsInlineAndNested) {
  EXPECT_EQ(Render("x{{#ON}} on{{/ON}}{{#OFF}} off{{/OFF}}{{^OFF}} not-off{{/OFF}}\n"),
            "x on not-off\n");
  EXPECT_EQ(Render("{{#ON}}[{{#OFF}}hidden{{/OFF}}{{^OFF}}{{A}}{{/OFF}}]{{/ON}}"), "[x$y]");
  // An outer false section hides a true inner one.
  EXPECT_EQ(Render("{{#OFF}}{{#ON}}hidden{{/ON}}{{/OFF}}."), ".");
}

TEST(TextTemplateTest, StandaloneTagLinesVanish) {
  EXPECT_EQ(Render("a\n{{#ON}}\nb\n{{/ON}}\n{{^ON}}\nc\n{{/ON}}\n{{! note }}\nd\n"), "a\nb\nd\n");
  // A tag sharing its line with text keeps the line's newline.
  EXPECT_EQ(Render("a {{#OFF}}b{{/OFF}}\nc\n"), "a \nc\n");
  // Only an exact tag line is standalone: leading blanks are text.
  EXPECT_EQ(Render(" {{#ON}}\nb{{/ON}}"), " \nb");
  // At the end of the text without a newline.
  EXPECT_EQ(Render("a\n{{#ON}}"
                   "\nb\n{{/ON}}"),
            "a\nb\n");
  // A value alone on its line keeps the line's newline.
  EXPECT_EQ(Render("{{A}}\nz"), "x$y\nz");
}

TEST(TextTemplateTest, ErrorsNameTheTagAndLine) {
  EXPECT_TRUE(absl::StrContains(Error("a\n{{NOPE}}"), "line 2: unknown value 'NOPE'"));
  EXPECT_TRUE(absl::StrContains(Error("{{#NOPE}}{{/NOPE}}"), "unknown flag 'NOPE'"));
  // A value used as a flag (and the reverse) is unknown in that role.
  EXPECT_TRUE(absl::StrContains(Error("{{#A}}{{/A}}"), "unknown flag 'A'"));
  EXPECT_TRUE(absl::StrContains(Error("{{ON}}"), "unknown value 'ON'"));
  // Checked inside false sections too.
  EXPECT_TRUE(absl::StrContains(Error("{{#OFF}}{{NOPE}}{{/OFF}}"), "unknown value 'NOPE'"));
  EXPECT_TRUE(
      absl::StrContains(Error("\n\n{{#ON}}\nx"), "section 'ON' opened on line 3 is never closed"));
  EXPECT_TRUE(absl::StrContains(Error("{{#ON}}{{/OFF}}"),
                                "'{{/OFF}}' closes section 'ON' opened on line 1"));
  EXPECT_TRUE(absl::StrContains(Error("{{/ON}}"), "'{{/ON}}' closes no section"));
  EXPECT_TRUE(absl::StrContains(Error("x {{A"), "line 1: '{{' without '}}'"));
  EXPECT_TRUE(absl::StrContains(Error("{{a b}}"), "'{{a b}}' is not a tag"));
  EXPECT_TRUE(absl::StrContains(Error("{{}}"), "is not a tag"));
  TemplateValues both = Values();
  both.text["ON"] = "1";
  EXPECT_TRUE(absl::StrContains(Error("x", both), "'ON' is given as both a value and a flag"));
}

}  // namespace
}  // namespace kerncap::repro
