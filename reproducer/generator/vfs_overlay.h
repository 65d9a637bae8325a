// vfs_overlay.h: the clang VFS overlay of a HIP reproducer (`-ivfsoverlay
// vfs.yaml`), written with LLVM's YAMLVFSWriter.
//
// It maps each copied file's path on the capture host (the virtual name, an
// absolute path by the overlay format's rules) onto its copy under src/. The
// copies are named relative to the overlay file ("overlay-relative": true),
// so the project stays relocatable: clang resolves them against the folder
// holding vfs.yaml wherever it is. Sources that #include an absolute path of
// the original tree, and anything else that names it, then find the copies.
// The overlay must sit at the project root (LLVM requires the copies to lie
// under the overlay's folder).
#ifndef KERNCAP_REPRODUCER_GENERATOR_VFS_OVERLAY_H_
#define KERNCAP_REPRODUCER_GENERATOR_VFS_OVERLAY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kerncap::repro {

// `mappings`: (capture-host absolute path, path relative to the project root).
// Unimplemented when built without LLVM.
absl::StatusOr<std::string> WriteVfsOverlay(
    const std::vector<std::pair<std::string, std::string>>& mappings);

}  // namespace kerncap::repro

#endif  // KERNCAP_REPRODUCER_GENERATOR_VFS_OVERLAY_H_
