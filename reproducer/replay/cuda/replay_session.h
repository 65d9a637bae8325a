// replay_session.h: one capture replayed on one GPU.
//
//   Prepare():  cuInit -> reserve the planned ranges at their original
//               addresses (before any context exists, so nothing of the
//               driver's own can take them; every placement is known then)
//               -> map physical memory per mapping on a mapping thread, in
//               upload order, overlapped with placing host regions,
//               allocating staging and uploading every pre-image region
//               chunk by chunk (a chunk's copy waits until its mapping is
//               published) ->
//               load the code object -> restore module variables (matched
//               to the captured ones by name, else by stable identity:
//               module_symbols.h) -> re-apply function attributes ->
//               recreate texture/surface objects over the restored memory
//               and patch their handles into the arguments
//               (texture_objects.h). Ranges whose address cannot be had are
//               mapped elsewhere and everything is pointer-patched (reported
//               in ReplayInfo: what moved and how many pointers into each
//               were found).
//   Launch():   the captured grid/block/shared memory/cluster/cooperative
//               configuration with the captured argument blob; device time.
//   Validate(): compares device memory with the captured post-dispatch
//               image; captured state that could not be compared (a module
//               variable the code object lacks, ...) makes the verdict
//               "incomplete" (report.h). Device regions are compared on the
//               GPU when CompareOptions::place allows and their copy fits in
//               free device memory (device_expectation.h: a device copy of
//               the expected image made before the first launch, a bitwise
//               prefilter on the GPU, the host comparator for what differs),
//               else on the host; ValidationReport::comparison says which.
//   Bench():    warm-up + timed iterations (optional cold L2, restore of
//               written regions before each launch); optionally interleaved
//               with the captured code object as a baseline (speedup); every
//               timed binary validated before and after the timing loop, the
//               persisting-L2 state reset for it (l2_control.h).
#ifndef KERNCAP_REPRODUCER_REPLAY_CUDA_REPLAY_SESSION_H_
#define KERNCAP_REPRODUCER_REPLAY_CUDA_REPLAY_SESSION_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reproducer/replay/core/capture_source.h"
#include "reproducer/replay/core/compare_options.h"
#include "reproducer/replay/core/engine.h"
#include "reproducer/replay/core/launch_override.h"
#include "reproducer/replay/cuda/cuda_driver.h"
#include "reproducer/replay/cuda/device_expectation.h"
#include "reproducer/replay/core/module_symbols.h"
#include "reproducer/replay/core/relocator.h"
#include "reproducer/replay/core/report.h"
#include "reproducer/replay/core/reservation_planner.h"
#include "reproducer/replay/core/restore_pipeline.h"
#include "reproducer/replay/cuda/texture_objects.h"

namespace kerncap::replay {

struct SessionOptions {
  int device = -1;                 // -1: the captured device ordinal (0 if absent)
  bool allow_relocation = true;    // false: fail when an address cannot be had
  bool force_relocation = false;   // testing: map everything elsewhere
  PlanOptions plan;                // granularity is taken from the driver
  // Replaces the captured code object of the kernel (a rebuilt cubin, or PTX
  // text); it must define the captured kernel name. Empty: the captured one.
  std::string code_object_path;
  // Replaces parts of the captured launch (grid, block, dynamic shared
  // memory, attributes, cluster): core/launch_override.h. Checked in
  // Create(); every launch of the session uses it (validate, bench, serve,
  // the C API).
  LaunchOverride launch;
};

// BenchOptions: core/engine.h (shared with the HSA engine).


class ReplaySession {
 public:
  static absl::StatusOr<std::unique_ptr<ReplaySession>> Create(const CaptureSource* source,
                                                              const SessionOptions& options);
  ~ReplaySession();

  absl::Status Prepare();
  // One launch, synchronized; returns its device time in milliseconds.
  absl::StatusOr<double> Launch();
  // With a launch override that changes the shape, a failing result is
  // probed: the captured code object at the overridden shape and at the
  // captured one (launch_override.h); ValidationReport says
  // launch_shape_dependent when only the captured shape reproduces.
  absl::StatusOr<ValidationReport> Validate(const CompareOptions& options);
  absl::StatusOr<BenchReport> Bench(const BenchOptions& options);

  const ReplayInfo& info() const { return info_; }

  // --- Resident mode (serve/), after Prepare() -----------------------------
  // Where pre-image region `index` lives in this replay (restored=false: not
  // restored, e.g. a kernarg region or a missing module variable).
  struct RegionPlacement {
    bool restored = false;
    bool host = false;       // host memory (pinned/registered)
    uint64_t replay_va = 0;
  };
  RegionPlacement placement(size_t index) const;
  CUcontext context() const { return ctx_; }
  CUdevice device() const { return device_; }
  const Relocator& relocator() const { return relocator_; }
  // The captured function attributes applied to `f`, a candidate's kernel;
  // optional attributes that cannot be set go to *warnings (null: Warn()).
  absl::Status ApplyAttributesTo(CUfunction f, std::vector<std::string>* warnings);
  // Replaces the launch override of later launches (the resident mode's
  // per-request "launch"; empty: the captured launch); InvalidArgument when
  // the result is out of range, the session's launch unchanged then.
  // Function attributes follow on the next ApplyAttributesTo().
  absl::Status SetLaunchOverride(const LaunchOverride& o);
  const LaunchOverride& launch_override() const { return options_.launch; }
  // The launch later launches use (the captured one with the override).
  const LaunchShape& launch_shape() const { return launch_; }
  const LaunchShape& captured_launch() const { return captured_launch_; }
  // Launch at the captured shape instead of the overridden one (probes).
  void set_use_captured_launch(bool on) { use_captured_launch_ = on; }
  // Enqueues one launch of `f` on `stream` with the session's launch (the
  // captured configuration, overridden by SessionOptions::launch) and
  // argument blob (LaunchAsync() is this with the captured kernel).
  absl::Status LaunchFunctionAsync(CUfunction f, CUstream stream);
  // The argument blob as this replay launches it (after Prepare): relocated
  // pointers patched, texture/surface handles replaced by the recreated ones.
  const std::string& launch_arguments() const { return args_; }
  // The captured code object's bytes (PTX NUL-terminated); *name: its name
  // (a baseline beside candidates: bench --compare-original, serve).
  absl::StatusOr<std::string> CapturedImage(std::string* name) const;
  // The capture's module variables (every __device__/__constant__ region),
  // for matching them in another module (module_symbols.h).
  std::vector<CapturedVariable> CapturedVariables() const;
  // How the captured module variables matched in the session's module.
  const std::vector<VariableMatch>& variable_matches() const;

  // --- Embedding (capi/: libkerncap_replay.so), after Prepare() -----------
  // The calling thread needs the session's context current (context()).
  // Compares device memory as it is now with the captured post-dispatch
  // image, without launching anything (Validate() is Launch() plus this).
  // Synchronizes the context first, so a kernel the caller launched itself
  // in the same (primary) context, e.g. a JIT-compiled one, is waited for.
  absl::StatusOr<ValidationReport> CompareWithPostImage(const CompareOptions& options);
  // Puts every chunk the captured kernel writes back to its pre-dispatch
  // bytes (the ones Bench() restores), synchronously: the context is
  // synchronized before and after. The bytes are read from the capture on
  // the first call and kept in host memory for later ones.
  absl::Status RestoreWrittenRegions();

 private:
  // Where one pre-image region lives in this replay.
  struct Placement {
    bool restored = false;
    bool host = false;       // host memory (pinned/registered)
    uint64_t replay_va = 0;  // device address (== host address for host regions)
  };
  struct Chunk {             // a written chunk's pre-dispatch bytes (bench restore)
    uint64_t replay_va = 0;
    bool host = false;
    size_t region = 0;       // pre-image region index
    uint64_t offset = 0;     // in the region
    std::string bytes;
  };
  // One loaded code object: the session's, the captured one beside it
  // (bench --compare-original), or a bench variant. Module variables live in
  // each module: `globals` is where the captured ones are in this one.
  struct LoadedCode {
    std::string name;                 // the file, or the captured code object's name
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    std::string kernel;               // the captured kernel's name in it
    std::vector<VariableMatch> matches;                // per captured module variable
    absl::flat_hash_map<size_t, CUdeviceptr> globals;  // pre region -> address here
  };

  ReplaySession(const CaptureSource* source, const CudaDriver* drv, SessionOptions options)
      : src_(source), cu_(*drv), options_(std::move(options)), textures_(*drv) {}

  absl::Status InitDevice();
  // One physical mapping to make (replay address, planned pre regions).
  struct MapJob {
    CUdeviceptr va = 0;
    size_t size = 0;
    size_t first_region = 0;       // lowest pre region index (upload order)
    std::vector<size_t> regions;
  };
  // Reserves the planned ranges, creates the context and fixes every device
  // placement (and relocation entry); fills map_jobs_ in upload order.
  absl::Status ReserveRanges();
  absl::Status MapOne(size_t job);  // cuMemCreate + cuMemMap + cuMemSetAccess
  absl::Status StartMapping();      // the mapping thread (serial with KERNCAP_REPLAY_SERIAL_MAP=1)
  absl::Status FinishMapping();     // joins it; its status
  void CancelMapping();             // stops it at the next mapping and joins
  absl::Status PlaceHostRegions();
  absl::Status UploadPreImage();           // every restored region, pipelined
  // Runs the restore pipeline over `tasks` with its own pinned staging and
  // copier (the pre image; validate's changed post chunks).
  absl::StatusOr<RestorePipelineStats> RunUpload(const std::vector<RestoreTask>& tasks,
                                                 MappingProgress* mapping, PatchTally* tally,
                                                 double* staging_seconds);
  // Decides where device regions are compared and, for the device path,
  // builds the expected image on the device (device_expectation.h). Must
  // run after Prepare() and before the first launch (the device copy is of
  // the restored pre image); once per session (later calls keep the first
  // decision). Fills comparison_.
  absl::Status PrepareComparison(const CompareOptions& options);
  // One region to `p`, chunk by chunk (module variables, repairs; count: add
  // to info_'s restored bytes and patched words).
  absl::Status UploadRegionTo(size_t index, const Placement& p, bool count);
  absl::Status LoadCode();
  // Loads `image` as a module: finds the captured kernel in it (by name, else
  // by stable name), matches and restores the captured module variables
  // (`primary`: into placements_, counted in info_), applies the captured
  // attributes (`primary`: optional ones that fail warn).
  absl::StatusOr<std::unique_ptr<LoadedCode>> LoadImage(std::string image, std::string name,
                                                        bool primary);
  void Unload(LoadedCode* code);
  // Bench --compare-original: the captured code object as a second module
  // (original_), attributes applied, module variables restored into it.
  absl::Status LoadOriginal();
  // Copies `chunks` back and waits until they have landed.
  absl::Status RestoreChunks(const std::vector<Chunk>& chunks);
  // `written` (WrittenChunks()) for `code`: module variables at its addresses.
  std::vector<Chunk> ChunksFor(const LoadedCode& code, const std::vector<Chunk>& written) const;
  // Device memory compared with the post image; module variables read from
  // `code`. `only` (may be null) selects the regions compared.
  absl::StatusOr<ValidationReport> Compare(const LoadedCode& code, const CompareOptions& options,
                                           const std::function<bool(size_t)>* only);
  // Restores `code`'s inputs, launches it once and compares (a bench's
  // validation); puts back regions it found changed that the capture says
  // the kernel does not write, so the next binary starts clean.
  absl::StatusOr<ValidationReport> ValidateLoaded(LoadedCode& code,
                                                  const std::vector<Chunk>& written,
                                                  const CompareOptions& options);
  // Uploads the pre image of every region of `report` that differs (and of
  // module variables, into `code`). Returns the regions it put back.
  absl::StatusOr<std::vector<RegionResult>> RepairDiffering(const LoadedCode& code,
                                                            const ValidationReport& report);
  // The captured argument blob, pointers patched when relocated, texture and
  // surface handles replaced by recreated objects (texture_objects.h).
  absl::Status PrepareArguments();
  // The replay address of captured memory [va, va+size) inside one restored
  // region (for recreated texture objects).
  absl::StatusOr<uint64_t> PlaceCaptured(uint64_t va, uint64_t size) const;
  // Validate()'s probe of a failing overridden launch (see Validate()).
  absl::Status ProbeLaunchShape(const CompareOptions& options, ValidationReport* report);
  // Fills info_.moved (what moved, with the pointers found into it) and
  // says it on stderr: a note or the relocation alarm (report.h).
  void ReportRelocation();
  absl::Status CopyToReplay(const Placement& p, uint64_t offset, const std::string& bytes);
  absl::Status CopyFromReplay(const Placement& p, uint64_t offset, size_t size, std::string* out);
  absl::Status LaunchAsync();
  absl::StatusOr<std::vector<Chunk>> WrittenChunks();
  // The captured module variables (pre-image region indices) that `code`
  // does not define and the captured dispatch left unchanged: unreachable
  // (report->unreachable) when no captured word points into them, else not
  // compared with the count (pointer_scan.h says why).
  absl::Status ClassifyAbsentVariables(const LoadedCode& code, const std::vector<int>& regions,
                                       ValidationReport* report) const;
  void Warn(const std::string& w);

  const CaptureSource* src_;
  const CudaDriver& cu_;
  SessionOptions options_;
  ReplayInfo info_;
  TextureObjects textures_;  // destroyed explicitly while the context exists

  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  std::unique_ptr<LoadedCode> code_;      // the code object launched (captured or --code-object)
  CUfunction function_ = nullptr;         // code_->function
  std::unique_ptr<LoadedCode> original_;  // bench --compare-original: the captured one beside it
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr;
  CUevent stop_ = nullptr;
  std::vector<std::pair<CUdeviceptr, size_t>> reservations_;
  std::vector<std::pair<CUdeviceptr, size_t>> mapped_;
  std::vector<CUmemGenericAllocationHandle> handles_;
  std::vector<std::pair<void*, size_t>> host_mmaps_;
  std::vector<void*> host_allocs_;
  std::vector<Placement> placements_;  // per pre region
  // Mapping thread state. handles_/mapped_ are appended by the mapping
  // thread while it runs and read only after it was joined.
  std::vector<MapJob> map_jobs_;
  std::vector<uint32_t> region_mapping_;  // per pre region: its map_jobs_ ordinal
  CUmemAllocationProp map_prop_ = {};
  MappingProgress map_progress_;
  std::atomic<bool> map_cancel_{false};
  std::thread mapper_;
  absl::Status map_status_;
  double map_seconds_ = 0;
  Relocator relocator_;
  std::unique_ptr<PatchTally> tally_;  // pointer words patched per moved range (the restore's)
  absl::flat_hash_map<uint64_t, size_t> moved_region_;  // moved range's old va -> pre region
  std::string args_;                   // argument blob (patched when relocated)
  std::vector<void*> kernel_params_;   // pointers into args_ (per argument)
  std::optional<std::vector<Chunk>> written_;  // RestoreWrittenRegions()'s bytes
  bool prepared_ = false;
  bool launched_ = false;               // a launch was enqueued since the restore
  bool comparison_prepared_ = false;    // PrepareComparison ran
  std::unique_ptr<DeviceExpectation> expectation_;  // validate's device path (may be null)
  ComparisonInfo comparison_;           // what PrepareComparison decided (report.h)
  LaunchShape captured_launch_;  // the manifest's launch
  LaunchShape launch_;           // captured_launch_ with options_.launch applied
  bool use_captured_launch_ = false;
};

}  // namespace kerncap::replay

#endif  // KERNCAP_REPRODUCER_REPLAY_CUDA_REPLAY_SESSION_H_
