// sim_test_util.h: helpers shared by the end-to-end tests on the simulated
// HSA runtime (in-process recording sink and real-store variants).
#ifndef KERNCAP_TESTS_HSA_SIM_SIM_TEST_UTIL_H_
#define KERNCAP_TESTS_HSA_SIM_SIM_TEST_UTIL_H_

#include <dlfcn.h>

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

namespace kerncap::hsa_sim {

// Whole file as bytes ("" when unreadable; the test then fails on content).
inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A test kernel's code object, compiled at build time into `dir`.
inline std::string TestCodeObject(const std::string& dir, const std::string& name) {
  return ReadWholeFile(dir + "/" + name);
}

// n floats base, base+step, ... in the simulated device memory of `app`.
template <typename App>
float* DeviceFloats(App& app, size_t n, float base, float step) {
  auto* p = static_cast<float*>(app.DeviceAlloc(n * sizeof(float)));
  for (size_t i = 0; i < n; ++i) p[i] = base + step * static_cast<float>(i);
  return p;
}

// kerncap_agent_hsa_wait_arms of the HSA agent library the simulated
// runtime loaded (`agent_so`): 1 once the agent holds `n` arms, 0 on
// timeout, -1 when the function cannot be found.
inline int WaitAgentArms(const char* agent_so, int n, int timeout_ms) {
  using WaitFn = int (*)(int, int);
  auto wait = reinterpret_cast<WaitFn>(dlsym(RTLD_DEFAULT, "kerncap_agent_hsa_wait_arms"));
  if (wait == nullptr) {
    void* h = dlopen(agent_so, RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) return -1;
    wait = reinterpret_cast<WaitFn>(dlsym(h, "kerncap_agent_hsa_wait_arms"));
    dlclose(h);  // the runtime's own handle keeps it loaded
  }
  return wait == nullptr ? -1 : wait(n, timeout_ms);
}

}  // namespace kerncap::hsa_sim

#endif  // KERNCAP_TESTS_HSA_SIM_SIM_TEST_UTIL_H_
