// host_kernels.h: host implementations of the kernels in kernels/*.hip, for
// the simulated runtime. Each reads its explicit arguments from the kernarg
// segment at the offsets the compiler recorded in the code object's metadata
// (DispatchContext::Arg), so a wrong kernarg layout in capture or replay
// produces wrong results.
#ifndef KERNCAP_TESTS_HSA_SIM_HOST_KERNELS_H_
#define KERNCAP_TESTS_HSA_SIM_HOST_KERNELS_H_

#include "tests/hsa_sim/sim_runtime.h"

namespace kerncap::hsa_sim {

void RegisterTestKernels(SimRuntime& sim);

}  // namespace kerncap::hsa_sim

#endif  // KERNCAP_TESTS_HSA_SIM_HOST_KERNELS_H_
