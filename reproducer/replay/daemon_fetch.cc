#include "reproducer/replay/daemon_fetch.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/kerncapctl/kcap_file.h"
#include "common/status_macros.h"
#include "kerncap/v1/control.grpc.pb.h"

namespace kerncap::replay {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

}  // namespace

absl::StatusOr<std::string> FetchCaptureFromDaemon(const std::string& endpoint,
                                                   const std::string& capture_id,
                                                   const std::string& out_path, double timeout_s) {
  std::string target = endpoint;
  if (absl::StartsWith(target, "/")) target = absl::StrCat("unix:", target);
  if (!absl::StartsWith(target, "unix:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--daemon '", endpoint, "': only unix:PATH endpoints are supported; use "
                     "kerncapctl export for remote daemons"));
  }
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = v1::KerncapControl::NewStub(channel);
  auto deadline = [&] {
    return std::chrono::system_clock::now() +
           std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  };

  v1::GetCaptureRequest greq;
  greq.set_capture_id(capture_id);
  v1::CaptureDetail detail;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    KC_RETURN_IF_ERROR(FromGrpc(stub->GetCapture(&ctx, greq, &detail),
                                absl::StrCat("GetCapture(", capture_id, ") from ", target)));
  }
  const std::string id = detail.summary().capture_id().empty() ? detail.manifest().capture_id()
                                                               : detail.summary().capture_id();

  KC_ASSIGN_OR_RETURN(std::unique_ptr<kcap::KcapWriter> writer, kcap::KcapWriter::Create(out_path));
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline());
  v1::ExportCaptureRequest req;
  req.set_capture_id(id);
  auto reader = stub->ExportCapture(&ctx, req);
  v1::TransferFrame frame;
  uint64_t frames = 0;
  while (reader->Read(&frame)) {
    KC_RETURN_IF_ERROR(writer->Append(frame));
    ++frames;
  }
  KC_RETURN_IF_ERROR(FromGrpc(reader->Finish(), absl::StrCat("ExportCapture(", id, ")")));
  if (frames == 0) return absl::DataLossError(absl::StrCat("ExportCapture(", id, "): empty stream"));
  KC_RETURN_IF_ERROR(writer->Finish());
  return id;
}

}  // namespace kerncap::replay
