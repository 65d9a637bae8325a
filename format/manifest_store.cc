#include "format/manifest_store.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/digest.h"
#include "common/errno_status.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "format/manifest_check.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace kerncap::store {
namespace {

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

absl::Status ManifestStore::Init() {
  KC_RETURN_IF_ERROR(MakeDirs(manifests_dir(), kManifestDirMode));
  return MakeDirs(refs_dir(), kManifestDirMode);
}

std::string ManifestStore::ManifestPath(const std::string& digest_hex) const {
  return absl::StrCat(manifests_dir(), "/", digest_hex.substr(0, 2), "/", digest_hex);
}

absl::StatusOr<std::string> ManifestStore::WriteManifest(const v1::CaptureManifest& manifest) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream sos(&bytes);
    google::protobuf::io::CodedOutputStream cos(&sos);
    // Deterministic so that map fields (tags) serialize the same every time.
    cos.SetSerializationDeterministic(true);
    if (!manifest.SerializeToCodedStream(&cos)) {
      return absl::InternalError("serialize manifest failed");
    }
  }
  std::string hex = Sha256(bytes).ToHex();
  KC_RETURN_IF_ERROR(MakeDirs(DirName(ManifestPath(hex)), kManifestDirMode));
  KC_RETURN_IF_ERROR(WriteFileAtomic(ManifestPath(hex), bytes, kManifestFileMode));
  return hex;
}

absl::StatusOr<v1::CaptureManifest> ManifestStore::ReadManifest(const std::string& digest_hex) {
  if (digest_hex.size() != 64 || !IsLowerHex(digest_hex)) {
    return absl::DataLossError(absl::StrCat("malformed manifest digest '", digest_hex, "'"));
  }
  auto file = ReadFile(ManifestPath(digest_hex));
  if (!file.ok()) {
    // Only refs name manifests: one that is gone is lost data, not an
    // absent capture.
    if (absl::IsNotFound(file.status())) {
      return absl::DataLossError(absl::StrCat("manifest ", digest_hex, " is missing"));
    }
    return file.status();
  }
  std::string bytes = std::move(*file);
  if (Sha256(bytes).ToHex() != digest_hex) {
    return absl::DataLossError(absl::StrCat("manifest ", digest_hex, " does not match its digest"));
  }
  v1::CaptureManifest m;
  if (!m.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat("manifest ", digest_hex, " does not parse"));
  }
  return m;
}

absl::Status ManifestStore::DeleteManifest(const std::string& digest_hex) {
  std::string path = ManifestPath(digest_hex);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(errno, absl::StrCat("unlink ", path));
  }
  return FsyncDir(DirName(path));
}

absl::Status ManifestStore::WriteRef(const std::string& capture_id, const std::string& digest_hex) {
  return WriteFileAtomic(absl::StrCat(refs_dir(), "/", capture_id), digest_hex + "\n",
                         kManifestFileMode);
}

absl::StatusOr<std::string> ManifestStore::ReadRef(const std::string& capture_id) {
  auto content = ReadFile(absl::StrCat(refs_dir(), "/", capture_id));
  if (!content.ok()) {
    if (absl::IsNotFound(content.status())) {
      return absl::NotFoundError(absl::StrCat("capture ", capture_id, " not found"));
    }
    return content.status();
  }
  return std::string(absl::StripAsciiWhitespace(*content));
}

absl::StatusOr<v1::CaptureManifest> ManifestStore::ReadCaptureManifest(
    const std::string& capture_id) {
  KC_ASSIGN_OR_RETURN(std::string hex, ReadRef(capture_id));
  auto m = ReadManifest(hex);
  if (!m.ok()) {
    return absl::Status(m.status().code(),
                        absl::StrCat("capture ", capture_id, ": ", m.status().message()));
  }
  // A manifest names its capture: a ref that leads to another capture's
  // manifest is damaged, and serving it would show (or delete) the wrong one.
  if (m->capture_id() != capture_id) {
    return absl::DataLossError(absl::StrCat("capture ", capture_id, ": its ref names manifest ",
                                            hex, ", which belongs to capture ",
                                            m->capture_id()));
  }
  // Readers allocate from these numbers: a manifest that imported before
  // validation existed (or was altered) must not make them.
  if (absl::Status valid = format::ValidateManifest(*m); !valid.ok()) {
    return absl::DataLossError(
        absl::StrCat("capture ", capture_id, ": malformed manifest: ", valid.message()));
  }
  return m;
}

absl::Status ManifestStore::DeleteRef(const std::string& capture_id) {
  std::string path = absl::StrCat(refs_dir(), "/", capture_id);
  if (::unlink(path.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("unlink ref ", path));
  }
  return FsyncDir(refs_dir());
}

absl::StatusOr<std::vector<std::string>> ManifestStore::ListRefs() {
  DIR* dir = ::opendir(refs_dir().c_str());
  if (dir == nullptr) return ErrnoError(errno, absl::StrCat("opendir ", refs_dir()));
  std::vector<std::string> out;
  while (struct dirent* e = ::readdir(dir)) {
    if (IsValidCaptureId(e->d_name)) out.emplace_back(e->d_name);
  }
  ::closedir(dir);
  return out;
}

}  // namespace kerncap::store
