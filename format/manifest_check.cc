#include "format/manifest_check.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace kerncap::format {
namespace {

absl::Status Bad(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

std::string RegionWhere(const char* image, int index, const v1::Region& r) {
  return absl::StrFormat("%s region %d at va 0x%x", image, index, r.va());
}

}  // namespace

uint64_t ChunkCount(const v1::ChunkList& list) {
  if (list.chunk_size() == 0) return 0;
  return list.size() / list.chunk_size() + (list.size() % list.chunk_size() != 0);
}

uint32_t ChunkLength(const v1::ChunkList& list, uint64_t index) {
  const uint64_t cs = list.chunk_size();
  if (cs == 0 || index >= ChunkCount(list)) return 0;
  return static_cast<uint32_t>(std::min<uint64_t>(cs, list.size() - index * cs));
}

absl::Status ValidateChunkList(const v1::ChunkList& list, const v1::Region* region,
                               absl::string_view where) {
  const uint32_t cs = list.chunk_size();
  if (cs == 0) {
    if (list.size() != 0 || list.chunk_digests_size() != 0 ||
        (region != nullptr && region->changed_chunks_size() != 0)) {
      return Bad(where, absl::StrCat("chunk_size is 0 for ", list.size(), " bytes"));
    }
    return absl::OkStatus();
  }
  if (cs < kMinChunkSize || cs > kMaxChunkSize || (cs & (cs - 1)) != 0) {
    return Bad(where, absl::StrCat("chunk_size ", cs, " is not a power of two between ",
                                   kMinChunkSize, " and ", kMaxChunkSize));
  }
  const uint64_t chunks = ChunkCount(list);
  const uint64_t digests = static_cast<uint64_t>(list.chunk_digests_size());
  if (region != nullptr && region->diff()) {
    if (static_cast<uint64_t>(region->changed_chunks_size()) != digests) {
      return Bad(where, absl::StrCat(region->changed_chunks_size(), " changed_chunks but ",
                                     digests, " digests"));
    }
    for (int i = 0; i < region->changed_chunks_size(); ++i) {
      const uint64_t c = region->changed_chunks(i);
      if (c >= chunks) {
        return Bad(where, absl::StrCat("changed chunk ", c, " beyond its ", chunks, " chunks"));
      }
      if (i > 0 && c <= region->changed_chunks(i - 1)) {
        return Bad(where, "changed_chunks are not strictly increasing");
      }
    }
  } else {
    if (region != nullptr && region->changed_chunks_size() != 0) {
      return Bad(where, "changed_chunks on a region that is not a diff");
    }
    if (digests != chunks) {
      return Bad(where, absl::StrCat(digests, " digests for ", chunks, " chunks of ", cs,
                                     " bytes (", list.size(), " bytes)"));
    }
  }
  for (int i = 0; i < list.chunk_digests_size(); ++i) {
    const size_t n = list.chunk_digests(i).size();
    if (n != 0 && n != 32) {
      return Bad(where, absl::StrCat("digest ", i, " is ", n, " bytes, not 32 (SHA-256)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateManifest(const v1::CaptureManifest& m, const ManifestLimits& limits) {
  if (m.format_version() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "manifest format_version ", m.format_version(), " is newer than this reader (1)"));
  }
  const uint64_t regions = static_cast<uint64_t>(m.pre().regions_size()) +
                           static_cast<uint64_t>(m.post().regions_size());
  if (regions > limits.max_regions) {
    return absl::InvalidArgumentError(
        absl::StrCat("manifest has ", regions, " regions, more than ", limits.max_regions));
  }
  if (m.argument_blob().size() > limits.max_argument_blob_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("argument blob of ", m.argument_blob().size(),
                                                   " bytes is larger than ",
                                                   limits.max_argument_blob_bytes));
  }
  uint64_t logical = 0;
  for (const auto* image : {&m.pre(), &m.post()}) {
    const char* name = image == &m.pre() ? "pre" : "post";
    for (int i = 0; i < image->regions_size(); ++i) {
      const v1::Region& r = image->regions(i);
      const std::string where = RegionWhere(name, i, r);
      if (r.data().size() > limits.max_region_bytes) {
        return Bad(where, absl::StrCat(r.data().size(), " bytes, more than the ",
                                       limits.max_region_bytes, " a region may have"));
      }
      // [va, va + size) must lie inside the 64-bit address space: a region
      // that wraps past 2^64 has no address to restore at, and every end
      // computed as va + size would come out below its start.
      if (r.data().size() > std::numeric_limits<uint64_t>::max() - r.va()) {
        return Bad(where, absl::StrFormat("va 0x%x + size %d bytes wraps the 64-bit address "
                                          "space",
                                          r.va(), r.data().size()));
      }
      KC_RETURN_IF_ERROR(ValidateChunkList(r.data(), &r, where));
      logical += r.data().size();
      if (logical > limits.max_logical_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "regions hold more than ", limits.max_logical_bytes, " bytes together"));
      }
    }
  }
  if (static_cast<uint64_t>(m.code_objects_size()) > limits.max_code_objects) {
    return absl::InvalidArgumentError(absl::StrCat("manifest has ", m.code_objects_size(),
                                                   " code objects, more than ",
                                                   limits.max_code_objects));
  }
  for (int i = 0; i < m.code_objects_size(); ++i) {
    const v1::ChunkList& list = m.code_objects(i).data();
    const std::string where = absl::StrCat("code object ", i, " (", m.code_objects(i).name(), ")");
    if (list.size() > limits.max_code_object_bytes) {
      return Bad(where, absl::StrCat(list.size(), " bytes, more than the ",
                                     limits.max_code_object_bytes, " a code object may have"));
    }
    KC_RETURN_IF_ERROR(ValidateChunkList(list, nullptr, where));
  }
  return absl::OkStatus();
}

}  // namespace kerncap::format
