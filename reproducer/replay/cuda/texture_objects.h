// texture_objects.h: a capture's texture and surface objects
// (CaptureManifest.texture_objects, manifest.proto) recreated for one
// replay. A handle is only meaningful in the process that created it, so
// each object is created again from its recorded descriptors over the
// restored memory (its device address translated where the replay placed
// that memory: relocated ranges, module variables), and its new handle is
// written into every argument-blob word that held the captured one. The
// objects are destroyed with the replay (Destroy, or the destructor; the
// context must be current).
//
// Linear and pitch2D resources only. Objects over CUDA arrays and mipmapped
// arrays are refused: the agent does not capture array contents (and does
// not capture such dispatches), so a manifest that names one came from
// elsewhere and cannot be replayed faithfully.
//
// Everything in the manifest is checked first (Check): a file is untrusted.
#ifndef KERNCAP_REPRODUCER_REPLAY_CUDA_TEXTURE_OBJECTS_H_
#define KERNCAP_REPRODUCER_REPLAY_CUDA_TEXTURE_OBJECTS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerncap/v1/manifest.pb.h"
#include "reproducer/replay/cuda/cuda_driver.h"
#include "reproducer/replay/core/report.h"

namespace kerncap::replay {

// Bytes an object's resource covers from resource.device_ptr on (linear:
// size_bytes; pitch2D: common/texture_layout.h); 0 for array resources.
uint64_t TextureResourceExtent(const v1::TextureResource& resource);

// Where captured memory [va, va+size) lives in this replay: its replay
// address when it lies inside one restored region, else an error that says
// why.
using PlaceFn = std::function<absl::StatusOr<uint64_t>(uint64_t va, uint64_t size)>;

class TextureObjects {
 public:
  explicit TextureObjects(const CudaDriver& cu) : cu_(cu) {}
  ~TextureObjects() { Destroy(); }
  TextureObjects(const TextureObjects&) = delete;
  TextureObjects& operator=(const TextureObjects&) = delete;

  // At most this many objects in one manifest.
  static constexpr int kMaxObjects = 1024;

  // Structural checks of manifest.texture_objects against its argument blob:
  // known types, a linear or pitch2D resource (FailedPrecondition naming the
  // object for arrays), a non-empty extent, 1..kMaxObjects argument offsets
  // that are aligned words inside the blob holding the handle and belong to
  // no other object, descriptor lists of their fixed lengths.
  // InvalidArgument (or FailedPrecondition) naming the object otherwise.
  static absl::Status Check(const v1::CaptureManifest& manifest);

  // Check(), then creates every object (the replay's context current) over
  // the memory `place` gives, and writes each new handle into `args` (the
  // replay's argument blob) at its offsets. On failure nothing stays created
  // and the error names the object, its argument offset and the driver's
  // message.
  absl::Status Create(const v1::CaptureManifest& manifest, const PlaceFn& place,
                      std::string* args);
  // Destroys what Create made (idempotent).
  void Destroy();

  // What was recreated, for reports (ReplayInfo::texture_objects).
  const std::vector<ReplayedTextureObject>& objects() const { return objects_; }

 private:
  const CudaDriver& cu_;
  std::vector<ReplayedTextureObject> objects_;
};

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CUDA_TEXTURE_OBJECTS_H_
