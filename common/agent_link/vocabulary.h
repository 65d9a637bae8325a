// vocabulary.h: the enumerations the agent link carries, each defined once,
// with the lower-case name it travels as in a frame's JSON body
// (messages.h). The agent's capture core uses these types directly
// (agent/core/capture_types.h), so a value goes from the backend that
// observed it to the daemon without being spelled as a string anywhere but on
// the wire; kerncapd maps them to the kerncap.v1 enums (daemon/agent_link/
// wire_convert.h).
//
// Numeric values: where a kerncap.v1 enum of the same meaning exists, the
// values are that enum's (so a conversion can be checked by a static_assert);
// 0 is the "not stated" value of enums whose field an agent may leave out,
// and it travels as the empty string, as it always has.
//
// Decoding is strict: a name that is not in the table fails the frame with a
// message that names the field and lists the accepted names (ParseWireName),
// so a hostile or newer peer's value is never mistaken for a default.
//
// Std-only: compiled into the agent.
#ifndef KERNCAP_COMMON_AGENT_LINK_VOCABULARY_H_
#define KERNCAP_COMMON_AGENT_LINK_VOCABULARY_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace kerncap::link {

// How a selector's pattern matches kernel names (selector.h). Arm.match,
// Substitute.match.
enum class NameMatch : int { kSubstring = 0, kGlob = 1, kRegex = 2, kMangled = 3 };

// == kerncap.v1.PerShape. Arm.per_shape: what makes two dispatches of a
// kernel the same shape for a per-shape arm (selector.h).
enum class PerShape : int { kOff = 0, kScalars = 1, kLaunch = 2 };

// == kerncap.v1.Platform. Hello.platform, CaptureBegin.platform (empty: the
// Hello's).
enum class Platform : int { kUnspecified = 0, kCuda = 1, kHsa = 2, kSynthetic = 3 };

// == kerncap.v1.RegionKind. RegionBegin.kind.
enum class RegionKind : int {
  kDevice = 1,
  kDeviceVmm = 2,
  kManaged = 3,
  kHostPinned = 4,
  kModuleGlobal = 5,
  kConstant = 6,
  kKernarg = 7,
};

// RegionBegin.image: which image of the capture a region's bytes belong to.
enum class ImageKind : int { kPre = 0, kPost = 1 };

// == kerncap.v1.CodeObjectFormat. CodeObject.format, Substitute.format.
enum class CodeObjectFormat : int {
  kUnspecified = 0,
  kCubin = 1,
  kFatbin = 2,
  kPtx = 3,
  kHsaco = 4,
};

// == kerncap.v1.ArgumentKind. ArgumentInfo.kind.
enum class ArgumentKind : int { kUnspecified = 0, kValue = 1, kPointer = 2, kHidden = 3 };

// CaptureTiming.path: how the agent read the capture's memory.
enum class CapturePath : int {
  kUnspecified = 0,  // the agent did not say (HSA, older agents)
  kHost = 1,         // device-to-host copies inside the gate
  kDeviceSnapshot = 2,  // device-to-device copies inside the gate, drained after release
};

// Disarm.reason: why an arm ended.
enum class DisarmReason : int { kDone = 0, kExpired = 1, kDisarmed = 2 };

// RingRequest.reason: what the ring is wanted for.
enum class RingRequestReason : int {
  kArmed = 0,    // an arm applies: wanted ahead of time, gets only what is free
  kCapture = 1,  // a capture waits for it: idle rings of others may be asked back
};

// RingRelease.reason: why the agent gave its ring back.
enum class RingReleaseReason : int { kIdle = 0, kRevoked = 1 };

// SubstitutionReport.state.
enum class SubstitutionState : int {
  kPending = 0,  // received, no matching dispatch yet
  kActive = 1,   // loaded, layout checked, substituting
  kRefused = 2,  // load or layout check failed: never substituted
  kEnded = 3,    // count, ttl, unsubstitute or a launch failure
};

// Unsubstitute.reason.
enum class UnsubstituteReason : int { kUnsubstituted = 0, kExpired = 1 };

// == kerncap.v1.TextureObject.Type. TextureObjectInfo.type.
enum class TextureObjectType : int { kTexture = 1, kSurface = 2 };

// == kerncap.v1.TextureResource.Type (CUresourcetype + 1). TextureResourceInfo.type.
enum class TextureResourceType : int {
  kArray = 1,
  kMipmappedArray = 2,
  kLinear = 3,
  kPitch2D = 4,
};

// One enumerator and the name it travels as.
template <typename E>
struct WireNameEntry {
  E value;
  std::string_view name;
};

// A name table: a view of a static array (C++17: the agent's CUDA test
// sources include this through capture_types.h and nvcc compiles them so).
template <typename E>
struct WireNameTable {
  const WireNameEntry<E>* first = nullptr;
  size_t count = 0;
  const WireNameEntry<E>* begin() const { return first; }
  const WireNameEntry<E>* end() const { return first + count; }
};

// The name tables, one per enum (found by overload on the enum type).
WireNameTable<NameMatch> WireNames(NameMatch);
WireNameTable<PerShape> WireNames(PerShape);
WireNameTable<Platform> WireNames(Platform);
WireNameTable<RegionKind> WireNames(RegionKind);
WireNameTable<ImageKind> WireNames(ImageKind);
WireNameTable<CodeObjectFormat> WireNames(CodeObjectFormat);
WireNameTable<ArgumentKind> WireNames(ArgumentKind);
WireNameTable<CapturePath> WireNames(CapturePath);
WireNameTable<DisarmReason> WireNames(DisarmReason);
WireNameTable<RingRequestReason> WireNames(RingRequestReason);
WireNameTable<RingReleaseReason> WireNames(RingReleaseReason);
WireNameTable<SubstitutionState> WireNames(SubstitutionState);
WireNameTable<UnsubstituteReason> WireNames(UnsubstituteReason);
WireNameTable<TextureObjectType> WireNames(TextureObjectType);
WireNameTable<TextureResourceType> WireNames(TextureResourceType);

// The name `value` travels as ("?" for a value outside the table, which only
// a cast can make).
template <typename E>
std::string_view WireName(E value) {
  for (const WireNameEntry<E>& e : WireNames(E{})) {
    if (e.value == value) return e.name;
  }
  return "?";
}

// Sets *out to the enumerator named `name`; false (nothing set) when no
// enumerator has that name.
template <typename E>
bool ParseWireName(std::string_view name, E* out) {
  for (const WireNameEntry<E>& e : WireNames(E{})) {
    if (e.name == name) {
      *out = e.value;
      return true;
    }
  }
  return false;
}

// "<what> 'NAME' is not one of: a, b, c": the error of a name ParseWireName
// refused.
template <typename E>
std::string UnknownWireNameError(std::string_view what, std::string_view name) {
  std::string msg = std::string(what) + " '" + std::string(name.substr(0, 64)) +
                    (name.size() > 64 ? "...'" : "'") + " is not one of:";
  bool first = true;
  for (const WireNameEntry<E>& e : WireNames(E{})) {
    msg += first ? " " : ", ";
    msg += e.name.empty() ? std::string_view("\"\"") : e.name;
    first = false;
  }
  return msg;
}

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_AGENT_LINK_VOCABULARY_H_
