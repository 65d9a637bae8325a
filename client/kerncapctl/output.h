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

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace kerncap::ctl {

enum class Format { kTable, kWide, kJson, kYaml, kName };

// "table" | "wide" | "json" | "yaml" | "name".
absl::StatusOr<Format> ParseFormat(absl::string_view text);

struct Output {
  std::ostream& out;
  Format format = Format::kTable;
  bool quiet = false;       // -q: ids only
  bool no_headers = false;  // --no-headers: tables without their header row

  // JSON or YAML: print Emit()'s document and nothing else.
  bool structured() const { return format == Format::kJson || format == Format::kYaml; }
  bool wide() const { return format == Format::kWide; }
  // -q or -o name: print Ids() and nothing else.
  bool ids_only() const { return quiet || format == Format::kName; }
};

// Prints `doc` as one line of JSON, or as a YAML document.
void Emit(Output o, const nlohmann::json& doc);
// An API message under the JSON policy (common/control/api_json.h).
void Emit(Output o, const google::protobuf::Message& message);
// One id per line: "KIND/ID" for -o name, "ID" for -q.
void Ids(Output o, absl::string_view kind, const std::vector<std::string>& ids);

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
