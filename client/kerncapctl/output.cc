#include "client/kerncapctl/output.h"

#include <algorithm>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/control/api_json.h"
#include "common/json_policy.h"

namespace kerncap::ctl {
namespace {

std::string JsonLine(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A mapping key that YAML reads as the same string without quotes.
bool PlainKey(const std::string& k) {
  if (k.empty()) return false;
  for (char c : k) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      return false;
    }
  }
  // Words YAML 1.1 readers turn into booleans or null.
  static const char* kReserved[] = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"};
  std::string lower = absl::AsciiStrToLower(k);
  for (const char* r : kReserved) {
    if (lower == r) return false;
  }
  return !absl::ascii_isdigit(static_cast<unsigned char>(k[0]));
}

std::string YamlKey(const std::string& k) { return PlainKey(k) ? k : JsonLine(k); }

// Scalars are written in JSON form: YAML 1.2 reads JSON scalars as the same
// values (double-quoted strings with JSON escapes, numbers, true/false/null).
void YamlValue(const nlohmann::json& v, int indent, std::string* out);

void YamlBlock(const nlohmann::json& v, int indent, std::string* out) {
  const std::string pad(static_cast<size_t>(indent), ' ');
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      absl::StrAppend(out, pad, YamlKey(it.key()), ":");
      YamlValue(it.value(), indent + 2, out);
    }
  } else {
    for (const nlohmann::json& e : v) {
      absl::StrAppend(out, pad, "-");
      if ((e.is_object() || e.is_array()) && !e.empty()) {
        // "- key: value" with the rest of the mapping aligned under it.
        std::string inner;
        YamlBlock(e, indent + 2, &inner);
        absl::StrAppend(out, " ", inner.substr(static_cast<size_t>(indent + 2)));
      } else {
        YamlValue(e, indent + 2, out);
      }
    }
  }
}

void YamlValue(const nlohmann::json& v, int indent, std::string* out) {
  if ((v.is_object() || v.is_array()) && !v.empty()) {
    absl::StrAppend(out, "\n");
    YamlBlock(v, indent, out);
    return;
  }
  absl::StrAppend(out, " ", JsonLine(v), "\n");  // scalars, {} and []
}

}  // namespace

absl::StatusOr<Format> ParseFormat(absl::string_view text) {
  if (text == "table") return Format::kTable;
  if (text == "wide") return Format::kWide;
  if (text == "json") return Format::kJson;
  if (text == "yaml") return Format::kYaml;
  if (text == "name") return Format::kName;
  return absl::InvalidArgumentError(absl::StrCat(
      "-o/--output: expected one of table, wide, json, yaml, name; got \"", text, "\""));
}

std::string ToYaml(const nlohmann::json& doc) {
  std::string out;
  if ((doc.is_object() || doc.is_array()) && !doc.empty()) {
    YamlBlock(doc, 0, &out);
  } else {
    out = JsonLine(doc) + "\n";
  }
  return out;
}

void Emit(Output o, const nlohmann::json& doc) {
  if (o.format == Format::kYaml) {
    o.out << "---\n" << ToYaml(doc);
  } else {
    o.out << JsonLine(doc) << "\n";
  }
}

void Emit(Output o, const google::protobuf::Message& message) { Emit(o, api::ToJson(message)); }

void Ids(Output o, absl::string_view kind, const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    if (o.quiet) {
      o.out << id << "\n";
    } else {
      o.out << kind << "/" << id << "\n";
    }
  }
}

std::string HumanBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return absl::StrFormat("%d B", bytes);
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  return absl::StrFormat(v < 10 ? "%.2f %s" : (v < 100 ? "%.1f %s" : "%.0f %s"), v, kUnits[unit]);
}

std::string FormatTime(int64_t unix_ms) {
  if (unix_ms == 0) return "-";
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm;
  localtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string Percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "-";
  return absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

std::string Hex(uint64_t v) { return json_policy::Address(v); }

void Table::AlignRight(size_t column) {
  if (right_.size() <= column) right_.resize(column + 1, false);
  right_[column] = true;
}

void Table::Print(std::ostream& out, bool header) const {
  size_t ncols = header_.size();
  for (const auto& r : rows_) ncols = std::max(ncols, r.size());
  std::vector<size_t> width(ncols, 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  };
  measure(header_);
  for (const auto& r : rows_) measure(r);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < ncols; ++i) {
      const std::string cell = i < row.size() ? row[i] : std::string();
      const bool right = i < right_.size() && right_[i];
      std::string pad(width[i] - cell.size(), ' ');
      if (i > 0) line += "  ";
      if (right) {
        line += pad + cell;
      } else if (i + 1 < ncols) {
        line += cell + pad;
      } else {
        line += cell;  // no trailing spaces on the last column
      }
    }
    out << line << "\n";
  };
  if (header) print(header_);
  for (const auto& r : rows_) print(r);
}

}  // namespace kerncap::ctl
