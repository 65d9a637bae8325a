// driver_identity.h: the NVIDIA driver's identity as a GPU engineer knows it,
// for the agent's Hello and every capture's DriverIdentity:
//   driver_version   the kernel driver, "580.159.04": from
//                    /proc/driver/nvidia/version, else NVML (dlopen'ed, best
//                    effort), else "";
//   runtime_version  the CUDA version the driver supports, "13.0", from
//                    cuDriverGetVersion's integer (13000).
// Host-only and std-only (no CUDA headers), so it is unit tested on CPU.
#ifndef KERNCAP_AGENT_CUDA_DRIVER_IDENTITY_H_
#define KERNCAP_AGENT_CUDA_DRIVER_IDENTITY_H_

#include <string>
#include <string_view>

namespace kerncap::agent::cuda {

// The version in the text of /proc/driver/nvidia/version: the first token of
// the "NVRM version:" line shaped like digits.digits[.digits] (both
// "...Kernel Module  580.159.04  ..." and the open module's "...Open Kernel
// Module for x86_64  580.65.06  Release Build ..."). "" when there is none.
std::string ParseNvidiaProcVersion(std::string_view text);

// 13000 -> "13.0", 12040 -> "12.4"; "" for <= 0.
std::string CudaVersionString(int version);

// Kernel driver version: /proc first, then NVML via dlopen("libnvidia-ml.so.1")
// (nvmlInit_v2 + nvmlSystemGetDriverVersion + nvmlShutdown); "" when neither
// answers. Computed once per process (cached).
const std::string& NvidiaKernelDriverVersion();

}  // namespace kerncap::agent::cuda

#endif  // KERNCAP_AGENT_CUDA_DRIVER_IDENTITY_H_
