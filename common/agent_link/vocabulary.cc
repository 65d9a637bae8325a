#include "common/agent_link/vocabulary.h"

namespace kerncap::link {
namespace {

// Names are part of the wire protocol: never rename one; add new ones.
constexpr WireNameEntry<NameMatch> kNameMatchNames[] = {
    {NameMatch::kSubstring, "substring"},
    {NameMatch::kGlob, "glob"},
    {NameMatch::kRegex, "regex"},
    {NameMatch::kMangled, "mangled"},
};
constexpr WireNameEntry<Platform> kPlatformNames[] = {
    {Platform::kUnspecified, ""},
    {Platform::kCuda, "cuda"},
    {Platform::kHsa, "hsa"},
    {Platform::kSynthetic, "synthetic"},
};
constexpr WireNameEntry<RegionKind> kRegionKindNames[] = {
    {RegionKind::kDevice, "device"},
    {RegionKind::kDeviceVmm, "device_vmm"},
    {RegionKind::kManaged, "managed"},
    {RegionKind::kHostPinned, "host_pinned"},
    {RegionKind::kModuleGlobal, "module_global"},
    {RegionKind::kConstant, "constant"},
    {RegionKind::kKernarg, "kernarg"},
};
constexpr WireNameEntry<ImageKind> kImageKindNames[] = {
    {ImageKind::kPre, "pre"},
    {ImageKind::kPost, "post"},
};
constexpr WireNameEntry<CodeObjectFormat> kCodeObjectFormatNames[] = {
    {CodeObjectFormat::kUnspecified, ""},
    {CodeObjectFormat::kCubin, "cubin"},
    {CodeObjectFormat::kFatbin, "fatbin"},
    {CodeObjectFormat::kPtx, "ptx"},
    {CodeObjectFormat::kHsaco, "hsaco"},
};
constexpr WireNameEntry<ArgumentKind> kArgumentKindNames[] = {
    {ArgumentKind::kUnspecified, ""},
    {ArgumentKind::kValue, "value"},
    {ArgumentKind::kPointer, "pointer"},
    {ArgumentKind::kHidden, "hidden"},
};
constexpr WireNameEntry<CapturePath> kCapturePathNames[] = {
    {CapturePath::kUnspecified, ""},
    {CapturePath::kHost, "host"},
    {CapturePath::kDeviceSnapshot, "device_snapshot"},
};
constexpr WireNameEntry<DisarmReason> kDisarmReasonNames[] = {
    {DisarmReason::kDone, "done"},
    {DisarmReason::kExpired, "expired"},
    {DisarmReason::kDisarmed, "disarmed"},
};
constexpr WireNameEntry<RingRequestReason> kRingRequestReasonNames[] = {
    {RingRequestReason::kArmed, "armed"},
    {RingRequestReason::kCapture, "capture"},
};
constexpr WireNameEntry<RingReleaseReason> kRingReleaseReasonNames[] = {
    {RingReleaseReason::kIdle, "idle"},
    {RingReleaseReason::kRevoked, "revoked"},
};
constexpr WireNameEntry<SubstitutionState> kSubstitutionStateNames[] = {
    {SubstitutionState::kPending, "pending"},
    {SubstitutionState::kActive, "active"},
    {SubstitutionState::kRefused, "refused"},
    {SubstitutionState::kEnded, "ended"},
};
constexpr WireNameEntry<UnsubstituteReason> kUnsubstituteReasonNames[] = {
    {UnsubstituteReason::kUnsubstituted, "unsubstituted"},
    {UnsubstituteReason::kExpired, "expired"},
};
constexpr WireNameEntry<TextureObjectType> kTextureObjectTypeNames[] = {
    {TextureObjectType::kTexture, "texture"},
    {TextureObjectType::kSurface, "surface"},
};
constexpr WireNameEntry<TextureResourceType> kTextureResourceTypeNames[] = {
    {TextureResourceType::kArray, "array"},
    {TextureResourceType::kMipmappedArray, "mipmapped_array"},
    {TextureResourceType::kLinear, "linear"},
    {TextureResourceType::kPitch2D, "pitch2d"},
};

}  // namespace

std::span<const WireNameEntry<NameMatch>> WireNames(NameMatch) { return kNameMatchNames; }
std::span<const WireNameEntry<Platform>> WireNames(Platform) { return kPlatformNames; }
std::span<const WireNameEntry<RegionKind>> WireNames(RegionKind) { return kRegionKindNames; }
std::span<const WireNameEntry<ImageKind>> WireNames(ImageKind) { return kImageKindNames; }
std::span<const WireNameEntry<CodeObjectFormat>> WireNames(CodeObjectFormat) {
  return kCodeObjectFormatNames;
}
std::span<const WireNameEntry<ArgumentKind>> WireNames(ArgumentKind) { return kArgumentKindNames; }
std::span<const WireNameEntry<CapturePath>> WireNames(CapturePath) { return kCapturePathNames; }
std::span<const WireNameEntry<DisarmReason>> WireNames(DisarmReason) { return kDisarmReasonNames; }
std::span<const WireNameEntry<RingRequestReason>> WireNames(RingRequestReason) {
  return kRingRequestReasonNames;
}
std::span<const WireNameEntry<RingReleaseReason>> WireNames(RingReleaseReason) {
  return kRingReleaseReasonNames;
}
std::span<const WireNameEntry<SubstitutionState>> WireNames(SubstitutionState) {
  return kSubstitutionStateNames;
}
std::span<const WireNameEntry<UnsubstituteReason>> WireNames(UnsubstituteReason) {
  return kUnsubstituteReasonNames;
}
std::span<const WireNameEntry<TextureObjectType>> WireNames(TextureObjectType) {
  return kTextureObjectTypeNames;
}
std::span<const WireNameEntry<TextureResourceType>> WireNames(TextureResourceType) {
  return kTextureResourceTypeNames;
}

}  // namespace kerncap::link
