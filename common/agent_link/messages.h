// messages.h: the JSON bodies of agent-link frames (framing in wire.h).
//
// Every frame's JSON body is one object; the fields of each message type are
// the members of the struct below with the same name (unknown fields are
// ignored, missing ones take the default shown, so fields can be added
// without a version bump). Enumerations are vocabulary.h's types and travel
// as its lower-case names; an unknown name fails the frame.
//
// Conversation (A = agent, D = daemon):
//   A: Hello                      D: Welcome (+ ring memfd via SCM_RIGHTS)
//   D: Arm / Disarm               at any time
//   A: CaptureBegin{token} (+ argument blob as payload)
//   A: RegionBegin{token, region=0,1,...}   regions numbered by the agent in
//      declaration order; all "pre" regions come before any "post" region
//   A: SlotFilled{token, slot, region, offset, length}   ring slot handed over
//   D: SlotFree{slot}             slot handed back once its bytes are consumed
//   A: CodeObject{token} (+ image as payload)
//   A: CaptureEnd{token} | CaptureAbort{token, reason}
//   D: CaptureResult{token, capture_id | error}   exactly one per CaptureBegin;
//      it may come early (a rejected capture), in which case the daemon frees
//      further slots of that capture at once and ignores its other frames.
//   One capture at a time per connection. EOF means the agent is gone: the
//   daemon aborts its in-flight capture. Error{message} may precede a drop.
//   The daemon stores only captures an arm selected: CaptureBegin.arm_id must
//   name an active arm that applies to this process, device and kernel (the
//   daemon checks with the same selector code), else the capture fails at
//   once. Every size and count the agent declares (regions, their bytes in
//   chunks, argument blob, code objects, names) is bounded by the daemon
//   (AgentLinkServerOptions::capture_limits); exceeding one fails that
//   capture with a CaptureResult error naming the bound.
//
// Optional features (negotiated: Hello.features lists what the agent speaks,
// Welcome.features what the daemon accepts; a message of a feature is sent
// only when both sides list it):
//   "lazy_ring": the Welcome carries no ring (slot_count 0, no fd). The agent
//     asks for one with RingRequest once it may capture (an arm applies to
//     it); the daemon answers RingGrant{slot_size, slot_count} + memfd, or
//     RingGrant{error}. Many idle agents per node then cost no staging memory.
//   "dispatch_skipped": A: DispatchSkipped{arm_id, dispatch_index, kernel,
//     reason, retried} when a selected dispatch could not be captured (stream
//     capture in progress, gate timeout, graph launch...). The daemon logs it
//     and publishes capture_failed with the reason. retried=true: the agent
//     gave the arm's capture back, so a later matching dispatch is taken.
//   "ring_release" (with "lazy_ring"): staging follows captures, not
//     connections. The agent unmaps its ring and sends RingRelease{} once it
//     is idle (no capture in flight, every slot back) and no arm applies to
//     it any more, or after RingRevoke{reason}: the daemon asks idle ring
//     holders for their ring when a capture needs staging that the
//     --staging-total-gib budget no longer has. The agent asks again
//     (RingRequest) when an arm applies or a capture begins. A RingRelease
//     while a capture is in flight is a protocol error.
//   "kernel_census": D: KernelsRequest{request_id, offset} at any time; A:
//     KernelsReport{request_id, offset, kernels, total, next_offset,
//     left_out}: a page of the kernels of the code objects the agent has seen
//     loaded (CUDA: every loaded module's cubin; HSA: the kernel symbols of
//     every loaded executable), each (module, name) once, in a stable order,
//     starting at `offset`; next_offset is where the next page starts, 0 after
//     the last one. A page holds at most kMaxReportedKernels entries and a
//     body under kMaxKernelsReportBytes; names are printable ASCII of at most
//     kMaxKernelNameBytes (selector.h), others are left out and counted in
//     left_out. The daemon must bound what it reads too.
//   "post_unchanged": A: ChunksUnchanged{token, region, first_chunk,
//     chunk_count} instead of SlotFilled for post-image chunks the agent knows
//     the dispatch left as they were (it compared them on the device against
//     its snapshot of the pre image). `region` must be a post region whose pre
//     region (same va and device, declared earlier in this capture) has the
//     same size; the chunks must lie inside it and not have been written or
//     marked before. The daemon records them with the digests it computed
//     itself for the pre image's bytes, so an agent can only ever point at
//     chunks it sent in this same capture; anything else fails the capture.
//
//   "chunk_fingerprints" (with "post_unchanged"): the agent fingerprints its
//     chunks on the device (chunk_fingerprint.h says how, and why a
//     fingerprint cannot name another agent's bytes) so that chunks kerncapd
//     already holds from this connection's earlier captures do not cross
//     PCIe again. Fingerprints travel as payloads of 16 bytes each.
//     A: KnownChunksQuery{token, query_id} + fingerprints (at most
//     kMaxFingerprintsPerFrame) -> D: KnownChunksAnswer{token, query_id}
//     + one byte per fingerprint (1: held; the fingerprint of an all-zero
//     chunk of the chunk size or of a declared region's tail is held for
//     every connection, first capture included: zero chunks are never
//     stored, so naming one references nothing). A: ChunkFingerprints{token,
//     region, first_chunk, chunk_count} + fingerprints of chunks sent (or
//     to be sent) as bytes: once the capture commits, kerncapd remembers
//     fingerprint -> (its own SHA-256 of those bytes, length) for this
//     connection. A: ChunksKnown{token, region, first_chunk, chunk_count}
//     + fingerprints instead of SlotFilled for chunks the answer said are
//     held: kerncapd records them with the digests it remembered; a
//     fingerprint it does not hold for this connection, of another length,
//     or a chunk already written fails the capture. What kerncapd remembers
//     dies with the connection and is bounded
//     (AgentLinkServerOptions::max_remembered_fingerprints).
//
// CaptureEnd.timing says how the agent read the memory and how long each
// part took (CaptureTimingInfo; the manifest's agent_timing).
//   "substitution": D: Substitute{sub_id, kernel, match, pid, process_name,
//     device, count, ttl_ms, ab, format, name} + the variant's code object as
//     payload (at most kMaxSubstituteCodeObjectBytes): for matching
//     dispatches the agent launches the variant's function of the same
//     mangled name instead of the original (every dispatch, or every second
//     one with ab). count: substituted dispatches before it ends (0: no
//     limit); ttl_ms: it ends that long after the agent received it (0: no
//     limit). The agent loads the code object at the first matching
//     dispatch (in that dispatch's context) and checks the variant's
//     parameter layout against the original's; a variant that fails either
//     is reported (state "refused") and nothing is substituted.
//     D: Unsubstitute{sub_id, reason}. A: SubstitutionReport{...} when the
//     state changes ("pending" -> "active" | "refused"; "active" -> "ended")
//     and at most every kSubstitutionReportIntervalMs while counts change.
//     The link dropping ends every substitution of the agent (nothing is
//     substituted while no daemon watches).
//
//   "launch_sample": D: SampleStart{sample_id, duration_ms}: the agent counts
//     the launches it sees from now (turning its launch callbacks on for the
//     sample only; an unsampled, unarmed process pays nothing) until
//     D: SampleStop{sample_id}, answered by A: SampleReport{sample_id, ...}:
//     per kernel (by mangled name, whichever module it came from) its
//     launches, up to kMaxSampledConfigsPerKernel distinct launch
//     configurations with their counts (the rest counted in
//     other_config_launches) and how many distinct argument shapes it ran
//     with (the per-shape "scalars" key, launch_shape.h; counted up to
//     kMaxArgumentShapesCounted, argument_shapes_capped beyond). Launches of
//     kernels whose name the agent could not read are counted in
//     unattributed_launches; graph launches in graph_launches (their kernel
//     nodes are counted as launches of their kernels where the agent knows
//     the graph). At most kMaxSampledKernels kernels and a body under
//     kMaxSampleReportBytes, the most launched first (the rest counted in
//     kernels_left_out). The agent stops counting by itself at duration_ms
//     (at most kMaxSampleMs) even if no SampleStop comes; a SampleStop for
//     another sample, or with none running, is answered with an error. The
//     link dropping ends the sample.
//
// Hello.rank: the process's rank in a parallel job, read by the agent from
// its launcher's environment (MPI, PMI/PMIx, torchrun, Slurm; source names
// the variable), -1 where unknown.
#ifndef KERNCAP_COMMON_AGENT_LINK_MESSAGES_H_
#define KERNCAP_COMMON_AGENT_LINK_MESSAGES_H_

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/agent_link/result.h"
#include "common/agent_link/selector.h"
#include "common/agent_link/vocabulary.h"
#include "common/agent_link/wire.h"
#include "nlohmann/json.hpp"

namespace kerncap::link {

// Hello.features / Welcome.features
inline constexpr char kFeatureLazyRing[] = "lazy_ring";
inline constexpr char kFeatureDispatchSkipped[] = "dispatch_skipped";
inline constexpr char kFeatureRingRelease[] = "ring_release";
inline constexpr char kFeatureKernelCensus[] = "kernel_census";
inline constexpr char kFeaturePostUnchanged[] = "post_unchanged";
inline constexpr char kFeatureSubstitution[] = "substitution";
inline constexpr char kFeatureChunkFingerprints[] = "chunk_fingerprints";
inline constexpr char kFeatureLaunchSample[] = "launch_sample";
// SampleReport bounds (see "launch_sample").
inline constexpr size_t kMaxSampledKernels = 4096;
inline constexpr size_t kMaxSampledConfigsPerKernel = 8;
inline constexpr uint32_t kMaxArgumentShapesCounted = 64;
inline constexpr uint64_t kMaxSampleMs = 120000;
inline constexpr size_t kMaxSampleReportBytes = 768 * 1024;
// Substitute bounds.
// (below the control API's 128 MiB gRPC message bound, common/control/limits.h)
inline constexpr uint64_t kMaxSubstituteCodeObjectBytes = 96ull << 20;
inline constexpr int kSubstitutionReportIntervalMs = 250;
// KernelsReport bounds (see "kernel_census"; names: kMaxKernelNameBytes, selector.h).
inline constexpr size_t kMaxReportedKernels = 10000;
inline constexpr size_t kMaxKernelsReportBytes = 768 * 1024;
// Enumerated fields (platform, region kind, image, format, reasons, states)
// are the types of vocabulary.h and travel as its names.

struct DeviceInfo {
  uint32_t ordinal = 0;
  std::string name;
  std::string arch;
  std::string uuid;
  uint64_t total_memory = 0;
  std::string pci_bus_id;
};

struct DriverInfo {
  std::string driver_version;
  std::string runtime_version;
  std::string tool_version;
};

// A process's place in a parallel job (Hello.rank); -1: not known.
struct LauncherRank {
  int64_t rank = -1;        // global rank
  int64_t local_rank = -1;  // rank on this node
  int64_t world_size = -1;  // ranks in the job
  std::string source;       // the variable the rank came from, e.g. "OMPI_COMM_WORLD_RANK"
};

struct HelloMsg {
  static constexpr MessageType kType = MessageType::kHello;
  uint32_t protocol_version = kProtocolVersion;
  uint32_t pid = 0;
  std::string hostname;
  std::vector<std::string> cmdline;
  std::string process_name;
  Platform platform = Platform::kUnspecified;
  std::vector<DeviceInfo> devices;
  DriverInfo driver;
  std::string agent_version;
  std::vector<std::string> features;  // optional protocol features the agent speaks
  LauncherRank rank;
};

struct ArmMsg {
  static constexpr MessageType kType = MessageType::kArm;
  std::string arm_id;
  std::string kernel;
  NameMatch match = NameMatch::kSubstring;
  uint32_t pid = 0;
  std::string process_name;
  int32_t device = -1;
  uint64_t skip = 0;
  uint64_t nth = 0;
  uint32_t count = 0;
  int64_t expires_unix_ms = 0;
  // Arming order (1, 2, ...; 0 from daemons before it was sent): agents
  // offer a dispatch to their arms in this order (selector.h).
  uint64_t seq = 0;
  int64_t rank = -1;  // -1: any process; else only the one of this launcher rank
  PerShape per_shape = PerShape::kOff;  // one capture per launch shape (selector.h)
};

struct WelcomeMsg {
  static constexpr MessageType kType = MessageType::kWelcome;
  std::string agent_id;
  uint64_t chunk_size = 0;
  uint64_t slot_size = 0;
  uint32_t slot_count = 0;
  uint64_t max_payload = 0;  // largest payload the daemon accepts
  std::vector<ArmMsg> arms;  // arms active at connect time, in arming order
  std::vector<std::string> features;  // optional features the daemon accepts
};

struct DisarmMsg {
  static constexpr MessageType kType = MessageType::kDisarm;
  std::string arm_id;
  DisarmReason reason = DisarmReason::kDone;
};

struct LaunchInfo {
  std::vector<uint32_t> grid;
  std::vector<uint32_t> block;
  uint32_t shared_mem_bytes = 0;
  uint32_t private_mem_bytes = 0;
  std::vector<uint32_t> cluster;
  bool cooperative = false;
  uint64_t stream = 0;
  std::map<std::string, int64_t> attributes;
};

struct ArgumentInfo {
  uint32_t offset = 0;
  uint32_t size = 0;
  ArgumentKind kind = ArgumentKind::kUnspecified;
  std::string name;
  std::string type_name;
  std::string value_kind;
};

// CaptureBegin.graph (kerncap.v1.GraphOrigin): set (present) when the
// dispatch was a kernel node of a CUDA graph launch. node_path: decimal
// indices joined by '/', at most kMaxGraphNodePath characters.
inline constexpr size_t kMaxGraphNodePath = 256;
struct GraphOriginInfo {
  bool present = false;
  uint64_t graph_exec = 0;
  uint64_t graph = 0;
  uint64_t exec_serial = 0;
  uint64_t graph_launch = 0;
  uint32_t node_index = 0;
  uint32_t node_count = 0;
  std::string node_path;
  uint64_t node = 0;
  uint64_t instantiate_flags = 0;
};

// CaptureBegin.texture_objects: texture/surface objects the argument blob
// holds, with their descriptors (kerncap.v1.TextureObject; CUDA values
// unchanged). type: "texture" | "surface"; resource.type: "array",
// "mipmapped_array", "linear", "pitch2d". Floats travel as their IEEE-754
// bit patterns (*_bits) so every value, NaN included, arrives exactly.
struct TextureResourceInfo {
  TextureResourceType type = TextureResourceType::kLinear;
  uint64_t device_ptr = 0;
  uint32_t format = 0;
  uint32_t num_channels = 0;
  uint64_t size_bytes = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint64_t pitch_bytes = 0;
  uint32_t flags = 0;
  uint64_t array_handle = 0;
};

struct TextureSamplingInfo {
  std::vector<uint32_t> address_mode;
  uint32_t filter_mode = 0;
  uint32_t flags = 0;
  uint32_t max_anisotropy = 0;
  uint32_t mipmap_filter_mode = 0;
  uint32_t mipmap_level_bias_bits = 0;
  uint32_t min_mipmap_level_clamp_bits = 0;
  uint32_t max_mipmap_level_clamp_bits = 0;
  std::vector<uint32_t> border_color_bits;
};

struct TextureViewInfo {
  uint32_t format = 0;
  uint64_t width = 0;
  uint64_t height = 0;
  uint64_t depth = 0;
  uint32_t first_mipmap_level = 0;
  uint32_t last_mipmap_level = 0;
  uint32_t first_layer = 0;
  uint32_t last_layer = 0;
};

struct TextureObjectInfo {
  TextureObjectType type = TextureObjectType::kTexture;
  uint64_t handle = 0;
  std::vector<uint32_t> argument_offsets;
  TextureResourceInfo resource;
  TextureSamplingInfo sampling;
  bool has_view = false;
  TextureViewInfo view;
};

struct CaptureBeginMsg {
  static constexpr MessageType kType = MessageType::kCaptureBegin;
  uint64_t token = 0;
  std::string arm_id;
  std::string mangled_name;
  std::string demangled_name;
  Platform platform = Platform::kUnspecified;  // kUnspecified: the Hello's
  std::string arch;
  LaunchInfo launch;
  std::vector<ArgumentInfo> arguments;
  uint32_t device = 0;
  uint64_t dispatch_index = 0;
  std::string jit_metadata_json;
  GraphOriginInfo graph;
  std::vector<TextureObjectInfo> texture_objects;
  // The dispatch's shape key when its arm is per-shape (16 lowercase hex
  // digits, agent/core/launch_shape.h); empty otherwise. kerncapd refuses a
  // per-shape arm's capture without one, or of a shape the arm already has.
  std::string launch_shape;
};

struct RegionBeginMsg {
  static constexpr MessageType kType = MessageType::kRegionBegin;
  uint64_t token = 0;
  uint32_t region = 0;  // == number of RegionBegin frames before it
  ImageKind image = ImageKind::kPre;
  uint64_t va = 0;
  uint64_t size = 0;
  RegionKind kind = RegionKind::kDevice;
  uint32_t device = 0;
  std::string name;
};

struct SlotFilledMsg {
  static constexpr MessageType kType = MessageType::kSlotFilled;
  uint64_t token = 0;
  uint32_t slot = 0;
  uint32_t region = 0;
  uint64_t offset = 0;  // multiple of chunk_size
  uint64_t length = 0;  // <= slot_size; multiple of chunk_size unless it ends the region
};

struct SlotFreeMsg {
  static constexpr MessageType kType = MessageType::kSlotFree;
  uint32_t slot = 0;
};

struct CodeObjectMsg {
  static constexpr MessageType kType = MessageType::kCodeObject;
  uint64_t token = 0;
  CodeObjectFormat format = CodeObjectFormat::kUnspecified;
  std::string name;
};

// How the agent read a capture's memory and how long each part took
// (kerncap.v1.CaptureTiming). path: CapturePath (vocabulary.h);
// path_reason says why (e.g. why the snapshot did not fit). Figures from the
// agent: informational, never trusted for anything the store decides.
struct CaptureTimingInfo {
  CapturePath path = CapturePath::kUnspecified;
  std::string path_reason;
  double quiesce_seconds = 0;
  double pre_seconds = 0;    // pre image: D2H (host) or D2D (snapshot)
  double post_seconds = 0;   // post image incl. the on-device compare
  double held_seconds = 0;   // the application's pause (gate taken -> released)
  double drain_seconds = 0;  // snapshot -> ring after the release (0: host path)
  uint64_t pcie_bytes = 0;   // bytes the agent copied device -> host
  uint64_t unchanged_post_bytes = 0;  // post bytes sent as ChunksUnchanged
  double fingerprint_seconds = 0;     // on-device fingerprinting ("chunk_fingerprints")
};

struct CaptureEndMsg {
  static constexpr MessageType kType = MessageType::kCaptureEnd;
  uint64_t token = 0;
  bool post_complete = true;
  CaptureTimingInfo timing;
};

struct ChunksUnchangedMsg {
  static constexpr MessageType kType = MessageType::kChunksUnchanged;
  uint64_t token = 0;
  uint32_t region = 0;       // a post region
  uint64_t first_chunk = 0;  // in Welcome.chunk_size units
  uint64_t chunk_count = 0;
};

// Payload of the four: EncodeFingerprints (chunk_fingerprint.h); the
// answer's payload is one byte (0 or 1) per queried fingerprint.
struct KnownChunksQueryMsg {
  static constexpr MessageType kType = MessageType::kKnownChunksQuery;
  uint64_t token = 0;
  uint64_t query_id = 0;
};
struct KnownChunksAnswerMsg {
  static constexpr MessageType kType = MessageType::kKnownChunksAnswer;
  uint64_t token = 0;
  uint64_t query_id = 0;
  std::string error;  // set when the query was refused (nothing is held then)
};
struct ChunksKnownMsg {
  static constexpr MessageType kType = MessageType::kChunksKnown;
  uint64_t token = 0;
  uint32_t region = 0;
  uint64_t first_chunk = 0;
  uint64_t chunk_count = 0;  // == fingerprints in the payload
};
struct ChunkFingerprintsMsg {
  static constexpr MessageType kType = MessageType::kChunkFingerprints;
  uint64_t token = 0;
  uint32_t region = 0;
  uint64_t first_chunk = 0;
  uint64_t chunk_count = 0;  // == fingerprints in the payload
};

struct CaptureAbortMsg {
  static constexpr MessageType kType = MessageType::kCaptureAbort;
  uint64_t token = 0;
  std::string reason;
};

struct CaptureResultMsg {
  static constexpr MessageType kType = MessageType::kCaptureResult;
  uint64_t token = 0;
  std::string capture_id;  // set on success
  std::string error;       // set on failure
};

struct RingRequestMsg {
  static constexpr MessageType kType = MessageType::kRingRequest;
  RingRequestReason reason = RingRequestReason::kArmed;
};

struct RingGrantMsg {
  static constexpr MessageType kType = MessageType::kRingGrant;
  uint64_t slot_size = 0;
  uint32_t slot_count = 0;
  std::string error;  // set (and no fd) when the daemon cannot give a ring
};

struct DispatchSkippedMsg {
  static constexpr MessageType kType = MessageType::kDispatchSkipped;
  std::string arm_id;
  uint64_t dispatch_index = 0;
  std::string kernel;
  uint32_t device = 0;
  std::string reason;
  bool retried = false;  // the arm's capture was given back to it
};

struct RingRevokeMsg {
  static constexpr MessageType kType = MessageType::kRingRevoke;
  std::string reason;  // for the agent's log
};

struct RingReleaseMsg {
  static constexpr MessageType kType = MessageType::kRingRelease;
  RingReleaseReason reason = RingReleaseReason::kIdle;
};

// One kernel of a loaded code object (KernelsReport).
struct LoadedKernelInfo {
  std::string mangled_name;
  std::string demangled_name;
  std::string module;  // which code object: "cuda-module-<id>", "hsa-executable-0x<handle>"
};

struct KernelsRequestMsg {
  static constexpr MessageType kType = MessageType::kKernelsRequest;
  uint64_t request_id = 0;
  uint64_t offset = 0;  // the first entry wanted (0, then the last page's next_offset)
};

struct KernelsReportMsg {
  static constexpr MessageType kType = MessageType::kKernelsReport;
  uint64_t request_id = 0;  // the request's
  uint64_t offset = 0;      // the request's
  std::vector<LoadedKernelInfo> kernels;
  uint64_t total = 0;        // entries in the whole list
  uint64_t next_offset = 0;  // 0: this page is the last
  uint64_t left_out = 0;     // kernels whose names could not be sent
};

struct SampleStartMsg {
  static constexpr MessageType kType = MessageType::kSampleStart;
  uint64_t sample_id = 0;
  uint64_t duration_ms = 0;  // the agent stops counting by itself then
};

struct SampleStopMsg {
  static constexpr MessageType kType = MessageType::kSampleStop;
  uint64_t sample_id = 0;
};

// One launch configuration of a sampled kernel and how often it ran.
struct SampledConfig {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t shared_mem_bytes = 0;
  std::array<uint32_t, 3> cluster{0, 0, 0};
  uint64_t launches = 0;
};

struct SampledKernel {
  std::string mangled_name;
  std::string demangled_name;
  uint64_t launches = 0;
  std::vector<SampledConfig> configs;  // the most launched first
  uint64_t other_config_launches = 0;  // launches of configurations not listed
  uint32_t argument_shapes = 0;        // distinct "scalars" shape keys seen
  bool argument_shapes_capped = false; // more than kMaxArgumentShapesCounted
};

struct SampleReportMsg {
  static constexpr MessageType kType = MessageType::kSampleReport;
  uint64_t sample_id = 0;
  std::string error;     // set: no sample (none running, another id)
  double seconds = 0;    // how long the agent counted
  std::vector<SampledKernel> kernels;  // the most launched first
  uint64_t kernels_left_out = 0;       // kernels past the bounds
  uint64_t unattributed_launches = 0;  // launches whose kernel name was unknown
  uint64_t graph_launches = 0;
};

struct SubstituteMsg {
  static constexpr MessageType kType = MessageType::kSubstitute;
  std::string sub_id;
  std::string kernel;
  NameMatch match = NameMatch::kSubstring;
  uint32_t pid = 0;
  std::string process_name;
  int32_t device = -1;
  uint64_t count = 0;   // substituted dispatches before it ends; 0: no limit
  uint64_t ttl_ms = 0;  // 0: no limit
  bool ab = false;      // alternate original and variant, timing both
  CodeObjectFormat format = CodeObjectFormat::kUnspecified;  // cubin | fatbin | ptx
  std::string name;     // the file's name, for messages
};

struct UnsubstituteMsg {
  static constexpr MessageType kType = MessageType::kUnsubstitute;
  std::string sub_id;
  UnsubstituteReason reason = UnsubstituteReason::kUnsubstituted;
};

// Device time of one side of a substitution, from events recorded around the
// launch on the application's stream (microseconds).
struct DeviceTimingInfo {
  uint64_t samples = 0;
  double mean_us = 0;
  double stddev_us = 0;  // sample standard deviation (0 with fewer than 2)
  double min_us = 0;
  double max_us = 0;
};

struct SubstitutionReportMsg {
  static constexpr MessageType kType = MessageType::kSubstitutionReport;
  std::string sub_id;
  SubstitutionState state = SubstitutionState::kPending;
  std::string reason;               // refused / ended: why
  std::string kernel;               // mangled name of the substituted kernel
  std::vector<std::string> checks;  // what the agent checked before substituting
  uint64_t variant_launches = 0;
  uint64_t original_launches = 0;   // matching dispatches left to the original (ab)
  DeviceTimingInfo variant;
  DeviceTimingInfo original;
  double launch_rate_hz = 0;        // matching dispatches per second while active
  uint64_t timing_failures = 0;     // dispatches whose events could not be read
};

struct ErrorMsg {
  static constexpr MessageType kType = MessageType::kError;
  std::string message;
};

// JSON of the vocabulary's enums: their names; decoding an unknown name
// throws (DecodeBody turns it into "bad <Message> body: ...").
#define KERNCAP_LINK_ENUM_JSON(E, WHAT)                                       \
  inline void to_json(nlohmann::json& j, E value) { j = WireName(value); }    \
  inline void from_json(const nlohmann::json& j, E& value) {                 \
    if (!j.is_string()) throw std::invalid_argument(WHAT " is not a string"); \
    const std::string& name = j.get_ref<const std::string&>();               \
    if (!ParseWireName(name, &value)) {                                       \
      throw std::invalid_argument(UnknownWireNameError<E>(WHAT, name));       \
    }                                                                         \
  }
// An open enumeration: a name this side does not know (a newer peer's)
// decodes as FALLBACK; for values that are information, not instructions.
#define KERNCAP_LINK_OPEN_ENUM_JSON(E, WHAT, FALLBACK)                        \
  inline void to_json(nlohmann::json& j, E value) { j = WireName(value); }    \
  inline void from_json(const nlohmann::json& j, E& value) {                 \
    if (!j.is_string()) throw std::invalid_argument(WHAT " is not a string"); \
    if (!ParseWireName(j.get_ref<const std::string&>(), &value)) value = FALLBACK; \
  }
KERNCAP_LINK_ENUM_JSON(Platform, "platform")
KERNCAP_LINK_ENUM_JSON(RegionKind, "region kind")
KERNCAP_LINK_ENUM_JSON(ImageKind, "image")
KERNCAP_LINK_ENUM_JSON(CodeObjectFormat, "code object format")
// Argument kinds are information (the daemon derives hidden arguments from
// value_kind too): a newer agent's kind is kept as unspecified.
KERNCAP_LINK_OPEN_ENUM_JSON(ArgumentKind, "argument kind", ArgumentKind::kUnspecified)
KERNCAP_LINK_ENUM_JSON(CapturePath, "capture path")
KERNCAP_LINK_ENUM_JSON(DisarmReason, "disarm reason")
KERNCAP_LINK_ENUM_JSON(RingRequestReason, "ring request reason")
KERNCAP_LINK_ENUM_JSON(RingReleaseReason, "ring release reason")
KERNCAP_LINK_ENUM_JSON(SubstitutionState, "substitution state")
KERNCAP_LINK_ENUM_JSON(UnsubstituteReason, "unsubstitute reason")
KERNCAP_LINK_ENUM_JSON(TextureObjectType, "texture object type")
KERNCAP_LINK_ENUM_JSON(TextureResourceType, "texture resource type")
KERNCAP_LINK_ENUM_JSON(NameMatch, "name match")
KERNCAP_LINK_ENUM_JSON(PerShape, "per shape")
#undef KERNCAP_LINK_ENUM_JSON
#undef KERNCAP_LINK_OPEN_ENUM_JSON

// Strict field decoding. nlohmann's own conversion casts a JSON float to an
// integer field (undefined behaviour when it is out of the field's range,
// e.g. 1e300 into a uint32_t) and wraps an integer that does not fit. Every
// field of a link message is read through ReadField instead: an integer
// field takes only a JSON integer that fits its type, anything else fails the
// frame with the field's name ("bad SlotFilled body: field 'slot': expected
// an integer of 0..4294967295, got 1.5").
namespace wire_json {

[[noreturn]] inline void BadField(const char* field, const std::string& what) {
  throw std::invalid_argument(std::string("field '") + field + "': " + what);
}

template <typename T>
std::string RangeText() {
  return std::to_string(std::numeric_limits<T>::min()) + ".." +
         std::to_string(std::numeric_limits<T>::max());
}

// Declared before any definition so that each finds the others for nested
// containers.
template <typename T>
void Convert(const nlohmann::json& j, const char* field, T& out);
template <typename T>
void Convert(const nlohmann::json& j, const char* field, std::vector<T>& out);
template <typename T, size_t N>
void Convert(const nlohmann::json& j, const char* field, std::array<T, N>& out);
template <typename T>
void Convert(const nlohmann::json& j, const char* field, std::map<std::string, T>& out);

template <typename T>
void ConvertInteger(const nlohmann::json& j, const char* field, T& out) {
  const auto expected = [&] { return "expected an integer of " + RangeText<T>() + ", got "; };
  // nlohmann keeps integers as unsigned or signed storage (a parsed
  // non-negative number is unsigned; one built in memory from an int64_t is
  // signed whatever its sign).
  const bool non_negative =
      j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0);
  if (non_negative) {
    const uint64_t v =
        j.is_number_unsigned() ? j.get<uint64_t>() : static_cast<uint64_t>(j.get<int64_t>());
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      BadField(field, expected() + std::to_string(v));
    }
    out = static_cast<T>(v);
  } else if (j.is_number_integer()) {  // negative
    const int64_t v = j.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      BadField(field, expected() + std::to_string(v));
    } else {
      if (v < static_cast<int64_t>(std::numeric_limits<T>::min())) {
        BadField(field, expected() + std::to_string(v));
      }
      out = static_cast<T>(v);
    }
  } else {
    // A float (even 2.0), string, bool, null, array or object.
    BadField(field, expected() + (j.is_number_float() ? j.dump() : std::string(j.type_name())));
  }
}

template <typename T>
void Convert(const nlohmann::json& j, const char* field, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!j.is_boolean()) BadField(field, std::string("expected a boolean, got ") + j.type_name());
    out = j.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    ConvertInteger(j, field, out);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!j.is_number()) BadField(field, std::string("expected a number, got ") + j.type_name());
    const double v = j.get<double>();
    if constexpr (!std::is_same_v<T, double>) {
      if (!(v >= std::numeric_limits<T>::lowest() && v <= std::numeric_limits<T>::max())) {
        BadField(field, "number out of range: " + j.dump());
      }
    }
    out = static_cast<T>(v);
  } else {
    out = j.get<T>();  // strings, enums and link structs (strict themselves)
  }
}

template <typename T>
void Convert(const nlohmann::json& j, const char* field, std::vector<T>& out) {
  if (!j.is_array()) BadField(field, std::string("expected an array, got ") + j.type_name());
  std::vector<T> v(j.size());
  for (size_t i = 0; i < v.size(); ++i) Convert(j[i], field, v[i]);
  out = std::move(v);
}

template <typename T, size_t N>
void Convert(const nlohmann::json& j, const char* field, std::array<T, N>& out) {
  if (!j.is_array() || j.size() != N) {
    BadField(field, "expected an array of " + std::to_string(N) + ", got " +
                        (j.is_array() ? std::to_string(j.size()) + " elements" : j.type_name()));
  }
  for (size_t i = 0; i < N; ++i) Convert(j[i], field, out[i]);
}

template <typename T>
void Convert(const nlohmann::json& j, const char* field, std::map<std::string, T>& out) {
  if (!j.is_object()) BadField(field, std::string("expected an object, got ") + j.type_name());
  std::map<std::string, T> m;
  for (auto it = j.begin(); it != j.end(); ++it) Convert(it.value(), field, m[it.key()]);
  out = std::move(m);
}

// A missing field takes the default; a present one must convert.
template <typename T>
void ReadField(const nlohmann::json& j, const char* field, T& out, const T& fallback) {
  if (!j.is_object()) throw std::invalid_argument("body is not a JSON object");
  auto it = j.find(field);
  if (it == j.end()) {
    out = fallback;
    return;
  }
  Convert(*it, field, out);
}

}  // namespace wire_json

#define KERNCAP_LINK_FROM_FIELD(v1) \
  ::kerncap::link::wire_json::ReadField(nlohmann_json_j, #v1, nlohmann_json_t.v1, \
                                        nlohmann_json_default_obj.v1);
// Like NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT, with strict fields.
#define KERNCAP_LINK_MESSAGE_JSON(Type, ...)                                              \
  inline void to_json(nlohmann::json& nlohmann_json_j, const Type& nlohmann_json_t) {      \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_TO, __VA_ARGS__))              \
  }                                                                                       \
  inline void from_json(const nlohmann::json& nlohmann_json_j, Type& nlohmann_json_t) {    \
    const Type nlohmann_json_default_obj{};                                               \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(KERNCAP_LINK_FROM_FIELD, __VA_ARGS__))       \
  }

KERNCAP_LINK_MESSAGE_JSON(DeviceInfo, ordinal, name, arch, uuid,
                          total_memory, pci_bus_id)
KERNCAP_LINK_MESSAGE_JSON(DriverInfo, driver_version, runtime_version,
                          tool_version)
KERNCAP_LINK_MESSAGE_JSON(LauncherRank, rank, local_rank, world_size, source)
KERNCAP_LINK_MESSAGE_JSON(HelloMsg, protocol_version, pid, hostname,
                          cmdline, process_name, platform, devices, driver,
                          agent_version, features, rank)
KERNCAP_LINK_MESSAGE_JSON(ArmMsg, arm_id, kernel, match, pid, process_name,
                          device, skip, nth, count, expires_unix_ms, seq,
                          rank, per_shape)
KERNCAP_LINK_MESSAGE_JSON(WelcomeMsg, agent_id, chunk_size, slot_size,
                          slot_count, max_payload, arms, features)
KERNCAP_LINK_MESSAGE_JSON(DisarmMsg, arm_id, reason)
KERNCAP_LINK_MESSAGE_JSON(LaunchInfo, grid, block, shared_mem_bytes,
                          private_mem_bytes, cluster, cooperative, stream,
                          attributes)
KERNCAP_LINK_MESSAGE_JSON(ArgumentInfo, offset, size, kind, name,
                          type_name, value_kind)
KERNCAP_LINK_MESSAGE_JSON(GraphOriginInfo, present, graph_exec, graph,
                          exec_serial, graph_launch, node_index, node_count,
                          node_path, node, instantiate_flags)
KERNCAP_LINK_MESSAGE_JSON(TextureResourceInfo, type, device_ptr, format,
                          num_channels, size_bytes, width, height,
                          pitch_bytes, flags, array_handle)
KERNCAP_LINK_MESSAGE_JSON(TextureSamplingInfo, address_mode, filter_mode,
                          flags, max_anisotropy, mipmap_filter_mode,
                          mipmap_level_bias_bits,
                          min_mipmap_level_clamp_bits,
                          max_mipmap_level_clamp_bits, border_color_bits)
KERNCAP_LINK_MESSAGE_JSON(TextureViewInfo, format, width, height, depth,
                          first_mipmap_level, last_mipmap_level,
                          first_layer, last_layer)
KERNCAP_LINK_MESSAGE_JSON(TextureObjectInfo, type, handle, argument_offsets,
                          resource, sampling, has_view, view)
KERNCAP_LINK_MESSAGE_JSON(CaptureBeginMsg, token, arm_id, mangled_name,
                          demangled_name, platform, arch, launch, arguments,
                          device, dispatch_index, jit_metadata_json, graph,
                          texture_objects, launch_shape)
KERNCAP_LINK_MESSAGE_JSON(RegionBeginMsg, token, region, image, va, size,
                          kind, device, name)
KERNCAP_LINK_MESSAGE_JSON(SlotFilledMsg, token, slot, region, offset,
                          length)
KERNCAP_LINK_MESSAGE_JSON(SlotFreeMsg, slot)
KERNCAP_LINK_MESSAGE_JSON(CodeObjectMsg, token, format, name)
KERNCAP_LINK_MESSAGE_JSON(CaptureTimingInfo, path, path_reason,
                          quiesce_seconds, pre_seconds, post_seconds,
                          held_seconds, drain_seconds, pcie_bytes,
                          unchanged_post_bytes, fingerprint_seconds)
KERNCAP_LINK_MESSAGE_JSON(CaptureEndMsg, token, post_complete, timing)
KERNCAP_LINK_MESSAGE_JSON(ChunksUnchangedMsg, token, region, first_chunk,
                          chunk_count)
KERNCAP_LINK_MESSAGE_JSON(KnownChunksQueryMsg, token, query_id)
KERNCAP_LINK_MESSAGE_JSON(KnownChunksAnswerMsg, token, query_id, error)
KERNCAP_LINK_MESSAGE_JSON(ChunksKnownMsg, token, region, first_chunk,
                          chunk_count)
KERNCAP_LINK_MESSAGE_JSON(ChunkFingerprintsMsg, token, region, first_chunk,
                          chunk_count)
KERNCAP_LINK_MESSAGE_JSON(CaptureAbortMsg, token, reason)
KERNCAP_LINK_MESSAGE_JSON(CaptureResultMsg, token, capture_id, error)
KERNCAP_LINK_MESSAGE_JSON(RingRequestMsg, reason)
KERNCAP_LINK_MESSAGE_JSON(RingGrantMsg, slot_size, slot_count, error)
KERNCAP_LINK_MESSAGE_JSON(DispatchSkippedMsg, arm_id, dispatch_index, kernel,
                          device, reason, retried)
KERNCAP_LINK_MESSAGE_JSON(RingRevokeMsg, reason)
KERNCAP_LINK_MESSAGE_JSON(RingReleaseMsg, reason)
KERNCAP_LINK_MESSAGE_JSON(LoadedKernelInfo, mangled_name, demangled_name,
                          module)
KERNCAP_LINK_MESSAGE_JSON(KernelsRequestMsg, request_id, offset)
KERNCAP_LINK_MESSAGE_JSON(KernelsReportMsg, request_id, offset, kernels,
                          total, next_offset, left_out)
KERNCAP_LINK_MESSAGE_JSON(SampleStartMsg, sample_id, duration_ms)
KERNCAP_LINK_MESSAGE_JSON(SampleStopMsg, sample_id)
KERNCAP_LINK_MESSAGE_JSON(SampledConfig, grid, block, shared_mem_bytes,
                          cluster, launches)
KERNCAP_LINK_MESSAGE_JSON(SampledKernel, mangled_name, demangled_name,
                          launches, configs, other_config_launches,
                          argument_shapes, argument_shapes_capped)
KERNCAP_LINK_MESSAGE_JSON(SampleReportMsg, sample_id, error, seconds,
                          kernels, kernels_left_out,
                          unattributed_launches, graph_launches)
KERNCAP_LINK_MESSAGE_JSON(SubstituteMsg, sub_id, kernel, match, pid,
                          process_name, device, count, ttl_ms, ab, format,
                          name)
KERNCAP_LINK_MESSAGE_JSON(UnsubstituteMsg, sub_id, reason)
KERNCAP_LINK_MESSAGE_JSON(DeviceTimingInfo, samples, mean_us, stddev_us,
                          min_us, max_us)
KERNCAP_LINK_MESSAGE_JSON(SubstitutionReportMsg, sub_id, state, reason,
                          kernel, checks, variant_launches,
                          original_launches, variant, original,
                          launch_rate_hz, timing_failures)
KERNCAP_LINK_MESSAGE_JSON(ErrorMsg, message)

// True when `features` lists `feature`.
bool HasFeature(const std::vector<std::string>& features, std::string_view feature);

// Arm <-> Selector.
ArmMsg ArmFromSelector(std::string arm_id, const Selector& selector);
Selector SelectorFromArm(const ArmMsg& arm);

// Serializes a message body. Invalid UTF-8 (a cmdline can hold anything) is
// replaced rather than failing the frame.
template <typename M>
std::string EncodeBody(const M& msg) {
  nlohmann::json j = msg;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Parses `frame`'s body as message M. Never throws.
LinkStatus DecodeBodyJson(const Frame& frame, MessageType expected, nlohmann::json* out);
template <typename M>
LinkStatus DecodeBody(const Frame& frame, M* msg) {
  nlohmann::json j;
  LinkStatus status = DecodeBodyJson(frame, M::kType, &j);
  if (!status.ok()) return status;
  try {
    *msg = j.get<M>();
  } catch (const std::exception& e) {
    return LinkStatus::Error(std::string("bad ") + MessageTypeName(M::kType) + " body: " +
                             e.what());
  }
  return LinkStatus::Ok();
}

template <typename M>
LinkStatus SendMessage(int sock, const M& msg, std::string_view payload = {},
                       const int* fds = nullptr, size_t fd_count = 0) {
  std::string body;
  try {
    body = EncodeBody(msg);
  } catch (const std::exception& e) {
    return LinkStatus::Error(std::string("encoding ") + MessageTypeName(M::kType) + ": " +
                             e.what());
  }
  return SendFrame(sock, M::kType, body, payload, fds, fd_count);
}

// SendMessage within `timeout_ms` for the whole frame (SendFrameWithin).
template <typename M>
LinkStatus SendMessageWithin(int sock, int timeout_ms, const M& msg,
                             std::string_view payload = {}, const int* fds = nullptr,
                             size_t fd_count = 0) {
  std::string body;
  try {
    body = EncodeBody(msg);
  } catch (const std::exception& e) {
    return LinkStatus::Error(std::string("encoding ") + MessageTypeName(M::kType) + ": " +
                             e.what());
  }
  return SendFrameWithin(sock, timeout_ms, M::kType, body, payload, fds, fd_count);
}

}  // namespace kerncap::link

#endif  // KERNCAP_COMMON_AGENT_LINK_MESSAGES_H_
