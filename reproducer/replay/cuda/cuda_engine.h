// cuda_engine.h: the CUDA replay engine (core/engine.h) over ReplaySession
// (replay_session.h), which does the work.
#ifndef KERNCAP_REPRODUCER_REPLAY_CUDA_CUDA_ENGINE_H_
#define KERNCAP_REPRODUCER_REPLAY_CUDA_CUDA_ENGINE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "reproducer/replay/core/capture_source.h"
#include "reproducer/replay/core/engine.h"
#include "reproducer/replay/cuda/replay_session.h"

namespace kerncap::replay {

class CudaEngine : public ReplayEngine {
 public:
  // `source` must outlive the engine.
  static absl::StatusOr<std::unique_ptr<CudaEngine>> Create(const CaptureSource* source,
                                                            const EngineOptions& options);
  const char* platform() const override { return "cuda"; }
  absl::StatusOr<ReplayInfo> Run() override;
  absl::StatusOr<ValidationReport> Validate(const CompareOptions& options) override;
  absl::StatusOr<BenchReport> Bench(const BenchOptions& options) override;

  ReplaySession& session() { return *session_; }

 private:
  explicit CudaEngine(std::unique_ptr<ReplaySession> s) : session_(std::move(s)) {}
  std::unique_ptr<ReplaySession> session_;
};

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CUDA_CUDA_ENGINE_H_
