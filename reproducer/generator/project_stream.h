// project_stream.h: a reproducer project as a stream of
// kerncap.v1.ReproducerFile frames (GenerateReproducer, control.proto), and
// back into a folder.
//
// Each file is sent in pieces of at most kProjectPieceBytes: frames with the
// same path, offset 0, piece, 2*piece..., total_size the file's size (a file
// of 0 bytes is one frame with no content). The receiver writes pieces in
// order, refuses gaps, overlaps, paths leaving the project and files that end
// short, and publishes the folder only when everything arrived
// (project_writer.h).
#ifndef KERNCAP_REPRODUCER_GENERATOR_PROJECT_STREAM_H_
#define KERNCAP_REPRODUCER_GENERATOR_PROJECT_STREAM_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kerncap/v1/control.pb.h"
#include "reproducer/generator/project_writer.h"

namespace kerncap::repro {

// 1 MiB: a frame must stay under gRPC's default 4 MiB receive limit, which
// clients that do not raise it (a plain grpcio channel, a TCP kerncapctl
// built elsewhere) keep; chunk frames of ExportCapture are the same size.
inline constexpr size_t kProjectPieceBytes = 1u << 20;

// Sends `project_dir`/`rel` through `write` (false: the reader went away:
// Cancelled).
absl::Status StreamProjectFile(const std::string& project_dir, const std::string& rel,
                               const std::function<bool(const v1::ReproducerFile&)>& write,
                               size_t piece_bytes = kProjectPieceBytes);

class ProjectReceiver {
 public:
  explicit ProjectReceiver(ProjectStage* stage) : stage_(stage) {}
  // One frame with a path (frames without one are the final frame: the
  // caller reads written_to / project_json itself).
  absl::Status Add(const v1::ReproducerFile& frame);
  // DataLoss naming the first file that did not arrive whole.
  absl::Status Finish() const;
  // Paths received so far, sorted.
  std::vector<std::string> paths() const;

 private:
  struct Progress {
    uint64_t received = 0;
    uint64_t total = 0;
  };
  ProjectStage* stage_;
  std::map<std::string, Progress> files_;
};

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_PROJECT_STREAM_H_
