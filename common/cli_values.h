// cli_values.h: CLI11 validators for numeric options that tell a type error
// from a range error and name what was given, for every binary's command
// line (kerncapctl, kerncapd):
//   --count=abc  ->  --count: expected a whole number (1 to 1000000), got "abc"
//   --device=-3  ->  --device: must be 0 to 2147483647, got -3
// (CLI11's own CLI::Range reports both as "Value abc not in range 0 to
// 1.79769e+308".) CLI11 puts the option's name before the message.
#ifndef KERNCAP_COMMON_CLI_VALUES_H_
#define KERNCAP_COMMON_CLI_VALUES_H_

#include <cmath>
#include <limits>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kerncap::cli {

// An integer in [min, max]; "N or more" when max is the largest long long.
inline CLI::Validator WholeNumber(long long min, long long max) {
  std::string range = max == std::numeric_limits<long long>::max()
                          ? absl::StrCat(min, " or more")
                          : absl::StrCat(min, " to ", max);
  return CLI::Validator(
      [min, max, range](std::string& value) -> std::string {
        long long v = 0;
        if (!absl::SimpleAtoi(value, &v)) {
          return absl::StrCat("expected a whole number (", range, "), got \"", value, "\"");
        }
        if (v < min || v > max) return absl::StrCat("must be ", range, ", got ", value);
        return "";
      },
      // No description: the type column stays "INT"; the range is in the
      // error and, where it matters, in the option's help.
      "");
}

// A number in [min, max] (no upper bound when max is infinite; "inf" is a
// number, "nan" is not).
inline CLI::Validator Number(double min,
                             double max = std::numeric_limits<double>::infinity()) {
  std::string range = std::isinf(max) ? absl::StrCat(min, " or more")
                                      : absl::StrCat(min, " to ", max);
  return CLI::Validator(
      [min, max, range](std::string& value) -> std::string {
        double v = 0;
        if (!absl::SimpleAtod(value, &v) || std::isnan(v)) {
          return absl::StrCat("expected a number (", range, "), got \"", value, "\"");
        }
        if (v < min || v > max) return absl::StrCat("must be ", range, ", got ", value);
        return "";
      },
      "");
}

}  // namespace kerncap::cli

#endif  // KERNCAP_COMMON_CLI_VALUES_H_
