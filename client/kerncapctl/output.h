// output.h: human-readable formatting for kerncapctl (aligned tables, sizes,
// times). Machine-readable output (--json) does not go through here.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_OUTPUT_H_
#define KERNCAP_CLIENT_KERNCAPCTL_OUTPUT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace kerncap::ctl {

// 1536 -> "1.5 KiB"; below 1 KiB plain bytes ("512 B").
std::string HumanBytes(uint64_t bytes);
// Unix milliseconds -> "2026-11-29 18:01:02" in local time; "-" for 0.
std::string FormatTime(int64_t unix_ms);
// "12.5%"; "-" when whole is 0.
std::string Percent(uint64_t part, uint64_t whole);
// 0x7f3a00000000 style.
std::string Hex(uint64_t v);

// Columns padded to their widest cell; numeric-looking columns can be
// right-aligned. Rows with fewer cells are padded.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void AlignRight(size_t column);
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  size_t rows() const { return rows_.size(); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_OUTPUT_H_
