#include "reproducer/replay/hsa/hsa_capture.h"

#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/hsa/code_object.h"
#include "common/status_macros.h"
#include "reproducer/replay/core/capture_source.h"

namespace kerncap::replay::hsa {

absl::StatusOr<std::string> ReadChunkListBytes(const v1::ChunkList& list, const ChunkReader& read) {
  std::string out;
  out.reserve(list.size());
  std::string chunk;
  const uint64_t n = ChunkCount(list);
  if (static_cast<uint64_t>(list.chunk_digests_size()) != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk list of %u bytes has %d digests, expected %u", list.size(),
        list.chunk_digests_size(), n));
  }
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t len = ChunkLength(list, i);
    KC_RETURN_IF_ERROR(read(list.chunk_digests(static_cast<int>(i)), len, &chunk));
    if (chunk.size() != len) return absl::DataLossError("chunk has the wrong size");
    out += chunk;
  }
  return out;
}

absl::StatusOr<HsaReplayInput> HsaInputFromManifest(const v1::CaptureManifest& m,
                                                    const ChunkReader& read) {
  if (m.kernel().platform() != v1::PLATFORM_HSA &&
      m.kernel().platform() != v1::PLATFORM_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "capture ", m.capture_id(), " is not an HSA capture (platform ",
        v1::Platform_Name(m.kernel().platform()), ")"));
  }
  HsaReplayInput in;
  in.kernel = m.kernel().mangled_name();
  in.kernarg = m.argument_blob();

  // The code object holding the kernel.
  bool found = false;
  for (const v1::CodeObject& co : m.code_objects()) {
    if (co.format() != v1::CODE_OBJECT_HSACO) continue;
    KC_ASSIGN_OR_RETURN(std::string bytes, ReadChunkListBytes(co.data(), read));
    auto md = ::kerncap::hsa::ParseCodeObjectMetadata(bytes);
    const bool has_kernel = md.ok() && md->FindKernel(in.kernel) != nullptr;
    if (!found || has_kernel) {
      in.code_object = std::move(bytes);
      found = true;
    }
    if (has_kernel) break;
  }
  if (!found) {
    return absl::InvalidArgumentError(
        absl::StrCat("capture ", m.capture_id(), " holds no AMDGPU code object (hsaco)"));
  }

  const v1::LaunchConfig& l = m.launch();
  for (int i = 0; i < 3 && i < l.grid_size(); ++i) in.grid[i] = l.grid(i);
  for (int i = 0; i < 3 && i < l.block_size(); ++i) {
    in.workgroup[i] = static_cast<uint16_t>(l.block(i));
  }
  in.group_segment_size = l.shared_mem_bytes();
  in.private_segment_size = l.private_mem_bytes();

  for (const v1::Argument& a : m.arguments()) {
    ReplayArgument ra;
    ra.offset = a.offset();
    ra.size = a.size();
    ra.value_kind = a.value_kind();
    if (ra.value_kind.empty() && a.kind() == v1::ARG_HIDDEN &&
        absl::StartsWith(a.name(), "hidden_")) {
      ra.value_kind = a.name();  // agents before value_kind travelled
    }
    in.arguments.push_back(std::move(ra));
  }

  // Regions by chunk digest; their bytes are read when the replay needs
  // them (restore pipeline, chunk-wise comparison).
  in.read = [read](const std::string& digest, uint32_t size, char* out) -> absl::Status {
    std::string bytes;
    KC_RETURN_IF_ERROR(read(digest, size, &bytes));
    if (bytes.size() != size) return absl::DataLossError("chunk has the wrong size");
    std::memcpy(out, bytes.data(), size);
    return absl::OkStatus();
  };
  std::map<std::pair<uint64_t, uint32_t>, const v1::Region*> post;
  for (const v1::Region& r : m.post().regions()) post[{r.va(), r.device()}] = &r;
  for (const v1::Region& r : m.pre().regions()) {
    KC_RETURN_IF_ERROR(CheckRegion(r, absl::StrFormat("pre region at 0x%x", r.va())));
    ReplayRegion rr;
    rr.va = r.va();
    rr.size = r.data().size();
    rr.name = r.name();
    rr.module_variable = r.kind() == v1::REGION_MODULE_GLOBAL || r.kind() == v1::REGION_CONSTANT;
    auto it = post.find({r.va(), r.device()});
    const v1::Region* pr = it == post.end() ? nullptr : it->second;
    if (pr != nullptr) {
      KC_RETURN_IF_ERROR(CheckRegion(*pr, absl::StrFormat("post region at 0x%x", pr->va())));
      if (!pr->diff() && (pr->data().size() != r.data().size() ||
                          pr->data().chunk_size() != r.data().chunk_size())) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "post region at 0x%x has another size or chunk size than its pre region", r.va()));
      }
    }
    // A region missing from a complete post image did not change (post =
    // pre); with no complete post image nothing is validated.
    rr.validated = pr != nullptr || m.post_complete();
    const v1::ChunkList& list = r.data();
    for (uint64_t c = 0; c < ChunkCount(list); ++c) {
      RegionChunk ch;
      ch.size = ChunkLength(list, c);
      ch.pre_digest = list.chunk_digests(static_cast<int>(c));
      if (rr.validated) ch.post_digest = PostDigest(r, pr, c);
      rr.chunks.push_back(std::move(ch));
    }
    in.regions.push_back(std::move(rr));
  }
  return in;
}

}  // namespace kerncap::replay::hsa
