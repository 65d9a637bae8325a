#include "client/kerncapctl/repro_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/kerncapctl/progress.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "reproducer/generator/generator.h"
#include "reproducer/generator/path_util.h"
#include "reproducer/generator/project_stream.h"
#include "reproducer/generator/project_writer.h"

namespace kerncap::ctl {
namespace {

std::string Absolute(const std::string& path) {
  return path.empty() ? path : repro::Normalize(path, std::filesystem::current_path().string());
}

void Print(Output o, const repro::GenerateResult& r) {
  if (o.structured()) {
    Emit(o, nlohmann::json{{"out_dir", r.out_dir}, {"files", r.files}, {"project", r.project}});
  } else if (o.ids_only()) {
    o.out << r.out_dir << "\n";
  } else {
    o.out << repro::SummarizeProject(r);
  }
}

}  // namespace

bool IsLocalCapture(const std::string& capture) {
  struct stat st;
  return ::stat(capture.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::Status CmdReproLocal(Output o, const ReproOptions& opts) {
  repro::GenerateOptions g;
  g.out_dir = Absolute(opts.out_dir);
  g.source_dir = Absolute(opts.source_dir);
  g.compile_commands = Absolute(opts.compile_commands);
  g.force = opts.force;
  g.binary_only = opts.binary;
  g.kind = opts.triton   ? repro::ProjectKind::kTriton
           : opts.native ? repro::ProjectKind::kNative
                         : repro::ProjectKind::kAuto;
  KC_ASSIGN_OR_RETURN(repro::GenerateResult r, repro::GenerateProjectFromKcap(opts.capture, g));
  Print(o, r);
  return absl::OkStatus();
}

absl::Status CmdRepro(Connection& c, Output o, const ReproOptions& opts) {
  // Fail on a bad --out before the daemon does any work.
  KC_ASSIGN_OR_RETURN(std::unique_ptr<repro::ProjectStage> stage,
                      repro::ProjectStage::Begin(Absolute(opts.out_dir), opts.force));
  v1::GenerateReproducerRequest req;
  req.set_capture_id(opts.capture);
  req.set_source_dir(Absolute(opts.source_dir));
  req.set_compile_commands(Absolute(opts.compile_commands));
  if (opts.binary) req.set_kind(v1::REPRODUCER_BINARY);
  if (opts.triton) req.set_kind(v1::REPRODUCER_TRITON);
  // The daemon's CUDA and HIP kinds both mean "the native project".
  if (opts.native) req.set_kind(v1::REPRODUCER_CUDA);
  auto ctx = c.NewContext(false);
  // kerncapd first builds the project (its capture.kcap is the whole
  // capture), then streams it: say so on a terminal instead of staying
  // silent, then show the bytes received with their rate.
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  if (tty && !o.structured() && !o.ids_only()) {
    std::cerr << "repro: kerncapd is generating the project for " << opts.capture << "...\n";
  }
  auto reader = c.stub().GenerateReproducer(ctx.get(), req);
  repro::ProjectReceiver receiver(stage.get());
  v1::ReproducerFile frame;
  std::string project_json;
  absl::Status write_error;
  ProgressBar bar("repro: receiving", 0, /*bytes=*/true);
  uint64_t received = 0;
  while (reader->Read(&frame)) {
    if (frame.path().empty()) {
      project_json = frame.project_json();
      continue;
    }
    received += frame.content().size();
    bar.Update(received);
    write_error = receiver.Add(frame);
    if (!write_error.ok()) {
      ctx->TryCancel();
      break;
    }
  }
  absl::Status rpc = c.Check(reader->Finish());
  KC_RETURN_IF_ERROR(write_error);
  KC_RETURN_IF_ERROR(rpc);
  KC_RETURN_IF_ERROR(receiver.Finish());
  bar.Finish();
  repro::GenerateResult r;
  r.project = nlohmann::json::parse(project_json, nullptr, /*allow_exceptions=*/false);
  if (!r.project.is_object()) {
    return absl::DataLossError("the daemon's reproducer stream carried no project description");
  }
  KC_RETURN_IF_ERROR(stage->Commit());
  r.out_dir = stage->out_dir();
  r.files = receiver.paths();
  Print(o, r);
  return absl::OkStatus();
}

}  // namespace kerncap::ctl
