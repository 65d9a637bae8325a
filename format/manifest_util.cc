#include "format/manifest_util.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace kerncap::service {
namespace {

// Raw size of chunk `index` of a list of `size` bytes cut at `chunk_size`.
uint32_t ChunkRawSize(uint64_t size, uint32_t chunk_size, uint64_t index) {
  uint64_t begin = index * chunk_size;
  if (begin >= size) return 0;
  return static_cast<uint32_t>(std::min<uint64_t>(chunk_size, size - begin));
}

class Collector {
 public:
  absl::Status AddList(const v1::ChunkList& list, const v1::Region* region,
                       absl::string_view where) {
    if (list.chunk_digests_size() == 0) return absl::OkStatus();
    if (list.chunk_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": chunk_size is 0"));
    }
    const uint64_t chunks_in_size = (list.size() + list.chunk_size() - 1) / list.chunk_size();
    const bool diff = region != nullptr && region->diff();
    if (diff && region->changed_chunks_size() != list.chunk_digests_size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", region->changed_chunks_size(),
                                                     " changed_chunks but ",
                                                     list.chunk_digests_size(), " digests"));
    }
    if (!diff && static_cast<uint64_t>(list.chunk_digests_size()) > chunks_in_size) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", list.chunk_digests_size(),
                                                     " digests for ", list.size(), " bytes"));
    }
    for (int i = 0; i < list.chunk_digests_size(); ++i) {
      const std::string& raw = list.chunk_digests(i);
      if (raw.empty()) continue;  // all-zero chunk
      KC_ASSIGN_OR_RETURN(Digest digest, Digest::FromBytes(raw));
      uint64_t index = diff ? region->changed_chunks(i) : static_cast<uint64_t>(i);
      if (index >= chunks_in_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": chunk index ", index, " beyond the region's ", chunks_in_size, " chunks"));
      }
      if (seen_.insert(digest).second) {
        out_.push_back(ChunkRef{digest, ChunkRawSize(list.size(), list.chunk_size(), index)});
      }
    }
    return absl::OkStatus();
  }

  std::vector<ChunkRef> Take() { return std::move(out_); }

 private:
  absl::flat_hash_set<Digest> seen_;
  std::vector<ChunkRef> out_;
};

}  // namespace

absl::Status ForEachChunkList(
    const v1::CaptureManifest& manifest,
    absl::FunctionRef<absl::Status(const v1::ChunkList& list, const v1::Region* region,
                                   absl::string_view where)>
        fn) {
  for (const auto* image : {&manifest.pre(), &manifest.post()}) {
    const char* name = image == &manifest.pre() ? "pre" : "post";
    for (int i = 0; i < image->regions_size(); ++i) {
      const v1::Region& r = image->regions(i);
      KC_RETURN_IF_ERROR(fn(r.data(), &r, absl::StrCat(name, " region ", i)));
    }
  }
  for (int i = 0; i < manifest.code_objects_size(); ++i) {
    KC_RETURN_IF_ERROR(fn(manifest.code_objects(i).data(), nullptr, absl::StrCat("code object ", i)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ChunkRef>> ManifestChunks(const v1::CaptureManifest& manifest) {
  Collector c;
  KC_RETURN_IF_ERROR(ForEachChunkList(
      manifest, [&](const v1::ChunkList& list, const v1::Region* region, absl::string_view where) {
        return c.AddList(list, region, where);
      }));
  return c.Take();
}

uint64_t ZeroBytes(const v1::Region& region) {
  const v1::ChunkList& list = region.data();
  if (list.chunk_size() == 0) return 0;
  uint64_t zero = 0;
  for (int i = 0; i < list.chunk_digests_size(); ++i) {
    if (!list.chunk_digests(i).empty()) continue;
    uint64_t index = region.diff() && i < region.changed_chunks_size() ? region.changed_chunks(i)
                                                                       : static_cast<uint64_t>(i);
    zero += ChunkRawSize(list.size(), list.chunk_size(), index);
  }
  return zero;
}

}  // namespace kerncap::service
