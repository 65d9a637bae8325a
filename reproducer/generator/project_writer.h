// project_writer.h: writes a reproducer project so that a failed generation
// leaves nothing behind: everything goes into a hidden temp folder next to
// the destination (same file system), which is renamed into place only at
// the end. An existing non-empty destination is refused unless `force`, and
// even then unless it is an earlier reproducer (holds kerncap.json); it is
// replaced only when the new project is complete.
#ifndef KERNCAP_REPRODUCER_GENERATOR_PROJECT_WRITER_H_
#define KERNCAP_REPRODUCER_GENERATOR_PROJECT_WRITER_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kerncap::repro {

class ProjectStage {
 public:
  // AlreadyExists for a non-empty `out_dir` without `force`;
  // FailedPrecondition with `force` when it is not a reproducer;
  // InvalidArgument when it exists and is not a folder.
  static absl::StatusOr<std::unique_ptr<ProjectStage>> Begin(const std::string& out_dir,
                                                             bool force);
  ~ProjectStage();  // removes the temp folder unless committed
  ProjectStage(const ProjectStage&) = delete;
  ProjectStage& operator=(const ProjectStage&) = delete;

  const std::string& dir() const { return tmp_; }  // the temp folder
  const std::string& out_dir() const { return out_; }

  // `rel`: a relative path without "..". Parent folders are created.
  absl::Status WriteFile(const std::string& rel, std::string_view data, int mode = 0644);
  absl::Status CopyFile(const std::string& from, const std::string& rel);
  std::string PathOf(const std::string& rel) const { return tmp_ + "/" + rel; }

  // Renames the temp folder to out_dir (fsyncing the parent).
  absl::Status Commit();

  // InvalidArgument unless `rel` is relative and stays inside the project.
  static absl::Status CheckRelative(const std::string& rel);

 private:
  ProjectStage(std::string out, std::string tmp, bool force)
      : out_(std::move(out)), tmp_(std::move(tmp)), force_(force) {}

  std::string out_;
  std::string tmp_;
  bool force_;
  bool committed_ = false;
};

// True when `dir` does not exist or is an empty folder.
bool IsAbsentOrEmptyDir(const std::string& dir);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_PROJECT_WRITER_H_
