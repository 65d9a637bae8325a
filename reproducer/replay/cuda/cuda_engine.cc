#include "reproducer/replay/cuda/cuda_engine.h"

#include "common/status_macros.h"

namespace kerncap::replay {

absl::StatusOr<std::unique_ptr<CudaEngine>> CudaEngine::Create(const CaptureSource* source,
                                                               const EngineOptions& options) {
  SessionOptions so;
  so.device = options.device;
  so.allow_relocation = options.allow_relocation;
  so.force_relocation = options.force_relocation;
  so.code_object_path = options.code_object_path;
  so.launch = options.launch;
  KC_ASSIGN_OR_RETURN(std::unique_ptr<ReplaySession> s, ReplaySession::Create(source, so));
  return std::unique_ptr<CudaEngine>(new CudaEngine(std::move(s)));
}

absl::StatusOr<ReplayInfo> CudaEngine::Run() {
  KC_RETURN_IF_ERROR(session_->Launch().status());
  return session_->info();
}

absl::StatusOr<ValidationReport> CudaEngine::Validate(const CompareOptions& options) {
  return session_->Validate(options);
}

absl::StatusOr<BenchReport> CudaEngine::Bench(const BenchOptions& options) {
  return session_->Bench(options);
}

}  // namespace kerncap::replay
