// output.h: how kerncapctl prints. A command produces either a table (human
// output: `-o table`, the default, or `-o wide` with more columns) or a
// document (`-o json` / `-o yaml`, docs/JSON.md), or ids (`-o name` as
// KIND/ID, `-q` bare ids, one per line, for scripts and xargs).
#ifndef KERNCAP_CLIENT_KERNCAPCTL_OUTPUT_H_
#define KERNCAP_CLIENT_KERNCAPCTL_OUTPUT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/control/api_json.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "nlohmann/json.hpp"

namespace kerncap::ctl {

enum class Format { kTable, kWide, kJson, kYaml, kName, kJsonPath, kCustomColumns };

// "table" | "wide" | "json" | "yaml" | "name".
absl::StatusOr<Format> ParseFormat(absl::string_view text);

// -o's value: the formats above, or "jsonpath=TEMPLATE" /
// "custom-columns=SPEC" (a small subset of kubectl's field selectors, over
// the document -o json prints; kerncapctl help output). The template or spec
// is checked here, so a malformed one is a usage error before any daemon is
// reached; evaluating it cannot fail (a missing field prints "<none>").
struct OutputSpec {
  Format format = Format::kTable;
  std::string spec;  // TEMPLATE or SPEC
};
absl::StatusOr<OutputSpec> ParseOutputSpec(absl::string_view text);

struct Output {
  std::ostream& out;
  Format format = Format::kTable;
  bool quiet = false;       // -q: ids only
  bool no_headers = false;  // --no-headers: tables without their header row
  std::string spec{};       // -o jsonpath= / custom-columns=: the template or spec
  std::string sort_by{};    // --sort-by=FIELD (list commands, SortBy below)

  // JSON, YAML or a field selector: print Emit()'s document (or the fields
  // selected from it) and nothing else.
  bool structured() const {
    return format == Format::kJson || format == Format::kYaml || format == Format::kJsonPath ||
           format == Format::kCustomColumns;
  }
  // Errors as JSON objects on stderr (-o json / yaml).
  bool json_errors() const { return format == Format::kJson || format == Format::kYaml; }
  bool wide() const { return format == Format::kWide; }
  // -q or -o name: print Ids() and nothing else.
  bool ids_only() const { return quiet || format == Format::kName; }
};

// Prints `doc` as one line of JSON, as a YAML document, or the fields -o
// jsonpath= / custom-columns= select from it.
void Emit(Output o, const nlohmann::json& doc);
// An API message under the JSON policy (common/control/api_json.h).
void Emit(Output o, const google::protobuf::Message& message);
// One id per line: "KIND/ID" for -o name, "ID" for -q.
void Ids(Output o, absl::string_view kind, const std::vector<std::string>& ids);

// A field path of the selectors: ".a.b[0].c[*]" (the leading '.' optional).
// Every value it reaches ([*] fans out); none when a step is missing.
absl::StatusOr<std::vector<nlohmann::json>> SelectField(const nlohmann::json& doc,
                                                        absl::string_view path);
// -o jsonpath=TEMPLATE applied to `doc`: literal text with {PATH} parts;
// several values of one part are joined by spaces, a missing one is "<none>".
// \n and \t in the literal text are a newline and a tab.
absl::StatusOr<std::string> JsonPathText(const nlohmann::json& doc, absl::string_view tmpl);
// The items a list document holds (its first top-level array, e.g.
// "captures"), or the document itself as the one item.
std::vector<nlohmann::json> ListItems(const nlohmann::json& doc);
// The order (indices) that sorts `items` by the field at `path` ascending:
// numbers numerically, strings as text, items without it first; stable.
// An error when no item has the field.
absl::StatusOr<std::vector<size_t>> SortOrder(const std::vector<nlohmann::json>& items,
                                              absl::string_view path);

// --sort-by for a list command: reorders `items` (API messages) by a field
// of their JSON form, before they are printed in any format.
template <class M>
absl::Status SortBy(const Output& o, google::protobuf::RepeatedPtrField<M>* items) {
  if (o.sort_by.empty() || items->empty()) return absl::OkStatus();
  std::vector<nlohmann::json> docs;
  for (const M& m : *items) docs.push_back(api::ToJson(m));
  absl::StatusOr<std::vector<size_t>> order = SortOrder(docs, o.sort_by);
  if (!order.ok()) return order.status();
  google::protobuf::RepeatedPtrField<M> sorted;
  for (size_t i : *order) *sorted.Add() = (*items)[static_cast<int>(i)];
  items->Swap(&sorted);
  return absl::OkStatus();
}

// A JSON value as YAML 1.2 (block style; strings double-quoted, so every
// value reads back as the same type).
std::string ToYaml(const nlohmann::json& doc);

// 1536 -> "1.50 KiB"; below 1 KiB plain bytes ("512 B"). The Python client's
// kerncap._format.human_bytes gives the same text.
std::string HumanBytes(uint64_t bytes);
// Unix milliseconds -> "2026-11-29 18:01:02" in local time; "-" for 0.
std::string FormatTime(int64_t unix_ms);
// "12.5%"; "-" when whole is 0.
std::string Percent(uint64_t part, uint64_t whole);
// 0x7f3a00000000 style (common/json_policy.h Address).
std::string Hex(uint64_t v);

// Columns padded to their widest cell; numeric-looking columns can be
// right-aligned. Rows with fewer cells are padded.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void AlignRight(size_t column);
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  size_t rows() const { return rows_.size(); }
  void Print(std::ostream& out, bool header = true) const;
  // Print with the header unless --no-headers.
  void Print(Output o) const { Print(o.out, !o.no_headers); }

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_OUTPUT_H_
