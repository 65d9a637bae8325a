// fake_driver_libs.cc: stand-ins for libcuda.so.1 and libcupti.so.N for the
// CPU tests of how the agent loads them (agent/cuda/no_driver_test.cc). Built
// twice from this file:
//   KC_FAKE_LIBCUDA   exports every driver entry point the agent requires
//                     (driver_api.h), each failing with CUDA_ERROR_UNKNOWN,
//                     and cuDriverGetVersion answering $KERNCAP_FAKE_CUDA_VERSION
//                     (e.g. 12080; unset: 13000).
//   KC_FAKE_LIBCUPTI  exports every CUPTI entry point the agent requires
//                     (cupti_api.h), each failing with CUPTI_ERROR_UNKNOWN, so
//                     the agent gets as far as cuptiSubscribe and stays inactive.
// Each entry is defined under its exported symbol name with an asm label,
// which is what lets one X-macro list drive both the agent and the fake.
#include <cstdlib>

#if defined(KC_FAKE_LIBCUDA)
#include "agent/cuda/driver_api.h"
#include "common/cuda/driver_library.h"

#define KC_FAKE_ENTRY(name)                                                     \
  extern "C" __attribute__((visibility("default"))) int kc_fake_##name(void) \
      __asm__(KC_CUDA_SYMBOL(name));                                            \
  int kc_fake_##name(void) { return 999; /* CUDA_ERROR_UNKNOWN */ }
KC_AGENT_CUDA_DRIVER_FUNCTIONS(KC_FAKE_ENTRY)

extern "C" __attribute__((visibility("default"))) CUresult cuDriverGetVersion(int* version) {
  const char* v = std::getenv("KERNCAP_FAKE_CUDA_VERSION");
  *version = v != nullptr ? std::atoi(v) : 13000;
  return CUDA_SUCCESS;
}

#elif defined(KC_FAKE_LIBCUPTI)
#include "agent/cuda/cupti_api.h"
#include "common/cuda/driver_library.h"

#define KC_FAKE_ENTRY(name)                                                     \
  extern "C" __attribute__((visibility("default"))) int kc_fake_##name(void) \
      __asm__(KC_CUDA_SYMBOL(name));                                            \
  int kc_fake_##name(void) { return 999; /* CUPTI_ERROR_UNKNOWN */ }
KC_AGENT_CUPTI_FUNCTIONS(KC_FAKE_ENTRY)

#else
#error "define KC_FAKE_LIBCUDA or KC_FAKE_LIBCUPTI"
#endif
