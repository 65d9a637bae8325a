#include "agent/core/agent_env.h"

#include <cstdlib>

namespace kerncap::agent {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::atoi(v);
}

CommonAgentConfig CommonConfigFromEnv() {
  CommonAgentConfig c;
  c.disabled = EnvInt("KERNCAP_AGENT_DISABLE", 0) != 0;
  c.host_regions = EnvInt("KERNCAP_AGENT_HOST_REGIONS", 1) != 0;
  c.gate_timeout_ms = EnvInt("KERNCAP_AGENT_GATE_TIMEOUT_MS", c.gate_timeout_ms);
  c.connect = EnvInt("KERNCAP_AGENT_NO_DAEMON", 0) == 0;
  return c;
}

}  // namespace kerncap::agent
