/* A stand-in for libkerncap_agent.so: only its C API for JIT metadata,
 * with the same return codes (agent/core/jit_metadata_registry.h), plus
 * getters the tests read back. Compiled by the tests with cc. */
#include <stdlib.h>
#include <string.h>

static char* g_name;
static char* g_json;
static int g_calls;

int kerncap_agent_set_jit_metadata(const char* kernel_name, const char* json) {
  if (kernel_name == NULL || kernel_name[0] == '\0' || json == NULL) return 1;
  if (strlen(json) > (1u << 20)) return 2;
  char* n = strdup(kernel_name);
  char* j = strdup(json);
  if (n == NULL || j == NULL) {
    free(n);
    free(j);
    return 3;
  }
  free(g_name);
  free(g_json);
  g_name = n;
  g_json = j;
  g_calls++;
  return 0;
}

const char* fake_agent_last_name(void) { return g_name ? g_name : ""; }
const char* fake_agent_last_json(void) { return g_json ? g_json : ""; }
int fake_agent_calls(void) { return g_calls; }
