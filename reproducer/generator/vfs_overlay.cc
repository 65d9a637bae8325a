#include "reproducer/generator/vfs_overlay.h"

#ifdef KERNCAP_GENERATOR_HAVE_LLVM
#include "llvm/Support/VirtualFileSystem.h"
#include "llvm/Support/raw_ostream.h"
#endif

namespace kerncap::repro {

absl::StatusOr<std::string> WriteVfsOverlay(
    const std::vector<std::pair<std::string, std::string>>& mappings) {
#ifdef KERNCAP_GENERATOR_HAVE_LLVM
  // The writer wants absolute real paths and strips the overlay folder from
  // them; any absolute stand-in for the project root serves, since only the
  // part after it is written.
  const std::string kProjectRoot = "/kerncap-project";
  llvm::vfs::YAMLVFSWriter writer;
  writer.setOverlayDir(kProjectRoot);
  writer.setUseExternalNames(true);  // diagnostics name the copies in src/
  for (const auto& [original, relative] : mappings) {
    writer.addFileMapping(original, kProjectRoot + "/" + relative);
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  writer.write(os);
  os.flush();
  return text;
#else
  (void)mappings;
  return absl::UnimplementedError("this build has no LLVM (VFS overlay writer)");
#endif
}

}  // namespace kerncap::repro
