// sim_test_util.h: helpers shared by the end-to-end tests on the simulated
// HSA runtime (in-process recording sink and real-store variants).
#ifndef KERNCAP_TESTS_HSA_SIM_SIM_TEST_UTIL_H_
#define KERNCAP_TESTS_HSA_SIM_SIM_TEST_UTIL_H_

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

}  // namespace kerncap::hsa_sim

#endif  // KERNCAP_TESTS_HSA_SIM_SIM_TEST_UTIL_H_
