// transfer_commands.cc: import, export and pull (the commands that move a
// capture's chunks between stores and .kcap files).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <iostream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "client/kerncapctl/commands.h"
#include "format/kcap_file.h"
#include "client/kerncapctl/output.h"
#include "client/kerncapctl/progress.h"
#include "common/errno_status.h"
#include "common/status_macros.h"
#include "common/control/limits.h"
#include "format/manifest_util.h"

namespace kerncap::ctl {
namespace {

void PrintImported(Output o, const v1::ImportCaptureResponse& resp, const std::string& from) {
  if (o.structured()) {
    Emit(o, resp);
    return;
  }
  if (o.ids_only()) {
    Ids(o, "capture", {resp.capture_id()});
    return;
  }
  o.out << "imported " << resp.capture_id() << " from " << from << ": " << resp.chunks_received()
        << " chunks sent, " << resp.chunks_already_present() << " already present\n";
}

// Streams frames from `next` into an ImportCapture call on `dest`. `next`
// returns false at the end; an error from it cancels the call so the daemon
// commits nothing.
template <typename NextFn>
absl::Status StreamImport(Connection& dest, NextFn next, const std::string& label,
                          v1::ImportCaptureResponse* resp) {
  auto ctx = dest.NewContext(false);
  auto writer = dest.stub().ImportCapture(ctx.get(), resp);
  v1::TransferFrame frame;
  std::unique_ptr<ProgressBar> bar;
  uint64_t done = 0;
  absl::Status source_error;
  while (true) {
    absl::StatusOr<bool> more = next(&frame);
    if (!more.ok()) {
      source_error = more.status();
      break;
    }
    if (!*more) break;
    if (frame.has_manifest()) {
      bar = std::make_unique<ProgressBar>(label, frame.bytes_total(), /*bytes=*/true);
    } else if (bar != nullptr) {
      done += frame.chunk().raw_size();
      bar->Update(done);
    }
    if (!writer->Write(frame)) break;  // the daemon ended the call: Finish() says why
  }
  if (!source_error.ok()) {
    ctx->TryCancel();
    (void)writer->Finish();
    return absl::Status(source_error.code(),
                        absl::StrCat(source_error.message(), " (nothing was imported)"));
  }
  writer->WritesDone();
  KC_RETURN_IF_ERROR(dest.Check(writer->Finish()));
  if (bar != nullptr) bar->Finish();
  return absl::OkStatus();
}

std::string TempDirectory() {
  const char* t = std::getenv("TMPDIR");
  return t != nullptr && t[0] == '/' ? std::string(t) : std::string("/tmp");
}

// Copies everything readable from `in` to `out` (file descriptors).
absl::Status CopyFd(int in, int out, const char* what) {
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(in, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, absl::StrCat("read ", what));
    if (n == 0) return absl::OkStatus();
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::write(out, buf + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return ErrnoError(errno, absl::StrCat("write ", what));
      off += w;
    }
  }
}

// `import -`: stdin is spooled to an unlinked temporary file first, because
// the reader checks every record's length against the file's size (a
// truncated or hostile stream is refused before the daemon commits anything).
absl::StatusOr<std::unique_ptr<kcap::KcapReader>> OpenStdinKcap() {
  std::string tmpl = TempDirectory() + "/kerncapctl-import-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return ErrnoError(errno, absl::StrCat("create a temporary file in ", TempDirectory()));
  absl::Status copied = CopyFd(STDIN_FILENO, fd, "stdin");
  if (copied.ok() && ::fsync(fd) != 0 && errno != EINVAL) copied = ErrnoError(errno, "fsync");
  ::close(fd);
  absl::StatusOr<std::unique_ptr<kcap::KcapReader>> reader =
      copied.ok() ? kcap::KcapReader::Open(tmpl) : absl::StatusOr<std::unique_ptr<kcap::KcapReader>>(copied);
  ::unlink(tmpl.c_str());  // the open reader keeps it until it is done
  return reader;
}

}  // namespace

absl::StatusOr<std::string> ImportKcap(Connection& c, const std::string& path) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<kcap::KcapReader> reader, kcap::KcapReader::Open(path));
  v1::ImportCaptureResponse resp;
  KC_RETURN_IF_ERROR(StreamImport(
      c, [&](v1::TransferFrame* f) { return reader->Next(f); }, "import", &resp));
  return resp.capture_id();
}

absl::Status CmdImport(Connection& c, Output o, const std::string& path) {
  if (path == "-") {
    KC_ASSIGN_OR_RETURN(std::unique_ptr<kcap::KcapReader> reader, OpenStdinKcap());
    v1::ImportCaptureResponse resp;
    KC_RETURN_IF_ERROR(StreamImport(
        c, [&](v1::TransferFrame* f) { return reader->Next(f); }, "import", &resp));
    PrintImported(o, resp, "stdin");
    return absl::OkStatus();
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("no such file or directory: ", path));
  }
  v1::ImportCaptureResponse resp;
  if (S_ISDIR(st.st_mode)) {
    // A reference-Kerncap capture folder: the daemon reads it itself, so it
    // needs an absolute path (on the daemon host, which for a Unix socket
    // is this host).
    char abs[PATH_MAX];
    if (::realpath(path.c_str(), abs) == nullptr) {
      return absl::NotFoundError(absl::StrCat("cannot resolve ", path));
    }
    v1::ImportReferenceCaptureRequest req;
    req.set_path(abs);
    auto ctx = c.NewContext(false);
    KC_RETURN_IF_ERROR(c.Check(c.stub().ImportReferenceCapture(ctx.get(), req, &resp)));
    PrintImported(o, resp, abs);
    return absl::OkStatus();
  }
  KC_ASSIGN_OR_RETURN(std::unique_ptr<kcap::KcapReader> reader, kcap::KcapReader::Open(path));
  KC_RETURN_IF_ERROR(StreamImport(
      c, [&](v1::TransferFrame* f) { return reader->Next(f); }, "import", &resp));
  PrintImported(o, resp, path);
  return absl::OkStatus();
}

absl::Status CmdExport(Connection& c, Output o, const std::string& capture,
                       const std::string& out_arg) {
  if (out_arg.empty()) return absl::InvalidArgumentError("export needs --out FILE.kcap");
  // `--out -`: the file is written whole (and checked) into a private
  // temporary folder, then copied to stdout; what would have gone to stdout
  // (the summary, -q's id, -o json) goes to stderr instead.
  const bool to_stdout = out_arg == "-";
  std::string out_file = out_arg;
  std::string spool_dir;
  if (to_stdout) {
    if (::isatty(STDOUT_FILENO) == 1) {
      return absl::InvalidArgumentError(
          "export --out - writes the binary .kcap to stdout, which is a terminal: redirect it "
          "(> file.kcap) or pipe it (| ssh node17 kerncapctl import -)");
    }
    std::string tmpl = TempDirectory() + "/kerncapctl-export-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return ErrnoError(errno, absl::StrCat("create a temporary folder in ", TempDirectory()));
    }
    spool_dir = tmpl;
    out_file = spool_dir + "/capture.kcap";
  }
  struct SpoolCleanup {
    std::string dir, file;
    ~SpoolCleanup() {
      if (dir.empty()) return;
      ::unlink(file.c_str());
      ::rmdir(dir.c_str());
    }
  } cleanup{spool_dir, out_file};
  const Output summary{to_stdout ? std::cerr : o.out, o.format, o.quiet, o.no_headers, o.spec,
                       o.sort_by};
  KC_ASSIGN_OR_RETURN(std::unique_ptr<kcap::KcapWriter> writer, kcap::KcapWriter::Create(out_file));
  v1::ExportCaptureRequest req;
  req.set_capture_id(capture);
  auto ctx = c.NewContext(false);
  auto reader = c.stub().ExportCapture(ctx.get(), req);
  v1::TransferFrame frame;
  std::unique_ptr<ProgressBar> bar;
  uint64_t done = 0;
  uint64_t chunks = 0;
  std::string capture_id;
  absl::Status write_error;
  while (reader->Read(&frame)) {
    if (frame.has_manifest()) {
      capture_id = frame.manifest().capture_id();
      bar = std::make_unique<ProgressBar>("export", frame.bytes_total(), /*bytes=*/true);
    } else {
      ++chunks;
      done += frame.chunk().raw_size();
      if (bar != nullptr) bar->Update(done);
    }
    write_error = writer->Append(frame);
    if (!write_error.ok()) {
      ctx->TryCancel();
      break;
    }
  }
  absl::Status rpc = c.Check(reader->Finish());
  KC_RETURN_IF_ERROR(write_error);
  KC_RETURN_IF_ERROR(rpc);
  if (capture_id.empty()) return absl::InternalError("the daemon sent no manifest");
  KC_RETURN_IF_ERROR(writer->Finish());
  if (bar != nullptr) bar->Finish();
  if (to_stdout) {
    int fd = ::open(out_file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", out_file));
    std::cout.flush();
    absl::Status copied = CopyFd(fd, STDOUT_FILENO, "the .kcap to stdout");
    ::close(fd);
    KC_RETURN_IF_ERROR(copied);
  }
  const std::string shown = to_stdout ? std::string("stdout") : out_file;
  if (summary.structured()) {
    Emit(summary, nlohmann::json{{"capture_id", capture_id},
                                 {"file", to_stdout ? std::string("-") : out_file},
                                 {"chunks", chunks},
                                 {"raw_bytes", done},
                                 {"file_bytes", writer->bytes_written()}});
  } else if (summary.ids_only()) {
    Ids(summary, "capture", {capture_id});
  } else {
    summary.out << "exported " << capture_id << " to " << shown << ": " << chunks << " chunks, "
                << HumanBytes(writer->bytes_written()) << "\n";
  }
  return absl::OkStatus();
}

absl::Status CmdPull(Connection& source, Connection& dest, Output o, const std::string& capture) {
  // 1. The manifest alone, to learn which chunks the capture needs.
  v1::CaptureManifest manifest;
  {
    v1::ExportCaptureRequest req;
    req.set_capture_id(capture);
    req.set_manifest_only(true);
    auto ctx = source.NewContext(false);
    auto reader = source.stub().ExportCapture(ctx.get(), req);
    v1::TransferFrame frame;
    while (reader->Read(&frame)) {
      if (frame.has_manifest()) manifest = std::move(*frame.mutable_manifest());
    }
    KC_RETURN_IF_ERROR(source.Check(reader->Finish()));
  }
  KC_ASSIGN_OR_RETURN(std::vector<service::ChunkRef> chunks, service::ManifestChunks(manifest));

  // 2. Ask the destination which of them it lacks, in bounded batches.
  absl::flat_hash_set<Digest> missing;
  for (size_t i = 0; i < chunks.size(); i += service::kMaxDigestsPerRequest) {
    v1::FindMissingChunksRequest req;
    size_t end = std::min(chunks.size(), i + service::kMaxDigestsPerRequest);
    for (size_t j = i; j < end; ++j) req.add_digests(chunks[j].digest.ToBytes());
    v1::FindMissingChunksResponse resp;
    auto ctx = dest.NewContext(true);
    KC_RETURN_IF_ERROR(dest.Check(dest.stub().FindMissingChunks(ctx.get(), req, &resp)));
    for (const std::string& raw : resp.missing()) {
      KC_ASSIGN_OR_RETURN(Digest d, Digest::FromBytes(raw));
      missing.insert(d);
    }
  }

  // 3. Export with everything the destination has skipped, straight into
  //    an import on the destination.
  v1::ExportCaptureRequest req;
  req.set_capture_id(manifest.capture_id());
  for (const service::ChunkRef& ch : chunks) {
    if (!missing.contains(ch.digest)) req.add_skip_digests(ch.digest.ToBytes());
  }
  auto src_ctx = source.NewContext(false);
  auto reader = source.stub().ExportCapture(src_ctx.get(), req);
  v1::ImportCaptureResponse resp;
  absl::Status st = StreamImport(
      dest,
      [&](v1::TransferFrame* f) -> absl::StatusOr<bool> {
        if (reader->Read(f)) return true;
        KC_RETURN_IF_ERROR(source.Check(reader->Finish()));
        return false;
      },
      "pull", &resp);
  if (!st.ok()) {
    src_ctx->TryCancel();
    return st;
  }
  PrintImported(o, resp,
                absl::StrCat(source.where(), " (", chunks.size() - missing.size(), " of ",
                             chunks.size(), " chunks already here)"));
  return absl::OkStatus();
}

}  // namespace kerncap::ctl
