#include "reproducer/generator/project_writer.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "reproducer/generator/path_util.h"

namespace kerncap::repro {

namespace fs = std::filesystem;

bool IsAbsentOrEmptyDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return true;
  return fs::is_directory(dir, ec) && fs::is_empty(dir, ec);
}

absl::StatusOr<std::unique_ptr<ProjectStage>> ProjectStage::Begin(const std::string& out_dir,
                                                                  bool force) {
  if (out_dir.empty()) return absl::InvalidArgumentError("no output folder given (--out)");
  const std::string out = Normalize(out_dir, fs::current_path().string());
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(out, " exists and is not a folder"));
  }
  if (!IsAbsentOrEmptyDir(out)) {
    if (!force) {
      return absl::AlreadyExistsError(
          absl::StrCat(out, " exists and is not empty (use --force to replace it)"));
    }
    // --force replaces an earlier reproducer, never an arbitrary folder
    // (the daemon may be asked by a remote client).
    if (!fs::exists(out + "/kerncap.json", ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          out, " is not empty and not a kerncap reproducer (no kerncap.json): not replaced"));
    }
  }
  const std::string parent = DirName(out);
  KC_RETURN_IF_ERROR(MakeDirs(parent));
  std::string tmpl =
      absl::StrCat(parent, "/.", fs::path(out).filename().string(), ".kerncap-tmp-XXXXXX");
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return ErrnoError(errno, absl::StrCat("create a temp folder next to ", out));
  }
  ::chmod(tmpl.c_str(), 0755);
  return std::unique_ptr<ProjectStage>(new ProjectStage(out, tmpl, force));
}

ProjectStage::~ProjectStage() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

absl::Status ProjectStage::CheckRelative(const std::string& rel) {
  if (rel.empty() || rel[0] == '/') {
    return absl::InvalidArgumentError(absl::StrCat("project path must be relative: ", rel));
  }
  for (const auto& part : fs::path(rel)) {
    if (part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("project path leaves the project: ", rel));
    }
  }
  return absl::OkStatus();
}

absl::Status ProjectStage::WriteFile(const std::string& rel, std::string_view data, int mode) {
  KC_RETURN_IF_ERROR(CheckRelative(rel));
  const std::string path = PathOf(rel);
  KC_RETURN_IF_ERROR(MakeDirs(DirName(path)));
  // Durable: the rename at the end publishes the whole folder.
  return WriteFileAtomic(path, absl::string_view(data.data(), data.size()), mode);
}

absl::Status ProjectStage::CopyFile(const std::string& from, const std::string& rel) {
  KC_ASSIGN_OR_RETURN(std::string data, ReadFile(from));
  struct stat st;
  int mode = ::stat(from.c_str(), &st) == 0 && (st.st_mode & 0111) != 0 ? 0755 : 0644;
  return WriteFile(rel, data, mode);
}

absl::Status ProjectStage::Commit() {
  if (committed_) return absl::FailedPreconditionError("project already committed");
  std::error_code ec;
  std::string old;
  if (fs::exists(out_, ec)) {
    if (IsAbsentOrEmptyDir(out_)) {
      fs::remove(out_, ec);
    } else if (force_) {
      old = absl::StrCat(tmp_, ".old");
      if (::rename(out_.c_str(), old.c_str()) != 0) {
        return ErrnoError(errno, absl::StrCat("move the old ", out_, " aside"));
      }
    } else {
      return absl::AlreadyExistsError(
          absl::StrCat(out_, " appeared while the project was generated; not replaced"));
    }
  }
  if (::rename(tmp_.c_str(), out_.c_str()) != 0) {
    int e = errno;
    if (!old.empty()) ::rename(old.c_str(), out_.c_str());
    return ErrnoError(e, absl::StrCat("rename ", tmp_, " to ", out_));
  }
  committed_ = true;
  if (!old.empty()) fs::remove_all(old, ec);
  return FsyncDir(DirName(out_));
}

}  // namespace kerncap::repro
