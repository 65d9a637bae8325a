#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <string>

namespace kerncap::log {
namespace {

std::atomic<int> g_min_level{static_cast<int>(Level::kInfo)};

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
}

std::string NowIso8601() {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm;
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03lldZ", buf, static_cast<long long>(ms));
  return out;
}

}  // namespace

void SetMinLevel(Level level) { g_min_level.store(static_cast<int>(level)); }

bool ParseLevel(absl::string_view name, Level* level) {
  if (name == "debug") *level = Level::kDebug;
  else if (name == "info") *level = Level::kInfo;
  else if (name == "warn") *level = Level::kWarn;
  else if (name == "error") *level = Level::kError;
  else return false;
  return true;
}

void Write(Level level, absl::string_view event, const nlohmann::json& fields) {
  if (static_cast<int>(level) < g_min_level.load(std::memory_order_relaxed)) return;
  nlohmann::json line = {{"ts", NowIso8601()}, {"level", LevelName(level)}, {"event", event}};
  if (fields.is_object()) {
    for (auto it = fields.begin(); it != fields.end(); ++it) line[it.key()] = it.value();
  }
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.push_back('\n');
  // One write(2) per line keeps lines whole when several threads log.
  ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

}  // namespace kerncap::log
