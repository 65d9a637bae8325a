// engine_factory.h: the one place kerncap-replay chooses its engine: the
// HSA engine (hsa/hsa_engine.h) for PLATFORM_HSA captures or --platform=hsa,
// else the CUDA engine (cuda/cuda_engine.h).
#ifndef KERNCAP_REPRODUCER_REPLAY_ENGINE_FACTORY_H_
#define KERNCAP_REPRODUCER_REPLAY_ENGINE_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "reproducer/replay/core/capture_source.h"
#include "reproducer/replay/core/engine.h"

namespace kerncap::replay {

// "auto" (from the capture), "cuda" or "hsa". `source` must outlive the
// engine. An HSA capture in a binary built without the HSA engine is
// Unimplemented, naming what was missing at build time.
absl::StatusOr<std::unique_ptr<ReplayEngine>> OpenEngine(const CaptureSource* source,
                                                         const std::string& platform,
                                                         const EngineOptions& options);

// The platform OpenEngine picks ("cuda" or "hsa").
std::string EnginePlatform(const CaptureSource& source, const std::string& platform);

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_ENGINE_FACTORY_H_
