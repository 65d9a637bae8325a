// wire_convert.h: conversions between agent-link wire messages (std-only
// structs, common/agent_link/messages.h) and kerncap.v1 protos. Daemon side.
#ifndef KERNCAP_DAEMON_AGENT_LINK_WIRE_CONVERT_H_
#define KERNCAP_DAEMON_AGENT_LINK_WIRE_CONVERT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/agent_link/messages.h"
#include "common/agent_link/result.h"
#include "common/agent_link/selector.h"
#include "common/control/api_selector.h"
#include "kerncap/v1/control.pb.h"
#include "kerncap/v1/manifest.pb.h"

namespace kerncap::link {

// InvalidArgument carrying the link error message (ok for an ok status).
absl::Status ToAbslStatus(const LinkStatus& status);

// The link's enumerations (vocabulary.h; names checked when the frame was
// decoded) as their kerncap.v1 counterparts; kUnspecified -> *_UNSPECIFIED.
v1::Platform PlatformFromWire(Platform platform);
v1::RegionKind RegionKindFromWire(RegionKind kind);
v1::CodeObjectFormat CodeObjectFormatFromWire(CodeObjectFormat format);
v1::ArgumentKind ArgumentKindFromWire(ArgumentKind kind);

v1::DeviceIdentity DeviceFromWire(const DeviceInfo& device);
v1::AgentInfo AgentInfoFromHello(const HelloMsg& hello, const std::string& agent_id,
                                 int64_t connected_unix_ms);


// Checks CaptureBegin.texture_objects against the argument blob (an agent is
// not trusted): at most kMaxTextureObjects objects (their type and resource
// type were checked when the frame was decoded), each named by 1..kMaxTextureObjects argument offsets that
// are 8-byte aligned words inside the blob holding the handle, descriptor
// lists of their fixed lengths. InvalidArgument naming the problem.
inline constexpr size_t kMaxTextureObjects = 64;
absl::Status CheckTextureObjects(const CaptureBeginMsg& begin, absl::string_view argument_blob);

// Fills the identity parts of a manifest from the agent's Hello and the
// capture's CaptureBegin (argument blob from the frame payload). Texture
// objects are copied as they are: check them first (CheckTextureObjects).
void FillManifest(const HelloMsg& hello, const CaptureBeginMsg& begin,
                  const std::string& argument_blob, v1::CaptureManifest* manifest);

// Checks CaptureBegin.graph (an agent is not trusted): node_index below
// node_count, node_path indices joined by '/' within kMaxGraphNodePath.
// Ok when absent.
absl::Status CheckGraphOrigin(const CaptureBeginMsg& begin);

}  // namespace kerncap::link

#endif  // KERNCAP_DAEMON_AGENT_LINK_WIRE_CONVERT_H_
