// manifest_fuzzer.cc: a serialized CaptureManifest, as an import stream, a
// .kcap file or a store's manifest file delivers it, through the one
// validation every reader applies (format/manifest_check.h), then through
// what readers do with a manifest that passed: walk its chunk lists, expand
// diff regions, collect its chunks. Any crash, sanitizer report or huge
// allocation is a bug.
#include <cstddef>
#include <cstdint>

#include "format/manifest_util.h"
#include "format/store_reader.h"
#include "format/manifest_check.h"
#include "kerncap/v1/manifest.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kerncap::v1::CaptureManifest m;
  if (!m.ParseFromArray(data, static_cast<int>(size))) return 0;
  if (!kerncap::format::ValidateManifest(m).ok()) return 0;
  uint64_t digests = 0;
  kerncap::store::ForEachManifestChunk(m, [&](const kerncap::Digest&) { ++digests; });
  auto chunks = kerncap::service::ManifestChunks(m);
  // A valid manifest's lists are consistent: every reference is collectable.
  if (!chunks.ok()) __builtin_trap();
  for (const auto* image : {&m.pre(), &m.post()}) {
    for (const kerncap::v1::Region& r : image->regions()) {
      const kerncap::v1::ChunkList& list = r.data();
      const uint64_t n = kerncap::format::ChunkCount(list);
      uint64_t covered = 0;
      // What a restore does: the length of every chunk, by index.
      if (!r.diff()) {
        for (uint64_t i = 0; i < n && i < 4096; ++i) covered += kerncap::format::ChunkLength(list, i);
        if (n <= 4096 && covered != list.size()) __builtin_trap();
      } else {
        for (uint32_t c : r.changed_chunks()) {
          if (c >= n) __builtin_trap();
          covered += kerncap::format::ChunkLength(list, c);
        }
      }
      (void)kerncap::service::ZeroBytes(r);
    }
  }
  (void)digests;
  return 0;
}
