#include "common/agent_link/vocabulary.h"

#include <iterator>

namespace kerncap::link {
namespace {

// Names are part of the wire protocol: never rename one; add new ones.
constexpr WireNameEntry<NameMatch> kNameMatchNames[] = {
    {NameMatch::kSubstring, "substring"},
    {NameMatch::kGlob, "glob"},
    {NameMatch::kRegex, "regex"},
    {NameMatch::kMangled, "mangled"},
};
// "" for off: arms from daemons that predate per-shape arms carry none.
constexpr WireNameEntry<PerShape> kPerShapeNames[] = {
    {PerShape::kOff, ""},
    {PerShape::kScalars, "scalars"},
    {PerShape::kLaunch, "launch"},
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

WireNameTable<NameMatch> WireNames(NameMatch) { return {kNameMatchNames, std::size(kNameMatchNames)}; }
WireNameTable<PerShape> WireNames(PerShape) { return {kPerShapeNames, std::size(kPerShapeNames)}; }
WireNameTable<Platform> WireNames(Platform) { return {kPlatformNames, std::size(kPlatformNames)}; }
WireNameTable<RegionKind> WireNames(RegionKind) { return {kRegionKindNames, std::size(kRegionKindNames)}; }
WireNameTable<ImageKind> WireNames(ImageKind) { return {kImageKindNames, std::size(kImageKindNames)}; }
WireNameTable<CodeObjectFormat> WireNames(CodeObjectFormat) { return {kCodeObjectFormatNames, std::size(kCodeObjectFormatNames)}; }
WireNameTable<ArgumentKind> WireNames(ArgumentKind) { return {kArgumentKindNames, std::size(kArgumentKindNames)}; }
WireNameTable<CapturePath> WireNames(CapturePath) { return {kCapturePathNames, std::size(kCapturePathNames)}; }
WireNameTable<DisarmReason> WireNames(DisarmReason) { return {kDisarmReasonNames, std::size(kDisarmReasonNames)}; }
WireNameTable<RingRequestReason> WireNames(RingRequestReason) { return {kRingRequestReasonNames, std::size(kRingRequestReasonNames)}; }
WireNameTable<RingReleaseReason> WireNames(RingReleaseReason) { return {kRingReleaseReasonNames, std::size(kRingReleaseReasonNames)}; }
WireNameTable<SubstitutionState> WireNames(SubstitutionState) { return {kSubstitutionStateNames, std::size(kSubstitutionStateNames)}; }
WireNameTable<UnsubstituteReason> WireNames(UnsubstituteReason) { return {kUnsubstituteReasonNames, std::size(kUnsubstituteReasonNames)}; }
WireNameTable<TextureObjectType> WireNames(TextureObjectType) { return {kTextureObjectTypeNames, std::size(kTextureObjectTypeNames)}; }
WireNameTable<TextureResourceType> WireNames(TextureResourceType) { return {kTextureResourceTypeNames, std::size(kTextureResourceTypeNames)}; }

}  // namespace kerncap::link
