// agent_env.h: the environment variables every agent backend (CUDA, HSA)
// reads, parsed in one place so both backends agree on names and defaults.
#ifndef KERNCAP_AGENT_CORE_AGENT_ENV_H_
#define KERNCAP_AGENT_CORE_AGENT_ENV_H_

namespace kerncap::agent {

// The integer value of environment variable `name`, or `fallback` when it is
// unset or empty.
int EnvInt(const char* name, int fallback);

// Settings shared by all backends; each backend's AgentConfig extends it.
struct CommonAgentConfig {
  bool disabled = false;        // KERNCAP_AGENT_DISABLE=1: load but do nothing
  bool host_regions = true;     // KERNCAP_AGENT_HOST_REGIONS=0: skip pinned host memory
  int gate_timeout_ms = 10000;  // KERNCAP_AGENT_GATE_TIMEOUT_MS
  bool connect = true;          // KERNCAP_AGENT_NO_DAEMON=1: no link (tracking only)
};
CommonAgentConfig CommonConfigFromEnv();

}  // namespace kerncap::agent

#endif  // KERNCAP_AGENT_CORE_AGENT_ENV_H_
