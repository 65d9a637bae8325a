#include "client/kerncapctl/output.h"

#include <algorithm>
#include <ctime>

#include "absl/strings/str_format.h"

namespace kerncap::ctl {

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

std::string Hex(uint64_t v) { return absl::StrFormat("0x%x", v); }

void Table::AlignRight(size_t column) {
  if (right_.size() <= column) right_.resize(column + 1, false);
  right_[column] = true;
}

void Table::Print(std::ostream& out) const {
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
  print(header_);
  for (const auto& r : rows_) print(r);
}

}  // namespace kerncap::ctl
