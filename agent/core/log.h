// log.h: the agent's own logger. It writes one line per event to stderr,
// prefixed "[kerncap-agent <pid>]", because the agent lives inside someone
// else's process: the lines must be recognisable in the app's output, and the
// agent cannot use common/log (Abseil). Level from KERNCAP_AGENT_LOG
// (debug|info|warn|error|off, default warn).
#ifndef KERNCAP_AGENT_CORE_LOG_H_
#define KERNCAP_AGENT_CORE_LOG_H_

namespace kerncap::agent {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Reads KERNCAP_AGENT_LOG again (tests and fork children call this).
void InitLogFromEnv();
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
// printf-style; never throws, never allocates more than one line buffer.
void LogF(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace kerncap::agent

#define KC_ALOG(level, ...)                                                  \
  do {                                                                       \
    if (::kerncap::agent::LogEnabled(::kerncap::agent::LogLevel::level))     \
      ::kerncap::agent::LogF(::kerncap::agent::LogLevel::level, __VA_ARGS__); \
  } while (0)

#endif  // KERNCAP_AGENT_CORE_LOG_H_
