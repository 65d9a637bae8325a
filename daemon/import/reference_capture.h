// reference_capture.h: imports a capture folder written by the reference AMD
// Kerncap tool (intellikit kerncap/, folder "capture/") into a CaptureSink.
//
// Input files (layout of the reference tool's capture folder):
//   metadata.json        kernel_name, kernel_symbol, gpu_arch, grid{x,y,z}
//                        (HSA work-items), block{x,y,z}, lds_size,
//                        kernarg_slots[{offset,size,value_kind,value_type,name}],
//                        optional hsaco_sha256, sgpr_count, vgpr_count,
//                        kernarg_segment_size_meta, triton_user_name,
//                        constexpr_values
//   dispatch.json        agent_name, isa_name, wavefront_size, grid[3], block[3],
//                        group_segment_size, private_segment_size, kernarg_size,
//                        dispatch_index, mangled_name, demangled_name
//   memory_regions.json  {"regions":[{base,size,is_pool,is_vmem,contains_kernarg}]}
//   memory/region_<hex base>.bin   the region's bytes (exactly `size` bytes)
//   kernarg_raw.bin      the kernel argument buffer (hidden args included)
//   kernel.hsaco         the whole code object
//   module_variables.json (optional) {"variables":[{executable_sha256,name,
//                        size,blob}]}. The reference tool writes each
//                        variable's bytes to module_variables/<...>.bin; the
//                        format of `blob` is not pinned down by our sources, so
//                        it is accepted as a path relative to the folder, or
//                        else base64, or else hex. An optional "address" (or
//                        "va") gives the variable's address.
// Numbers may be JSON numbers or strings ("0x7f00..." or decimal).
//
// The reference tool snapshots memory AFTER the kernel ran, so the regions
// become the pre image but the manifest is tagged
// kerncap.reference_post_state=true and post_complete=false.
//
// Region files are streamed through WriteRegion in 4 MiB pieces (a multiple
// of every valid store chunk size), never read whole. Every file is opened
// relative to the folder, never through a symbolic link, and only if it is a
// regular file (capture_folder.h); declared sizes and counts are checked
// against the files and the capture limits (format/manifest_check.h) before
// the sink allocates anything for them.
#ifndef KERNCAP_DAEMON_IMPORT_REFERENCE_CAPTURE_H_
#define KERNCAP_DAEMON_IMPORT_REFERENCE_CAPTURE_H_

#include <string>

#include "absl/status/statusor.h"
#include "daemon/capture_sink.h"

namespace kerncap::import {

// Returns the new capture id. InvalidArgument naming the file (and field)
// for missing or malformed input; the sink's errors otherwise.
absl::StatusOr<std::string> ImportReferenceCapture(const std::string& folder, CaptureSink& sink);

}  // namespace kerncap::import

#endif  // KERNCAP_DAEMON_IMPORT_REFERENCE_CAPTURE_H_
