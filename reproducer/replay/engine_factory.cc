#include "reproducer/replay/engine_factory.h"

#include <iostream>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "reproducer/replay/cuda/cuda_engine.h"
#ifdef KERNCAP_REPLAY_HAVE_HSA
#include "reproducer/replay/hsa/hsa_engine.h"
#endif

namespace kerncap::replay {

std::string EnginePlatform(const CaptureSource& source, const std::string& platform) {
  if (platform == "cuda" || platform == "hsa") return platform;
  return source.manifest().kernel().platform() == v1::PLATFORM_HSA ? "hsa" : "cuda";
}

absl::StatusOr<std::unique_ptr<ReplayEngine>> OpenEngine(const CaptureSource* source,
                                                         const std::string& platform,
                                                         const EngineOptions& options) {
  if (EnginePlatform(*source, platform) == "cuda") {
    KC_ASSIGN_OR_RETURN(std::unique_ptr<CudaEngine> e, CudaEngine::Create(source, options));
    return std::unique_ptr<ReplayEngine>(std::move(e));
  }
#ifndef KERNCAP_REPLAY_HAVE_HSA
  return absl::UnimplementedError(
      "this kerncap-replay was built without the HSA path (ROCm HSA headers or LLVM 15 missing "
      "at build time)");
#else
  if (!options.allow_relocation || options.force_relocation || options.device >= 0) {
    std::cerr << "kerncap-replay: --device, --no-relocate and --force-relocate do not apply to "
                 "HSA replay (first GPU agent, original addresses only)\n";
  }
  KC_ASSIGN_OR_RETURN(std::unique_ptr<hsa::HsaEngine> e, hsa::HsaEngine::Open(*source, options));
  return std::unique_ptr<ReplayEngine>(std::move(e));
#endif
}

}  // namespace kerncap::replay
