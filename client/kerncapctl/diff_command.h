// diff_command.h: `kerncapctl diff CAP_A CAP_B`, how two captures differ:
// the kernel and its code object, the launch configuration, the argument
// bytes, and per memory region whether its input (the pre-dispatch image)
// and its output (the state after the dispatch) differ, and by how many
// chunks and bytes. Chunks are compared by their content address, so the
// answer is exact at chunk granularity (a differing chunk counts all its
// bytes) and needs no chunk data.
#ifndef KERNCAP_CLIENT_KERNCAPCTL_DIFF_COMMAND_H_
#define KERNCAP_CLIENT_KERNCAPCTL_DIFF_COMMAND_H_

#include <string>

#include "absl/status/status.h"
#include "client/kerncapctl/connection.h"
#include "client/kerncapctl/output.h"
#include "kerncap/v1/manifest.pb.h"
#include "nlohmann/json.hpp"

namespace kerncap::ctl {

// The comparison as a document (docs/JSON.md): "identical", "kernel",
// "launch" (differing fields), "arguments" (differing ones), "regions"
// (every region that differs in its input or output, or exists in one only).
nlohmann::json DiffManifests(const v1::CaptureManifest& a, const v1::CaptureManifest& b);

absl::Status CmdDiff(Connection& c, Output o, const std::string& a, const std::string& b);

}  // namespace kerncap::ctl

#endif  // KERNCAP_CLIENT_KERNCAPCTL_DIFF_COMMAND_H_
