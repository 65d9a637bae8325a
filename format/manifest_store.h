// manifest_store.h: capture manifests and the refs that make them visible.
//
//   manifests/<xx>/<sha256 hex>   serialized CaptureManifest; the name is the
//                                 SHA-256 of the file's bytes (checked on read)
//   refs/captures/<capture id>    "<sha256 hex>\n"
//
// Both are written with WriteFileAtomic (tmp-*, fsync, rename, fsync dir).
// The ref is written last: a capture exists iff its ref exists.
//
#ifndef KERNCAP_FORMAT_MANIFEST_STORE_H_
#define KERNCAP_FORMAT_MANIFEST_STORE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/capture_id.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::store {

// Capture ids are defined once, in common/capture_id.h.
using ::kerncap::IsValidCaptureId;
using ::kerncap::IsValidCaptureIdPrefix;
using ::kerncap::kCaptureIdHexDigits;
using ::kerncap::kCaptureIdPrefix;
using ::kerncap::NewCaptureId;

// Modes of what the store creates (the store's kStoreDirMode/kStoreFileMode:
// private to the daemon's user and group).
inline constexpr int kManifestDirMode = 0750;
inline constexpr int kManifestFileMode = 0640;

class ManifestStore {
 public:
  explicit ManifestStore(std::string root) : root_(std::move(root)) {}

  absl::Status Init();  // creates manifests/ and refs/captures/

  // Serializes and durably writes the manifest; returns its digest (hex).
  absl::StatusOr<std::string> WriteManifest(const v1::CaptureManifest& manifest);
  // DataLoss when the file is missing, does not hash to its name or does
  // not parse.
  absl::StatusOr<v1::CaptureManifest> ReadManifest(const std::string& digest_hex);
  absl::Status DeleteManifest(const std::string& digest_hex);

  absl::Status WriteRef(const std::string& capture_id, const std::string& digest_hex);
  absl::StatusOr<std::string> ReadRef(const std::string& capture_id);
  // The manifest the capture's ref names; errors name the capture. NotFound
  // only when the ref is gone; DataLoss when the manifest is missing or
  // damaged, or is another capture's (the manifest names its capture).
  absl::StatusOr<v1::CaptureManifest> ReadCaptureManifest(const std::string& capture_id);
  absl::Status DeleteRef(const std::string& capture_id);
  // Ids of all refs (valid names only; tmp-* and junk are skipped).
  absl::StatusOr<std::vector<std::string>> ListRefs();

  std::string refs_dir() const { return root_ + "/refs/captures"; }
  std::string manifests_dir() const { return root_ + "/manifests"; }

 private:
  std::string ManifestPath(const std::string& digest_hex) const;
  std::string root_;
};

// Resolves a capture id, or a prefix of one, against ids in ascending order,
// starting at `from`, the first id not less than it (the owner's
// lower_bound): the one id it names. InvalidArgument when it is malformed or
// ambiguous, NotFound when nothing matches (`where`, e.g. " in store DIR",
// ends that message).
template <typename SortedIdIterator>
absl::StatusOr<std::string> MatchCaptureIdPrefix(absl::string_view id_or_prefix,
                                                 SortedIdIterator from, SortedIdIterator end,
                                                 absl::string_view where = "") {
  if (!IsValidCaptureIdPrefix(id_or_prefix)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed capture id '", id_or_prefix,
                     "': expected cap-<12 hex digits> or a prefix with at least one digit"));
  }
  std::vector<std::string> matches;
  for (auto it = from; it != end && absl::StartsWith(*it, id_or_prefix) && matches.size() < 5;
       ++it) {
    matches.push_back(*it);
  }
  if (matches.empty()) {
    return absl::NotFoundError(absl::StrCat("capture ", id_or_prefix, " not found", where));
  }
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("capture id prefix '", id_or_prefix,
                                                   "' is ambiguous (", absl::StrJoin(matches, ", "),
                                                   matches.size() >= 5 ? ", ..." : "", ")"));
  }
  return matches[0];
}

}  // namespace kerncap::store

#endif  // KERNCAP_FORMAT_MANIFEST_STORE_H_
