// text_template.h: fills the generator's text templates (templates/*.in,
// embedded at build time). The tags:
//   {{NAME}}             the text value NAME, inserted as is (the caller
//                        quotes or escapes it for the target language)
//   {{#FLAG}} ... {{/FLAG}}   the enclosed text when FLAG is true
//   {{^FLAG}} ... {{/FLAG}}   the enclosed text when FLAG is false
//   {{! comment }}       nothing (a note for the template's reader)
// Sections nest. A line that holds only a section tag or a comment (no other
// character, the newline included) produces nothing, so block tags can stand
// on their own lines. NAME and FLAG are [A-Za-z0-9_]+. Every tag is checked
// on every render, inside false sections as well: an unknown name, a name
// used as both a value and a flag, an unclosed or mismatched section, or a
// "{{" without "}}" is an error naming the tag and its line, never a
// silently shorter text. The syntax is a subset of Mustache's, without
// HTML escaping, lists or partials. Not a Mustache library (Debian has
// libkainjow-mustache-dev): the Mustache rules render an unknown name as
// empty text and escape HTML, both wrong for a Makefile, and it would be a
// new build dependency of every build machine for these few lines.
#ifndef KERNCAP_REPRODUCER_GENERATOR_TEXT_TEMPLATE_H_
#define KERNCAP_REPRODUCER_GENERATOR_TEXT_TEMPLATE_H_

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kerncap::repro {

struct TemplateValues {
  std::map<std::string, std::string> text;
  std::map<std::string, bool> flags;
};

// `name` says which template it is in error messages.
absl::StatusOr<std::string> RenderTemplate(std::string_view name, std::string_view tmpl,
                                           const TemplateValues& values);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_TEXT_TEMPLATE_H_
