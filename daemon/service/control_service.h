// control_service.h: kerncapd's public gRPC API (kerncap.v1.KerncapControl,
// proto/kerncap/v1/control.proto) over the store, the agent link and the
// event bus.
//
// Every handler: checks the bearer token (TCP peers), learns who the caller
// is (caller_identity.h) and acts with the caller's rights only: it reaches
// the caller's own agents, arms, captures and substitutions (all of them for
// a privileged caller), touches host paths the request names with the
// caller's file-system identity (common/fs_identity.h), and runs store-wide
// maintenance only for a privileged caller. It validates the request
// (request_validation.h), does the work through absl::Status-returning calls,
// and converts the result once (grpc_status.h). Errors are logged as
// "rpc.error" lines; the daemon keeps serving after any bad request. Another
// user's object is answered as unknown (NotFound), so ids do not leak.
//
// Thread-safety: gRPC calls handlers concurrently; the service holds no
// mutable state besides the shutdown flag. Store, AgentControl and EventBus
// are thread-safe and must outlive the service.
#ifndef KERNCAP_DAEMON_SERVICE_CONTROL_SERVICE_H_
#define KERNCAP_DAEMON_SERVICE_CONTROL_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/agent_link/agent_control.h"
#include "daemon/capture_sink.h"
#include "daemon/event_bus.h"
#include "daemon/caller.h"
#include "daemon/service/auth.h"
#include "daemon/service/caller_identity.h"
#include "daemon/store/store.h"
#include "kerncap/v1/control.grpc.pb.h"

namespace kerncap::service {

// Facts about the running daemon reported by GetStatus.
struct DaemonInfo {
  std::string version;
  int64_t started_unix_ms = 0;
  uint32_t pid = 0;
  std::string hostname;
  std::string unix_socket;
  std::string tcp_listen;
  std::string agent_socket;
};

// Imports a reference-Kerncap capture folder into `sink` and returns the new
// capture id (daemon/import/reference_capture.h in kerncapd).
using ReferenceImporter =
    std::function<absl::StatusOr<std::string>(const std::string& folder, CaptureSink& sink)>;

struct ControlServiceOptions {
  DaemonInfo info;
  // Null: ImportReferenceCapture answers UNIMPLEMENTED.
  ReferenceImporter reference_importer;
  // Null: no token check.
  const TokenAuthorizer* authorizer = nullptr;
  // What TCP peers act as (ResolveTcpIdentity).
  TcpIdentity tcp_identity;
  // kerncap-replay, for the preflight of a substitution (empty: looked up
  // beside this binary, then on PATH).
  std::string replay_binary;
};

class ControlService final : public v1::KerncapControl::Service {
 public:
  ControlService(store::Store& store, AgentControl& agents, EventBus& bus,
                 ControlServiceOptions options);

  // Ends open WatchEvents streams within ~200 ms and makes new ones return at
  // once. Call before grpc::Server::Shutdown so it does not wait on them.
  void BeginShutdown() { shutting_down_.store(true); }

  grpc::Status GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest* request,
                         v1::DaemonStatus* response) override;
  grpc::Status ListAgents(grpc::ServerContext* context, const v1::ListAgentsRequest* request,
                          v1::ListAgentsResponse* response) override;
  grpc::Status ListKernels(grpc::ServerContext* context, const v1::ListKernelsRequest* request,
                           v1::ListKernelsResponse* response) override;
  grpc::Status Arm(grpc::ServerContext* context, const v1::ArmRequest* request,
                   v1::ArmInfo* response) override;
  grpc::Status Disarm(grpc::ServerContext* context, const v1::DisarmRequest* request,
                      v1::DisarmResponse* response) override;
  grpc::Status ListArms(grpc::ServerContext* context, const v1::ListArmsRequest* request,
                        v1::ListArmsResponse* response) override;
  grpc::Status Substitute(grpc::ServerContext* context, const v1::SubstituteRequest* request,
                          v1::SubstitutionInfo* response) override;
  grpc::Status Unsubstitute(grpc::ServerContext* context, const v1::UnsubstituteRequest* request,
                            v1::SubstitutionInfo* response) override;
  grpc::Status ListSubstitutions(grpc::ServerContext* context,
                                 const v1::ListSubstitutionsRequest* request,
                                 v1::ListSubstitutionsResponse* response) override;
  grpc::Status ListCaptures(grpc::ServerContext* context, const v1::ListCapturesRequest* request,
                            v1::ListCapturesResponse* response) override;
  grpc::Status GetCapture(grpc::ServerContext* context, const v1::GetCaptureRequest* request,
                          v1::CaptureDetail* response) override;
  grpc::Status DeleteCapture(grpc::ServerContext* context, const v1::DeleteCaptureRequest* request,
                             v1::DeleteCaptureResponse* response) override;
  grpc::Status WatchEvents(grpc::ServerContext* context, const v1::WatchEventsRequest* request,
                           grpc::ServerWriter<v1::Event>* writer) override;
  grpc::Status GenerateReproducer(grpc::ServerContext* context,
                                  const v1::GenerateReproducerRequest* request,
                                  grpc::ServerWriter<v1::ReproducerFile>* writer) override;
  grpc::Status ExportCapture(grpc::ServerContext* context, const v1::ExportCaptureRequest* request,
                             grpc::ServerWriter<v1::TransferFrame>* writer) override;
  grpc::Status FindMissingChunks(grpc::ServerContext* context,
                                 const v1::FindMissingChunksRequest* request,
                                 v1::FindMissingChunksResponse* response) override;
  grpc::Status ImportCapture(grpc::ServerContext* context,
                             grpc::ServerReader<v1::TransferFrame>* reader,
                             v1::ImportCaptureResponse* response) override;
  grpc::Status ImportReferenceCapture(grpc::ServerContext* context,
                                      const v1::ImportReferenceCaptureRequest* request,
                                      v1::ImportCaptureResponse* response) override;
  grpc::Status RunGc(grpc::ServerContext* context, const v1::RunGcRequest* request,
                     v1::GcReport* response) override;
  grpc::Status VerifyStore(grpc::ServerContext* context, const v1::VerifyStoreRequest* request,
                           grpc::ServerWriter<v1::VerifyProgress>* writer) override;

 private:
  // The token check, then who the caller is.
  absl::StatusOr<Caller> Authorize(const grpc::ServerContext& context) const;
  // A capture id (or unique prefix) of a capture the caller may reach;
  // NotFound, as for an unknown id, otherwise.
  absl::StatusOr<std::string> ResolveCapture(const Caller& caller, const std::string& id_or_prefix);
  // Validates the variant against the caller's preflight capture with
  // kerncap-replay on this node; what was checked, or why not.
  absl::StatusOr<std::string> RunPreflight(const Caller& caller,
                                           const v1::SubstituteRequest& request);
  // Logs a failed RPC and converts the status (the one exit of every handler).
  grpc::Status Finish(const char* method, const grpc::ServerContext& context,
                      const absl::Status& status) const;
  void PublishCommitted(const v1::CaptureManifest& manifest);

  absl::Status DoImport(grpc::ServerContext* context, const Caller& caller,
                        grpc::ServerReader<v1::TransferFrame>* reader,
                        v1::ImportCaptureResponse* response);
  // Streams a capture's export frames to `write` (false: stop, the reader
  // went away). Used by ExportCapture and, into a .kcap, by
  // GenerateReproducer.
  absl::Status DoExport(grpc::ServerContext* context, const Caller& caller,
                        const v1::ExportCaptureRequest& request,
                        const std::function<bool(const v1::TransferFrame&)>& write);
  absl::Status DoGenerateReproducer(grpc::ServerContext* context, const Caller& caller,
                                    const v1::GenerateReproducerRequest& request,
                                    grpc::ServerWriter<v1::ReproducerFile>* writer);

  store::Store& store_;
  AgentControl& agents_;
  EventBus& bus_;
  const ControlServiceOptions options_;
  std::atomic<bool> shutting_down_{false};
};

}  // namespace kerncap::service

#endif  // KERNCAP_DAEMON_SERVICE_CONTROL_SERVICE_H_
