#include "reproducer/generator/project_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/status_macros.h"

namespace kerncap::repro {

absl::Status StreamProjectFile(const std::string& project_dir, const std::string& rel,
                               const std::function<bool(const v1::ReproducerFile&)>& write,
                               size_t piece_bytes) {
  const std::string path = project_dir + "/" + rel;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("open ", path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoError(e, absl::StrCat("stat ", path));
  }
  const uint64_t total = static_cast<uint64_t>(st.st_size);
  v1::ReproducerFile frame;
  frame.set_path(rel);
  frame.set_mode(st.st_mode & 0777);
  frame.set_total_size(total);
  absl::Status status;
  uint64_t offset = 0;
  do {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece_bytes, total - offset));
    std::string* content = frame.mutable_content();
    content->resize(n);
    status = PreadAll(fd, content->data(), n, offset, path);
    if (!status.ok()) break;
    frame.set_offset(offset);
    if (!write(frame)) {
      status = absl::CancelledError("reproducer stream cancelled by the client");
      break;
    }
    offset += n;
  } while (offset < total);
  ::close(fd);
  return status;
}

absl::Status ProjectReceiver::Add(const v1::ReproducerFile& f) {
  KC_RETURN_IF_ERROR(ProjectStage::CheckRelative(f.path()));
  Progress& p = files_[f.path()];
  if (f.offset() != p.received || (p.received > 0 && f.total_size() != p.total) ||
      f.offset() + f.content().size() > f.total_size()) {
    return absl::DataLossError(absl::StrCat(
        "reproducer stream: piece of ", f.path(), " at ", f.offset(), " (", f.content().size(),
        " bytes) does not follow byte ", p.received, " of ", f.total_size()));
  }
  p.total = f.total_size();
  const std::string path = stage_->PathOf(f.path());
  KC_RETURN_IF_ERROR(MakeDirs(DirName(path)));
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (f.offset() == 0 ? O_TRUNC : O_APPEND);
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("create ", path));
  absl::Status st = WriteAll(fd, f.content().data(), f.content().size(), path);
  if (st.ok() && f.mode() != 0) ::fchmod(fd, f.mode() & 0755);
  ::close(fd);
  KC_RETURN_IF_ERROR(st);
  p.received += f.content().size();
  return absl::OkStatus();
}

std::vector<std::string> ProjectReceiver::paths() const {
  std::vector<std::string> out;
  for (const auto& [path, p] : files_) out.push_back(path);
  return out;
}

absl::Status ProjectReceiver::Finish() const {
  for (const auto& [path, p] : files_) {
    if (p.received != p.total) {
      return absl::DataLossError(absl::StrCat("reproducer stream ended with ", path, " at byte ",
                                              p.received, " of ", p.total));
    }
  }
  return absl::OkStatus();
}

}  // namespace kerncap::repro
