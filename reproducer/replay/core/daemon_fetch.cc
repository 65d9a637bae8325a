#include "reproducer/replay/core/daemon_fetch.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "format/kcap_file.h"
#include "common/status_macros.h"
#include "kerncap/v1/control.grpc.pb.h"

namespace kerncap::replay {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

absl::StatusOr<std::string> Target(const std::string& endpoint) {
  std::string target = endpoint;
  if (absl::StartsWith(target, "/")) target = absl::StrCat("unix:", target);
  if (!absl::StartsWith(target, "unix:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--daemon '", endpoint, "': only unix:PATH endpoints are supported; use "
                     "kerncapctl export for remote daemons"));
  }
  return target;
}

std::chrono::system_clock::time_point Deadline(double timeout_s) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
}

std::string LocalHostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

}  // namespace

absl::StatusOr<std::string> FetchCaptureFromDaemon(const std::string& endpoint,
                                                   const std::string& capture_id,
                                                   const std::string& out_path, double timeout_s) {
  KC_ASSIGN_OR_RETURN(std::string target, Target(endpoint));
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = v1::KerncapControl::NewStub(channel);

  v1::GetCaptureRequest greq;
  greq.set_capture_id(capture_id);
  v1::CaptureDetail detail;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(timeout_s));
    KC_RETURN_IF_ERROR(FromGrpc(stub->GetCapture(&ctx, greq, &detail),
                                absl::StrCat("GetCapture(", capture_id, ") from ", target)));
  }
  const std::string id = detail.summary().capture_id().empty() ? detail.manifest().capture_id()
                                                               : detail.summary().capture_id();

  KC_ASSIGN_OR_RETURN(std::unique_ptr<kcap::KcapWriter> writer, kcap::KcapWriter::Create(out_path));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(timeout_s));
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

absl::StatusOr<std::string> DirectStoreDir(const v1::DaemonStatus& status,
                                           absl::string_view local_hostname) {
  const std::string& dir = status.store().path();
  if (dir.empty()) return absl::FailedPreconditionError("kerncapd did not report its store path");
  if (!absl::StartsWith(dir, "/")) {
    return absl::FailedPreconditionError(
        absl::StrCat("kerncapd reports a relative store path '", dir, "'"));
  }
  if (!status.hostname().empty() && !local_hostname.empty() &&
      status.hostname() != local_hostname) {
    return absl::FailedPreconditionError(absl::StrCat("kerncapd runs on host ", status.hostname(),
                                                      ", this is ", local_hostname));
  }
  return dir;
}

absl::StatusOr<std::unique_ptr<CaptureSource>> OpenDaemonCapture(
    const std::string& endpoint, const std::string& capture_id,
    const DaemonSourceOptions& options, std::string* note) {
  KC_ASSIGN_OR_RETURN(std::string target, Target(endpoint));
  std::string why_not = "--via-export";
  if (options.allow_store) {
    auto stub = v1::KerncapControl::NewStub(
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(std::min(options.timeout_s, 30.0)));
    v1::DaemonStatus status;
    absl::Status st = FromGrpc(stub->GetStatus(&ctx, v1::GetStatusRequest(), &status),
                               absl::StrCat("GetStatus from ", target));
    // Unreachable daemon: the export would fail the same way; say it once.
    if (absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st)) return st;
    absl::StatusOr<std::string> dir =
        st.ok() ? DirectStoreDir(status, LocalHostname()) : absl::StatusOr<std::string>(st);
    if (dir.ok()) {
      auto src = CaptureSource::OpenStore(*dir, capture_id);
      if (src.ok()) {
        if (note != nullptr) {
          *note = absl::StrCat("reading ", (*src)->manifest().capture_id(),
                               " directly from kerncapd's store ", *dir);
        }
        return src;
      }
      why_not = std::string(src.status().message());
    } else {
      why_not = std::string(dir.status().message());
    }
  }

  const std::string dir = options.tmp_dir.empty()
                              ? std::filesystem::temp_directory_path().string()
                              : options.tmp_dir;
  const std::string tmp = (std::filesystem::path(dir) /
                           absl::StrCat("kerncap-replay-", ::getpid(), ".kcap"))
                              .string();
  auto id = FetchCaptureFromDaemon(endpoint, capture_id, tmp, options.timeout_s);
  if (!id.ok()) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return id.status();
  }
  auto src = CaptureSource::OpenKcap(tmp, /*unlink_after_open=*/true);
  if (!src.ok()) return src.status();
  (*src)->set_origin("export");
  if (note != nullptr) {
    *note = absl::StrCat("streamed ", *id, " from kerncapd (ExportCapture); not reading its store "
                         "directly: ", why_not);
  }
  return src;
}

}  // namespace kerncap::replay
