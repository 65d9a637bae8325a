#include "agent/core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kerncap::agent {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
    case LogLevel::kOff: return "off";
  }
  return "?";
}

}  // namespace

void InitLogFromEnv() {
  const char* v = std::getenv("KERNCAP_AGENT_LOG");
  if (v == nullptr) return;
  for (int l = 0; l <= static_cast<int>(LogLevel::kOff); ++l) {
    if (std::strcmp(v, LevelName(static_cast<LogLevel>(l))) == 0) {
      g_level.store(l, std::memory_order_relaxed);
      return;
    }
  }
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed) && level != LogLevel::kOff;
}

void LogF(LogLevel level, const char* fmt, ...) {
  char line[1024];
  int n = std::snprintf(line, sizeof(line), "[kerncap-agent %d] %s: ", static_cast<int>(getpid()),
                        LevelName(level));
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(line + n, sizeof(line) - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = std::strlen(line);
  line[len++] = '\n';
  // One write(2) per line so concurrent lines from app threads do not interleave.
  ssize_t ignored = ::write(STDERR_FILENO, line, len);
  (void)ignored;
}

}  // namespace kerncap::agent
