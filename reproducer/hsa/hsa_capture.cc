#include "reproducer/hsa/hsa_capture.h"

#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/hsa/code_object.h"
#include "common/status_macros.h"
#include "reproducer/replay/capture_source.h"

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

  std::map<std::pair<uint64_t, uint32_t>, const v1::Region*> post;
  for (const v1::Region& r : m.post().regions()) post[{r.va(), r.device()}] = &r;
  for (const v1::Region& r : m.pre().regions()) {
    KC_RETURN_IF_ERROR(CheckRegion(r, absl::StrFormat("pre region at 0x%x", r.va())));
    ReplayRegion rr;
    rr.va = r.va();
    rr.name = r.name();
    rr.module_variable = r.kind() == v1::REGION_MODULE_GLOBAL || r.kind() == v1::REGION_CONSTANT;
    KC_ASSIGN_OR_RETURN(rr.pre, ReadChunkListBytes(r.data(), read));
    auto it = post.find({r.va(), r.device()});
    const v1::Region* pr = it == post.end() ? nullptr : it->second;
    if (pr != nullptr) {
      KC_RETURN_IF_ERROR(CheckRegion(*pr, absl::StrFormat("post region at 0x%x", pr->va())));
    }
    if (pr != nullptr && !pr->diff()) {
      KC_ASSIGN_OR_RETURN(rr.post, ReadChunkListBytes(pr->data(), read));
    } else if (pr != nullptr || m.post_complete()) {
      rr.post.reserve(rr.pre.size());
      std::string chunk;
      const v1::ChunkList& list = r.data();
      for (uint64_t c = 0; c < ChunkCount(list); ++c) {
        const uint32_t len = ChunkLength(list, c);
        KC_RETURN_IF_ERROR(read(PostDigest(r, pr, c), len, &chunk));
        rr.post += chunk;
      }
    }
    in.regions.push_back(std::move(rr));
  }
  return in;
}

}  // namespace kerncap::replay::hsa
