// log.h: structured logs, one JSON object per line on stderr:
//   {"ts":"2026-11-29T18:01:02.123Z","level":"info","event":"capture.committed",
//    "capture":"cap-1a2b","bytes":1048576}
// Events are dotted nouns; fields are flat key/values. Debian's Abseil has no
// absl/log, and tools (journald, jq, log shippers) want JSON lines anyway.
#ifndef KERNCAP_COMMON_LOG_H_
#define KERNCAP_COMMON_LOG_H_

#include "absl/strings/string_view.h"

#include "nlohmann/json.hpp"

namespace kerncap::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void SetMinLevel(Level level);
// Parses "debug" | "info" | "warn" | "error"; returns false on anything else.
bool ParseLevel(absl::string_view name, Level* level);

void Write(Level level, absl::string_view event, const nlohmann::json& fields = {});

inline void Debug(absl::string_view e, const nlohmann::json& f = {}) { Write(Level::kDebug, e, f); }
inline void Info(absl::string_view e, const nlohmann::json& f = {}) { Write(Level::kInfo, e, f); }
inline void Warn(absl::string_view e, const nlohmann::json& f = {}) { Write(Level::kWarn, e, f); }
inline void Error(absl::string_view e, const nlohmann::json& f = {}) { Write(Level::kError, e, f); }

}  // namespace kerncap::log

#endif  // KERNCAP_COMMON_LOG_H_
