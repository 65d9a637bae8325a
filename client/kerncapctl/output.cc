#include "client/kerncapctl/output.h"

#include <algorithm>
#include <ctime>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
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

// One step of a field path: a member name, an index, or every element.
struct Step {
  enum Kind { kName, kIndex, kAll } kind = kName;
  std::string name;
  size_t index = 0;
};

absl::StatusOr<std::vector<Step>> ParsePath(absl::string_view path) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("field \"", path, "\": ", why,
                                                   " (kerncapctl help output)"));
  };
  std::vector<Step> steps;
  size_t i = 0;
  if (path.empty()) return bad("empty");
  if (path == ".") return steps;  // the whole value
  while (i < path.size()) {
    if (path[i] == '[') {
      size_t end = path.find(']', i);
      if (end == absl::string_view::npos) return bad("unclosed [");
      absl::string_view inner = path.substr(i + 1, end - i - 1);
      Step st;
      if (inner == "*") {
        st.kind = Step::kAll;
      } else {
        st.kind = Step::kIndex;
        if (inner.empty() || inner.size() > 9) return bad("expected [N] or [*]");
        for (char c : inner) {
          if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return bad("expected [N] or [*]");
          st.index = st.index * 10 + static_cast<size_t>(c - '0');
        }
      }
      steps.push_back(st);
      i = end + 1;
      continue;
    }
    if (path[i] == '.') ++i;
    else if (i != 0) return bad("expected . or [ between steps");
    size_t start = i;
    while (i < path.size() && path[i] != '.' && path[i] != '[') {
      const unsigned char c = static_cast<unsigned char>(path[i]);
      if (!(absl::ascii_isalnum(c) || c == '_' || c == '-')) {
        return bad(absl::StrCat("unexpected character '", std::string(1, path[i]), "'"));
      }
      ++i;
    }
    if (i == start) return bad("empty field name");
    Step st;
    st.name = std::string(path.substr(start, i - start));
    steps.push_back(st);
  }
  return steps;
}

void Walk(const nlohmann::json& v, const std::vector<Step>& steps, size_t at,
          std::vector<nlohmann::json>* out) {
  if (at == steps.size()) {
    out->push_back(v);
    return;
  }
  const Step& st = steps[at];
  if (st.kind == Step::kName) {
    if (v.is_object() && v.contains(st.name)) Walk(v[st.name], steps, at + 1, out);
  } else if (st.kind == Step::kIndex) {
    if (v.is_array() && st.index < v.size()) Walk(v[st.index], steps, at + 1, out);
  } else if (v.is_array()) {
    for (const nlohmann::json& e : v) Walk(e, steps, at + 1, out);
  } else if (v.is_object()) {
    for (const auto& e : v.items()) Walk(e.value(), steps, at + 1, out);
  }
}

// A selected value as text: strings bare, the rest as compact JSON.
std::string ValueText(const std::vector<nlohmann::json>& values, const char* sep) {
  if (values.empty()) return "<none>";
  std::string text;
  for (const nlohmann::json& v : values) {
    if (!text.empty()) text += sep;
    text += v.is_string() ? v.get<std::string>() : JsonLine(v);
  }
  return text;
}

struct Column {
  std::string header;
  std::string path;
};

absl::StatusOr<std::vector<Column>> ParseColumns(absl::string_view spec) {
  std::vector<Column> cols;
  size_t i = 0;
  while (i <= spec.size()) {
    size_t end = spec.find(',', i);
    if (end == absl::string_view::npos) end = spec.size();
    absl::string_view part = spec.substr(i, end - i);
    size_t colon = part.find(':');
    if (colon == absl::string_view::npos || colon == 0 || colon + 1 == part.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "-o custom-columns: \"", part, "\" is not HEADER:FIELD (kerncapctl help output)"));
    }
    Column c{std::string(part.substr(0, colon)), std::string(part.substr(colon + 1))};
    absl::Status ok = ParsePath(c.path).status();
    if (!ok.ok()) return absl::InvalidArgumentError(absl::StrCat("-o custom-columns: ", ok.message()));
    cols.push_back(std::move(c));
    i = end + 1;
  }
  return cols;
}

// The literal and {PATH} pieces of a jsonpath template.
absl::StatusOr<std::vector<std::pair<bool, std::string>>> ParseTemplate(absl::string_view t) {
  std::vector<std::pair<bool, std::string>> pieces;  // (is_path, text)
  std::string lit;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '\\' && i + 1 < t.size() && (t[i + 1] == 'n' || t[i + 1] == 't')) {
      lit += t[i + 1] == 'n' ? '\n' : '\t';
      ++i;
    } else if (t[i] == '{') {
      size_t end = t.find('}', i);
      if (end == absl::string_view::npos) {
        return absl::InvalidArgumentError("-o jsonpath: unclosed { (kerncapctl help output)");
      }
      std::string path(t.substr(i + 1, end - i - 1));
      absl::Status ok = ParsePath(path).status();
      if (!ok.ok()) return absl::InvalidArgumentError(absl::StrCat("-o jsonpath: ", ok.message()));
      if (!lit.empty()) pieces.emplace_back(false, lit);
      lit.clear();
      pieces.emplace_back(true, path);
      i = end;
    } else if (t[i] == '}') {
      return absl::InvalidArgumentError("-o jsonpath: } without { (kerncapctl help output)");
    } else {
      lit += t[i];
    }
  }
  if (!lit.empty()) pieces.emplace_back(false, lit);
  return pieces;
}

}  // namespace

absl::StatusOr<std::vector<nlohmann::json>> SelectField(const nlohmann::json& doc,
                                                        absl::string_view path) {
  absl::StatusOr<std::vector<Step>> steps = ParsePath(path);
  if (!steps.ok()) return steps.status();
  std::vector<nlohmann::json> out;
  Walk(doc, *steps, 0, &out);
  return out;
}

absl::StatusOr<std::string> JsonPathText(const nlohmann::json& doc, absl::string_view tmpl) {
  auto pieces = ParseTemplate(tmpl);
  if (!pieces.ok()) return pieces.status();
  std::string out;
  for (const auto& [is_path, text] : *pieces) {
    if (!is_path) {
      out += text;
      continue;
    }
    auto values = SelectField(doc, text);
    if (!values.ok()) return values.status();
    out += ValueText(*values, " ");
  }
  return out;
}

std::vector<nlohmann::json> ListItems(const nlohmann::json& doc) {
  if (doc.is_array()) return doc.get<std::vector<nlohmann::json>>();
  if (doc.is_object()) {
    for (const auto& e : doc.items()) {
      if (e.value().is_array()) return e.value().get<std::vector<nlohmann::json>>();
    }
  }
  return {doc};
}

absl::StatusOr<std::vector<size_t>> SortOrder(const std::vector<nlohmann::json>& items,
                                              absl::string_view path) {
  absl::StatusOr<std::vector<Step>> steps = ParsePath(path);
  if (!steps.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--sort-by: ", steps.status().message()));
  }
  std::vector<std::optional<nlohmann::json>> keys;
  bool any = false;
  for (const nlohmann::json& item : items) {
    std::vector<nlohmann::json> v;
    Walk(item, *steps, 0, &v);
    keys.push_back(v.empty() ? std::nullopt : std::optional<nlohmann::json>(v[0]));
    any = any || !v.empty();
  }
  if (!any) {
    std::vector<std::string> fields;
    if (!items.empty() && items[0].is_object()) {
      for (const auto& e : items[0].items()) fields.push_back(e.key());
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--sort-by: no item has the field \"", path, "\"",
        fields.empty() ? std::string() : absl::StrCat(" (fields: ", absl::StrJoin(fields, ", "), ")")));
  }
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto less = [&](size_t a, size_t b) {
    const auto& x = keys[a];
    const auto& y = keys[b];
    if (!x || !y) return !x && y;  // missing first
    if (x->is_number() && y->is_number()) return x->get<double>() < y->get<double>();
    auto text = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : JsonLine(v); };
    return text(*x) < text(*y);
  };
  std::stable_sort(order.begin(), order.end(), less);
  return order;
}

absl::StatusOr<OutputSpec> ParseOutputSpec(absl::string_view text) {
  OutputSpec spec;
  if (absl::ConsumePrefix(&text, "jsonpath=")) {
    spec.format = Format::kJsonPath;
    spec.spec = std::string(text);
    if (absl::Status s = ParseTemplate(text).status(); !s.ok()) return s;
    return spec;
  }
  if (absl::ConsumePrefix(&text, "custom-columns=")) {
    spec.format = Format::kCustomColumns;
    spec.spec = std::string(text);
    if (absl::Status s = ParseColumns(text).status(); !s.ok()) return s;
    return spec;
  }
  absl::StatusOr<Format> f = ParseFormat(text);
  if (!f.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "-o/--output: expected one of table, wide, json, yaml, name, jsonpath=TEMPLATE, "
        "custom-columns=SPEC; got \"", text, "\""));
  }
  spec.format = *f;
  return spec;
}

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
  if (o.format == Format::kJsonPath) {
    absl::StatusOr<std::string> text = JsonPathText(doc, o.spec);  // checked while parsing
    o.out << (text.ok() ? *text : std::string(text.status().message())) << "\n";
    return;
  }
  if (o.format == Format::kCustomColumns) {
    absl::StatusOr<std::vector<Column>> cols = ParseColumns(o.spec);  // checked while parsing
    if (!cols.ok()) return;
    std::vector<std::string> header;
    for (const Column& c : *cols) header.push_back(c.header);
    Table t(header);
    for (const nlohmann::json& item : ListItems(doc)) {
      std::vector<std::string> row;
      for (const Column& c : *cols) {
        absl::StatusOr<std::vector<nlohmann::json>> v = SelectField(item, c.path);
        row.push_back(v.ok() ? ValueText(*v, ",") : "<none>");
      }
      t.AddRow(std::move(row));
    }
    t.Print(o);
    return;
  }
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
