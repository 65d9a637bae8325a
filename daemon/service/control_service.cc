#include "daemon/service/control_service.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "format/kcap_file.h"
#include "common/exit_codes.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/control/api_selector.h"
#include "common/status_macros.h"
#include "common/control/api_names.h"
#include "common/control/grpc_status.h"
#include "common/control/limits.h"
#include "common/control/replay_lookup.h"
#include "format/manifest_util.h"
#include "common/fs_identity.h"
#include "daemon/service/caller_sink.h"
#include "daemon/service/request_validation.h"
#include "reproducer/generator/tool_runner.h"
#include "daemon/store/catalog.h"
#include "format/manifest_check.h"
#include "format/store_reader.h"
#include "reproducer/generator/generator.h"
#include "reproducer/generator/project_stream.h"

namespace kerncap::service {
namespace {

// A preflight validates one dispatch; a replay that takes longer is stuck.
constexpr int kPreflightTimeoutSeconds = 600;

// How often a WatchEvents stream looks at cancellation and shutdown.
constexpr absl::Duration kWatchPollInterval = absl::Milliseconds(200);

absl::Status Cancelled(absl::string_view what) {
  return absl::CancelledError(absl::StrCat(what, " cancelled by the client"));
}

}  // namespace

ControlService::ControlService(store::Store& store, AgentControl& agents, EventBus& bus,
                               ControlServiceOptions options)
    : store_(store), agents_(agents), bus_(bus), options_(std::move(options)) {}

absl::StatusOr<Caller> ControlService::Authorize(const grpc::ServerContext& context) const {
  if (options_.authorizer != nullptr) KC_RETURN_IF_ERROR(options_.authorizer->Check(context));
  return CallerFromPeer(context.peer(), options_.tcp_identity);
}

absl::StatusOr<std::string> ControlService::ResolveCapture(const Caller& caller,
                                                           const std::string& id_or_prefix) {
  KC_RETURN_IF_ERROR(ValidateId(id_or_prefix, "capture_id"));
  KC_ASSIGN_OR_RETURN(std::string id, store_.ResolveCaptureId(id_or_prefix));
  if (caller.privileged) return id;
  KC_ASSIGN_OR_RETURN(v1::CaptureManifest manifest, store_.GetManifest(id));
  if (!caller.MayReach(manifest.owner_uid())) {
    // Answered as an unknown id: another user's captures are not even named.
    return absl::NotFoundError(absl::StrCat("no capture matches '", id_or_prefix, "'"));
  }
  return id;
}

grpc::Status ControlService::Finish(const char* method, const grpc::ServerContext& context,
                                    const absl::Status& status) const {
  if (!status.ok()) {
    const bool quiet = status.code() == absl::StatusCode::kNotFound ||
                       status.code() == absl::StatusCode::kCancelled ||
                       status.code() == absl::StatusCode::kUnimplemented;
    log::Write(quiet ? log::Level::kDebug : log::Level::kWarn, "rpc.error",
               {{"method", method},
                {"code", absl::StatusCodeToString(status.code())},
                {"message", std::string(status.message())},
                {"peer", context.peer()}});
  }
  return ToGrpcStatus(status);
}

void ControlService::PublishCommitted(const v1::CaptureManifest& manifest) {
  v1::Event event;
  *event.mutable_capture_committed() = store::Catalog::Summarize(manifest);
  event.set_owner_uid(manifest.owner_uid());
  bus_.Publish(std::move(event));
}

// ---- status and agents ----

grpc::Status ControlService::GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest*,
                                       v1::DaemonStatus* response) {
  absl::StatusOr<Caller> caller = Authorize(*context);
  absl::Status status = caller.status();
  if (status.ok()) {
    const DaemonInfo& info = options_.info;
    response->set_version(info.version);
    response->set_started_unix_ms(info.started_unix_ms);
    response->set_pid(info.pid);
    response->set_hostname(info.hostname);
    response->set_unix_socket(info.unix_socket);
    response->set_tcp_listen(info.tcp_listen);
    response->set_agent_socket(info.agent_socket);
    response->set_api_version(api::kApiVersion);
    response->set_store_format(static_cast<uint32_t>(store::kStoreFormat));
    *response->mutable_store() = store_.Stats();
    // What this caller can reach, as every other listing counts it.
    response->set_agents(static_cast<uint32_t>(agents_.ListAgents(*caller).size()));
    response->set_active_arms(static_cast<uint32_t>(agents_.ListArms(false, *caller).size()));
    v1::CallerIdentity* who = response->mutable_caller();
    who->set_uid(caller->uid);
    who->set_gid(caller->gid);
    who->set_privileged(caller->privileged);
    who->set_description(caller->description);
    response->set_ingests_in_flight(
        static_cast<uint32_t>(std::max(store_.ingests_in_flight(), agents_.IngestsInFlight())));
  }
  return Finish("GetStatus", *context, status);
}

grpc::Status ControlService::ListAgents(grpc::ServerContext* context, const v1::ListAgentsRequest*,
                                        v1::ListAgentsResponse* response) {
  absl::StatusOr<Caller> caller = Authorize(*context);
  absl::Status status = caller.status();
  if (status.ok()) {
    for (v1::AgentInfo& a : agents_.ListAgents(*caller)) *response->add_agents() = std::move(a);
  }
  return Finish("ListAgents", *context, status);
}

grpc::Status ControlService::ListKernels(grpc::ServerContext* context,
                                         const v1::ListKernelsRequest* request,
                                         v1::ListKernelsResponse* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    if (request->process_name().size() > 4096) {
      return absl::InvalidArgumentError("process_name: longer than 4096 bytes");
    }
    if (request->agent_id().size() > 256) {
      return absl::InvalidArgumentError("agent_id: longer than 256 bytes");
    }
    if (request->sample_ms() > kMaxKernelSampleMs) {
      return absl::InvalidArgumentError(absl::StrCat("sample_ms: ", request->sample_ms(),
                                                     " is more than the ", kMaxKernelSampleMs,
                                                     " ms a sample may take"));
    }
    *response = agents_.ListKernels(*request, caller);
    return absl::OkStatus();
  }();
  return Finish("ListKernels", *context, status);
}

// ---- arms ----

grpc::Status ControlService::Arm(grpc::ServerContext* context, const v1::ArmRequest* request,
                                 v1::ArmInfo* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    KC_RETURN_IF_ERROR(ValidateArm(*request, absl::ToUnixMillis(absl::Now())));
    KC_ASSIGN_OR_RETURN(*response, agents_.Arm(*request, caller));
    log::Info("arm.created", {{"arm", response->arm_id()},
                              {"kernel", request->selector().kernel()},
                              {"caller", caller.description}});
    return absl::OkStatus();
  }();
  return Finish("Arm", *context, status);
}

grpc::Status ControlService::Disarm(grpc::ServerContext* context, const v1::DisarmRequest* request,
                                    v1::DisarmResponse* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    KC_RETURN_IF_ERROR(ValidateDisarm(*request));
    KC_ASSIGN_OR_RETURN(std::vector<v1::ArmInfo> arms, agents_.Disarm(*request, caller));
    for (v1::ArmInfo& a : arms) *response->add_disarmed() = std::move(a);
    return absl::OkStatus();
  }();
  return Finish("Disarm", *context, status);
}

grpc::Status ControlService::ListArms(grpc::ServerContext* context,
                                      const v1::ListArmsRequest* request,
                                      v1::ListArmsResponse* response) {
  absl::StatusOr<Caller> caller = Authorize(*context);
  absl::Status status = caller.status();
  if (status.ok()) {
    for (v1::ArmInfo& a : agents_.ListArms(request->include_finished(), *caller)) {
      *response->add_arms() = std::move(a);
    }
  }
  return Finish("ListArms", *context, status);
}

// ---- live substitution ----

grpc::Status ControlService::Substitute(grpc::ServerContext* context,
                                        const v1::SubstituteRequest* request,
                                        v1::SubstitutionInfo* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    KC_RETURN_IF_ERROR(ValidateSubstituteTarget(*request));
    std::string preflight;
    if (request->no_preflight()) {
      preflight = "none (no_preflight): the variant was not validated before going live";
    } else {
      KC_ASSIGN_OR_RETURN(preflight, RunPreflight(caller, *request));
    }
    KC_ASSIGN_OR_RETURN(*response, agents_.Substitute(*request, caller, preflight));
    log::Info("substitution.requested", {{"substitution", response->substitution_id()},
                                         {"kernel", request->selector().kernel()},
                                         {"preflight", preflight},
                                         {"caller", caller.description}});
    return absl::OkStatus();
  }();
  return Finish("Substitute", *context, status);
}

absl::StatusOr<std::string> ControlService::RunPreflight(const Caller& caller,
                                                         const v1::SubstituteRequest& request) {
  KC_ASSIGN_OR_RETURN(std::string id, ResolveCapture(caller, request.preflight_capture()));
  KC_ASSIGN_OR_RETURN(v1::CaptureManifest manifest, store_.GetManifest(id));
  // A pass on some other kernel's capture would prove nothing about this
  // substitution.
  const link::Selector sel = link::SelectorFromProto(request.selector(), 0);
  link::LinkResult<link::NameMatcher> matcher = link::NameMatcher::Compile(sel.kernel, sel.match);
  if (!matcher.ok()) return absl::InvalidArgumentError("selector.kernel: " + matcher.error());
  if (!matcher->Matches(manifest.kernel().demangled_name(), manifest.kernel().mangled_name())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "preflight capture ", id, " is of kernel ", manifest.kernel().mangled_name(),
        ", which the substitution's selector does not match: validate the variant against a "
        "capture of the kernel it replaces"));
  }
  std::string replay = options_.replay_binary;
  if (replay.empty()) {
    // $KERNCAP_REPLAY, beside kerncapd, then PATH: kerncapctl's own lookup.
    absl::StatusOr<std::string> found = FindReplayBinary(ReplayLookupFromProcess());
    if (!found.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "preflight: the variant cannot be validated on this node; nothing was substituted: ",
          found.status().message()));
    }
    replay = *found;
  }
  // The variant and the replay are the caller's: written to a folder of the
  // caller's and run with the caller's rights (tool_runner.cc); the replay
  // reads the capture through this daemon's socket, as the caller.
  KC_ASSIGN_OR_RETURN(ScopedFsIdentity as_caller, ScopedFsIdentity::Enter(FsIdentityOf(caller)));
  repro::ScratchDir scratch("kerncapd-preflight-");
  if (scratch.path().empty()) return absl::InternalError("preflight: no temporary folder");
  const std::string ext = request.format().empty() ? "cubin" : request.format();
  const std::string variant = absl::StrCat(scratch.path(), "/variant.", ext);
  KC_RETURN_IF_ERROR(WriteFileAtomic(variant, request.code_object()));
  absl::StatusOr<repro::ToolResult> run =
      repro::RunTool({replay, "validate", absl::StrCat("--daemon=unix:", options_.info.unix_socket),
                      id, absl::StrCat("--code-object=", variant)},
                     scratch.path(), kPreflightTimeoutSeconds);
  KC_RETURN_IF_ERROR(run.status());
  const std::string what =
      absl::StrCat("kerncap-replay validate --code-object=", request.name().empty() ? variant
                                                                                    : request.name(),
                   " ", id, " on ", options_.info.hostname);
  if (run->exit_code == 0) {
    return absl::StrCat(what, ": pass (the variant reproduced the capture's outputs)");
  }
  const int code = run->exit_code;
  const char* meaning = run->timed_out              ? "timed out"
                        : code == exit_code::kMismatch ? "the variant's outputs differ from the capture's"
                        : code == exit_code::kNoDevice ? "no CUDA driver or device on this node"
                        : code == exit_code::kRefused  ? "the replay refused to give a verdict"
                                                       : "the replay failed";
  std::string tail = run->err.empty() ? run->out : run->err;
  if (tail.size() > 2048) tail = "..." + tail.substr(tail.size() - 2048);
  const int exit = code == exit_code::kMismatch || code == exit_code::kNoDevice
                       ? code
                       : exit_code::kRefused;
  return exit_code::WithExitCode(
      absl::FailedPreconditionError(absl::StrCat("preflight failed (", what, " exited ", code,
                                                 ": ", meaning,
                                                 "); nothing was substituted. ", tail)),
      exit);
}

grpc::Status ControlService::Unsubstitute(grpc::ServerContext* context,
                                          const v1::UnsubstituteRequest* request,
                                          v1::SubstitutionInfo* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    if (request->substitution_id().empty()) {
      return absl::InvalidArgumentError("substitution_id is empty");
    }
    KC_ASSIGN_OR_RETURN(*response, agents_.Unsubstitute(request->substitution_id(), caller));
    return absl::OkStatus();
  }();
  return Finish("Unsubstitute", *context, status);
}

grpc::Status ControlService::ListSubstitutions(grpc::ServerContext* context,
                                               const v1::ListSubstitutionsRequest* request,
                                               v1::ListSubstitutionsResponse* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    bool found = request->substitution_id().empty();
    for (v1::SubstitutionInfo& s :
         agents_.ListSubstitutions(request->include_finished() || !found, caller)) {
      if (!request->substitution_id().empty() &&
          s.substitution_id() != request->substitution_id()) {
        continue;
      }
      found = true;
      *response->add_substitutions() = std::move(s);
    }
    if (!found) return absl::NotFoundError("no substitution " + request->substitution_id());
    return absl::OkStatus();
  }();
  return Finish("ListSubstitutions", *context, status);
}

// ---- captures ----

grpc::Status ControlService::ListCaptures(grpc::ServerContext* context,
                                          const v1::ListCapturesRequest* request,
                                          v1::ListCapturesResponse* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    KC_RETURN_IF_ERROR(ValidateListCaptures(*request));
    KC_ASSIGN_OR_RETURN(
        std::vector<v1::CaptureSummary> rows,
        store_.ListCaptures(*request, caller.privileged ? std::nullopt
                                                        : std::optional<uint32_t>(caller.uid)));
    for (v1::CaptureSummary& row : rows) *response->add_captures() = std::move(row);
    return absl::OkStatus();
  }();
  return Finish("ListCaptures", *context, status);
}

grpc::Status ControlService::GetCapture(grpc::ServerContext* context,
                                        const v1::GetCaptureRequest* request,
                                        v1::CaptureDetail* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    KC_ASSIGN_OR_RETURN(std::string id, ResolveCapture(caller, request->capture_id()));
    KC_ASSIGN_OR_RETURN(*response->mutable_manifest(), store_.GetManifest(id));
    *response->mutable_summary() = store::Catalog::Summarize(response->manifest());
    KC_ASSIGN_OR_RETURN(store::Store::Footprint footprint, store_.CaptureFootprint(id));
    response->set_exclusive_raw_bytes(footprint.exclusive_raw_bytes);
    response->set_exclusive_pending(!footprint.exclusive_known);
    response->set_stored_bytes(footprint.stored_bytes);
    return absl::OkStatus();
  }();
  return Finish("GetCapture", *context, status);
}

grpc::Status ControlService::DeleteCapture(grpc::ServerContext* context,
                                           const v1::DeleteCaptureRequest* request,
                                           v1::DeleteCaptureResponse* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    KC_ASSIGN_OR_RETURN(std::string id, ResolveCapture(caller, request->capture_id()));
    KC_RETURN_IF_ERROR(store_.DeleteCapture(id));
    response->set_capture_id(id);
    log::Info("capture.deleted", {{"capture", id}, {"caller", caller.description}});
    return absl::OkStatus();
  }();
  return Finish("DeleteCapture", *context, status);
}

// ---- events ----

grpc::Status ControlService::WatchEvents(grpc::ServerContext* context,
                                         const v1::WatchEventsRequest*,
                                         grpc::ServerWriter<v1::Event>* writer) {
  absl::StatusOr<Caller> caller = Authorize(*context);
  if (!caller.ok()) return Finish("WatchEvents", *context, caller.status());
  std::unique_ptr<EventBus::Subscription> sub = bus_.Subscribe();
  // Tells the client the subscription exists: events published after it
  // sees the initial metadata are delivered.
  writer->SendInitialMetadata();
  uint64_t reported_dropped = 0;
  while (!context->IsCancelled() && !shutting_down_.load()) {
    absl::Time start = absl::Now();
    std::optional<v1::Event> event = sub->Next(kWatchPollInterval);
    if (!event.has_value()) {
      // Next() returns early with nothing only when the bus shut down.
      if (absl::Now() - start < kWatchPollInterval / 2) break;
      continue;
    }
    // Another user's agents, arms and captures are not this caller's news.
    if (!caller->MayReach(event->owner_uid())) continue;
    if (!writer->Write(*event)) break;  // client went away
    if (uint64_t dropped = sub->dropped(); dropped != reported_dropped) {
      log::Warn("watch.dropped", {{"peer", context->peer()}, {"events", dropped}});
      reported_dropped = dropped;
    }
  }
  return grpc::Status::OK;
}

// ---- reproducers ----

grpc::Status ControlService::GenerateReproducer(grpc::ServerContext* context,
                                                const v1::GenerateReproducerRequest* request,
                                                grpc::ServerWriter<v1::ReproducerFile>* writer) {
  absl::StatusOr<Caller> caller = Authorize(*context);
  absl::Status status = caller.status();
  if (status.ok()) status = DoGenerateReproducer(context, *caller, *request, writer);
  return Finish("GenerateReproducer", *context, status);
}

absl::Status ControlService::DoGenerateReproducer(grpc::ServerContext* context,
                                                  const Caller& caller,
                                                  const v1::GenerateReproducerRequest& request,
                                                  grpc::ServerWriter<v1::ReproducerFile>* writer) {
  for (const auto& [value, field] : {std::pair{&request.out_dir(), "out_dir"},
                                     std::pair{&request.source_dir(), "source_dir"},
                                     std::pair{&request.compile_commands(), "compile_commands"}}) {
    if (value->size() > kMaxPathBytes || value->find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(field, " is not a valid path"));
    }
    // Relative paths would resolve against the daemon's working directory.
    if (!value->empty() && (*value)[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " must be an absolute path on the daemon host: ", *value));
    }
  }
  // These name folders on the daemon host, and finding sources there runs
  // the compiler of a compile command the folders lead to: only local users
  // (the Unix socket, guarded by file permissions) may point them anywhere.
  // Remote clients get the project streamed back, sources found from the
  // paths the code object records.
  if (caller.pid == 0 &&
      (!request.out_dir().empty() || !request.source_dir().empty() ||
       !request.compile_commands().empty())) {
    return absl::PermissionDeniedError(
        "out_dir, source_dir and compile_commands name paths on the daemon host and are "
        "accepted only over its local Unix socket; leave them empty to have the project "
        "streamed back");
  }
  KC_ASSIGN_OR_RETURN(std::string id, ResolveCapture(caller, request.capture_id()));
  repro::CaptureAccess access;
  KC_ASSIGN_OR_RETURN(access.manifest, store_.GetManifest(id));
  // The generator runs with the caller's file-system identity (below); the
  // store is the daemon's, so its reads step back to the daemon's own.
  access.read_bytes = [this](const v1::ChunkList& list) -> absl::StatusOr<std::string> {
    ScopedOwnFsIdentity own;
    std::string bytes(list.size(), '\0');
    KC_RETURN_IF_ERROR(store_.ReadChunkList(list, bytes.data(), bytes.size()));
    return bytes;
  };
  // capture.kcap: the capture's export stream, as `kerncapctl export` writes
  // it. Created and finished (renamed into place) as the caller; only the
  // store reads in between are the daemon's.
  access.write_kcap = [this, context, &caller, &id](const std::string& path) -> absl::Status {
    KC_ASSIGN_OR_RETURN(std::unique_ptr<kcap::KcapWriter> kcap, kcap::KcapWriter::Create(path));
    v1::ExportCaptureRequest export_request;
    export_request.set_capture_id(id);
    absl::Status append;
    {
      ScopedOwnFsIdentity own;
      KC_RETURN_IF_ERROR(
          DoExport(context, caller, export_request, [&](const v1::TransferFrame& frame) {
            append = kcap->Append(frame);
            return append.ok();
          }));
    }
    KC_RETURN_IF_ERROR(append);
    return kcap->Finish();
  };

  repro::GenerateOptions options;
  // Looked up with the daemon's rights (its own binary's folder), before the
  // caller's identity is taken on.
  options.tools = repro::ResolveTools({});
  options.source_dir = request.source_dir();
  options.compile_commands = request.compile_commands();
  options.force = request.force();
  options.binary_only = request.kind() == v1::REPRODUCER_BINARY;
  // UNSPECIFIED: a Triton project when the capture carries the Triton
  // shim's metadata, else CUDA/HIP; TRITON without that metadata is
  // FAILED_PRECONDITION (the generator says why).
  switch (request.kind()) {
    case v1::REPRODUCER_TRITON:
      options.kind = repro::ProjectKind::kTriton;
      break;
    case v1::REPRODUCER_CUDA:
    case v1::REPRODUCER_HIP:
      options.kind = repro::ProjectKind::kNative;
      break;
    default:
      options.kind = repro::ProjectKind::kAuto;
      break;
  }
  // From here every path is touched as the caller would touch it: the
  // out_dir, the sources the line tables and compile_commands name, the
  // compilers run on them (tool_runner.cc runs them as the caller), --force
  // replacing a folder. A daemon that cannot take on the caller's identity
  // (a per-user kerncapd serving another user) refuses.
  KC_ASSIGN_OR_RETURN(ScopedFsIdentity as_caller, ScopedFsIdentity::Enter(FsIdentityOf(caller)));
  // Without out_dir the project is generated in a temp folder and streamed.
  std::string temp_root;
  if (request.out_dir().empty()) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "kerncapd-repro-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError("cannot create a temp folder for the reproducer");
    }
    temp_root = tmpl;
    options.out_dir = temp_root + "/project";
  } else {
    options.out_dir = request.out_dir();
  }
  absl::Cleanup remove_temp = [&temp_root] {
    std::error_code ec;
    if (!temp_root.empty()) std::filesystem::remove_all(temp_root, ec);
  };
  KC_ASSIGN_OR_RETURN(repro::GenerateResult result, repro::GenerateProject(access, options));
  log::Info("reproducer.generated",
            {{"capture", id},
             {"kind", result.project["kind"].get<std::string>()},
             {"source", result.project["source"]["outcome"].get<std::string>()},
             {"out_dir", request.out_dir()},
             {"peer", context->peer()}});
  if (request.out_dir().empty()) {
    // Files are read as the caller (a compiler run as the caller could have
    // left a link to a file only the daemon may read); only the writes to
    // the stream step back to the daemon's identity.
    for (const std::string& rel : result.files) {
      if (context->IsCancelled()) return Cancelled("reproducer");
      KC_RETURN_IF_ERROR(repro::StreamProjectFile(result.out_dir, rel,
                                                  [&](const v1::ReproducerFile& f) {
                                                    ScopedOwnFsIdentity own;
                                                    return writer->Write(f);
                                                  }));
    }
  }
  v1::ReproducerFile last;
  if (!request.out_dir().empty()) last.set_written_to(result.out_dir);
  last.set_project_json(result.project.dump());
  ScopedOwnFsIdentity own;
  if (!writer->Write(last)) return Cancelled("reproducer");
  return absl::OkStatus();
}

// ---- transfer between stores ----

absl::Status ControlService::DoExport(grpc::ServerContext* context, const Caller& caller,
                                      const v1::ExportCaptureRequest& request,
                                      const std::function<bool(const v1::TransferFrame&)>& write) {
  KC_ASSIGN_OR_RETURN(std::vector<Digest> skip_list,
                      ParseDigests(request.skip_digests(), kMaxSkipDigests, "skip_digests"));
  absl::flat_hash_set<Digest> skip(skip_list.begin(), skip_list.end());
  skip_list.clear();
  KC_ASSIGN_OR_RETURN(std::string id, ResolveCapture(caller, request.capture_id()));
  KC_ASSIGN_OR_RETURN(v1::CaptureManifest manifest, store_.GetManifest(id));
  KC_ASSIGN_OR_RETURN(std::vector<ChunkRef> chunks, ManifestChunks(manifest));
  std::vector<ChunkRef> to_send;
  uint64_t bytes_total = 0;
  if (!request.manifest_only()) {
    for (const ChunkRef& c : chunks) {
      if (skip.contains(c.digest)) continue;
      to_send.push_back(c);
      bytes_total += c.raw_size;
    }
  }

  v1::TransferFrame frame;
  *frame.mutable_manifest() = std::move(manifest);
  frame.set_chunks_total(to_send.size());
  frame.set_bytes_total(bytes_total);
  if (!write(frame)) return Cancelled("export");
  for (const ChunkRef& c : to_send) {
    if (context->IsCancelled()) return Cancelled("export");
    auto read = store_.ReadStoredChunk(c.digest);
    if (absl::IsNotFound(read.status())) {
      // The manifest names it: a chunk the store lacks is lost data.
      return absl::DataLossError(absl::StrCat("capture ", id, ": chunk ", c.digest.ToHex(),
                                              " is missing from the store"));
    }
    KC_ASSIGN_OR_RETURN(store::StoredChunk stored, std::move(read));
    frame.Clear();
    v1::TransferChunk* chunk = frame.mutable_chunk();
    chunk->set_digest(c.digest.ToBytes());
    chunk->set_codec(stored.codec);
    chunk->set_raw_size(stored.raw_size);
    chunk->set_data(std::move(stored.data));
    if (!write(frame)) return Cancelled("export");
  }
  log::Info("capture.exported", {{"capture", id},
                                 {"chunks", to_send.size()},
                                 {"skipped", chunks.size() - to_send.size()},
                                 {"caller", caller.description}});
  return absl::OkStatus();
}

grpc::Status ControlService::ExportCapture(grpc::ServerContext* context,
                                           const v1::ExportCaptureRequest* request,
                                           grpc::ServerWriter<v1::TransferFrame>* writer) {
  absl::StatusOr<Caller> caller = Authorize(*context);
  absl::Status status = caller.status();
  if (status.ok()) {
    status = DoExport(context, *caller, *request,
                      [writer](const v1::TransferFrame& frame) { return writer->Write(frame); });
  }
  return Finish("ExportCapture", *context, status);
}

grpc::Status ControlService::FindMissingChunks(grpc::ServerContext* context,
                                               const v1::FindMissingChunksRequest* request,
                                               v1::FindMissingChunksResponse* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_RETURN_IF_ERROR(Authorize(*context).status());
    KC_ASSIGN_OR_RETURN(std::vector<Digest> digests,
                        ParseDigests(request->digests(), kMaxDigestsPerRequest, "digests"));
    absl::flat_hash_set<Digest> reported;
    for (const Digest& d : digests) {
      if (!store_.HasChunk(d) && reported.insert(d).second) response->add_missing(d.ToBytes());
    }
    return absl::OkStatus();
  }();
  return Finish("FindMissingChunks", *context, status);
}

absl::Status ControlService::DoImport(grpc::ServerContext* context, const Caller& caller,
                                      grpc::ServerReader<v1::TransferFrame>* reader,
                                      v1::ImportCaptureResponse* response) {
  v1::TransferFrame frame;
  if (!reader->Read(&frame)) {
    return absl::InvalidArgumentError(
        "empty import stream: the first frame must carry the manifest");
  }
  if (!frame.has_manifest()) {
    return absl::InvalidArgumentError("the first frame of an import must carry the manifest");
  }
  v1::CaptureManifest manifest = std::move(*frame.mutable_manifest());
  const uint64_t chunks_total = frame.chunks_total();
  KC_RETURN_IF_ERROR(ValidateImportedManifest(manifest));
  // Before anything is allocated from its numbers (format/manifest_check.h).
  KC_RETURN_IF_ERROR(format::ValidateManifest(manifest));
  KC_ASSIGN_OR_RETURN(std::vector<ChunkRef> refs, ManifestChunks(manifest));
  // From here until the commit, a GC keeps every chunk the manifest names:
  // the ones this stream writes and the ones already here it relies on.
  std::unique_ptr<store::Store::ImportPin> pin = store_.PinForImport(manifest);
  absl::flat_hash_map<Digest, uint32_t> expected;  // digest -> raw size
  for (const ChunkRef& r : refs) expected.emplace(r.digest, r.raw_size);
  if (chunks_total > expected.size()) {
    return absl::InvalidArgumentError(absl::StrCat("chunks_total ", chunks_total, " exceeds the ",
                                                   expected.size(),
                                                   " chunks the manifest references"));
  }

  absl::flat_hash_set<Digest> seen;
  uint64_t received = 0;
  uint64_t present = 0;
  while (reader->Read(&frame)) {
    const uint64_t n = seen.size() + 1;
    if (frame.has_manifest()) {
      return absl::InvalidArgumentError(absl::StrCat("frame ", n, " carries a second manifest"));
    }
    if (!frame.has_chunk()) {
      return absl::InvalidArgumentError(absl::StrCat("frame ", n, " carries no chunk"));
    }
    const v1::TransferChunk& c = frame.chunk();
    if (c.digest().size() != Digest::kSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk frame ", n, ": digest is ", c.digest().size(), " bytes, not 32"));
    }
    KC_ASSIGN_OR_RETURN(Digest digest, Digest::FromBytes(c.digest()));
    auto it = expected.find(digest);
    if (it == expected.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunk ", digest.ToHex(), " is not referenced by the manifest; nothing committed"));
    }
    if (!seen.insert(digest).second) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", digest.ToHex(), " sent twice"));
    }
    if (seen.size() > chunks_total) {
      return absl::InvalidArgumentError(absl::StrCat("more chunk frames than the announced ",
                                                     chunks_total, "; nothing committed"));
    }
    if (c.codec() != v1::CODEC_RAW && c.codec() != v1::CODEC_ZSTD) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk ", digest.ToHex(), ": unknown codec ", c.codec()));
    }
    if (c.raw_size() != it->second) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", digest.ToHex(), ": raw_size ",
                                                     c.raw_size(), ", the manifest implies ",
                                                     it->second));
    }
    if (c.data().size() > kMaxChunkBytes + (kMaxChunkBytes >> 4)) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk ", digest.ToHex(), ": ", c.data().size(), " bytes of data"));
    }
    if (store_.HasChunk(digest)) {
      ++present;
      continue;
    }
    store::StoredChunk stored;
    stored.codec = c.codec();
    stored.raw_size = c.raw_size();
    stored.data = std::move(*frame.mutable_chunk()->mutable_data());
    absl::Status put = store_.PutStoredChunk(digest, stored);
    if (!put.ok()) {
      return absl::Status(put.code(), absl::StrCat(put.message(), "; nothing committed"));
    }
    ++received;
  }
  if (context->IsCancelled()) return Cancelled("import (nothing committed)");
  if (seen.size() != chunks_total) {
    return absl::InvalidArgumentError(absl::StrCat("import stream ended after ", seen.size(),
                                                   " of ", chunks_total,
                                                   " chunks; nothing committed"));
  }
  manifest.set_source(v1::SOURCE_IMPORT);
  // The importer's, whatever the file says.
  manifest.set_owner_uid(caller.uid);
  KC_ASSIGN_OR_RETURN(std::string id, store_.CommitImportedManifest(manifest));
  manifest.set_capture_id(id);
  response->set_capture_id(id);
  response->set_chunks_received(received);
  response->set_chunks_already_present(present);
  log::Info("capture.imported", {{"capture", id},
                                 {"chunks_received", received},
                                 {"chunks_present", present},
                                 {"caller", caller.description}});
  PublishCommitted(manifest);
  return absl::OkStatus();
}

grpc::Status ControlService::ImportCapture(grpc::ServerContext* context,
                                           grpc::ServerReader<v1::TransferFrame>* reader,
                                           v1::ImportCaptureResponse* response) {
  absl::StatusOr<Caller> caller = Authorize(*context);
  absl::Status status = caller.status();
  if (status.ok()) status = DoImport(context, *caller, reader, response);
  return Finish("ImportCapture", *context, status);
}

grpc::Status ControlService::ImportReferenceCapture(
    grpc::ServerContext* context, const v1::ImportReferenceCaptureRequest* request,
    v1::ImportCaptureResponse* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    if (caller.pid == 0) {
      return absl::PermissionDeniedError(
          "a reference folder is a path on the daemon host: it is accepted only over the "
          "daemon's local Unix socket");
    }
    KC_RETURN_IF_ERROR(ValidateReferenceFolder(request->path()));
    if (!options_.reference_importer) {
      return absl::UnimplementedError("this kerncapd was built without the reference importer");
    }
    // The folder is read as the caller; the store is written as the daemon,
    // and the capture is the caller's.
    CallerSink sink(store_, caller.uid);
    std::string id;
    {
      KC_ASSIGN_OR_RETURN(ScopedFsIdentity as_caller,
                          ScopedFsIdentity::Enter(FsIdentityOf(caller)));
      KC_ASSIGN_OR_RETURN(id, options_.reference_importer(request->path(), sink));
    }
    KC_ASSIGN_OR_RETURN(v1::CaptureManifest manifest, store_.GetManifest(id));
    response->set_capture_id(id);
    response->set_chunks_received(manifest.stats().chunk_count());
    log::Info("capture.imported_reference",
              {{"capture", id}, {"path", request->path()}, {"caller", caller.description}});
    PublishCommitted(manifest);
    return absl::OkStatus();
  }();
  return Finish("ImportReferenceCapture", *context, status);
}

// ---- maintenance ----

grpc::Status ControlService::RunGc(grpc::ServerContext* context, const v1::RunGcRequest* request,
                                   v1::GcReport* response) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    if (!caller.privileged) {
      return absl::PermissionDeniedError(absl::StrCat(
          "gc sweeps the whole store, shared by every user of this node: only root or the "
          "daemon's own user may run it (you are ", caller.description,
          "); deleting your captures frees what only they used at the next gc"));
    }
    KC_ASSIGN_OR_RETURN(*response, store_.RunGc(request->dry_run()));
    log::Info("gc.done", {{"dry_run", request->dry_run()},
                          {"dead_chunks", response->dead_chunks()},
                          {"reclaimed_bytes", response->reclaimed_bytes()}});
    return absl::OkStatus();
  }();
  return Finish("RunGc", *context, status);
}

grpc::Status ControlService::VerifyStore(grpc::ServerContext* context,
                                         const v1::VerifyStoreRequest* request,
                                         grpc::ServerWriter<v1::VerifyProgress>* writer) {
  absl::Status status = [&]() -> absl::Status {
    KC_ASSIGN_OR_RETURN(Caller caller, Authorize(*context));
    std::string id;
    if (!request->capture_id().empty()) {
      KC_ASSIGN_OR_RETURN(id, ResolveCapture(caller, request->capture_id()));
    } else if (!caller.privileged) {
      return absl::PermissionDeniedError(absl::StrCat(
          "verifying the whole store reads every user's captures: only root or the daemon's "
          "own user may (you are ", caller.description, "); name one of your captures instead"));
    }
    bool client_gone = false;
    uint64_t problems = 0;
    KC_RETURN_IF_ERROR(
        store_.Verify(id, request->rehash(), [&](const v1::VerifyProgress& progress) {
          problems += progress.problems_size();
          if (!client_gone && !writer->Write(progress)) client_gone = true;
        }));
    log::Info("verify.done",
              {{"capture", id}, {"rehash", request->rehash()}, {"problems", problems}});
    if (client_gone) return Cancelled("verify");
    return absl::OkStatus();
  }();
  return Finish("VerifyStore", *context, status);
}

}  // namespace kerncap::service
