/* kerncap_replay_capi.h: the replay library of kerncap-replay as a C API
 * (libkerncap_replay.so), for programs that launch the captured kernel
 * themselves, e.g. a generated Triton reproducer that restores the captured
 * memory through this library and then calls the Triton JIT function (via
 * ctypes: kerncap_replay.py next to this header is the Python binding).
 *
 * Typical use:
 *
 *   kerncap_replay* r = kerncap_replay_open("capture.kcap", NULL, err, sizeof err);
 *   kerncap_replay_prepare(r, err, sizeof err);     // memory at its captured addresses
 *   uint64_t p = kerncap_replay_translate(r, captured_pointer);
 *   ... launch a kernel in the device's primary context (now current) ...
 *   char* report;
 *   kerncap_replay_validate(r, "{\"dtype\":\"f32\",\"atol\":1e-5}", &report, err, sizeof err);
 *   kerncap_replay_free(report);
 *   kerncap_replay_restore_inputs(r, err, sizeof err);  // before the next launch
 *   kerncap_replay_close(r);
 *
 * Conventions:
 *  - Functions returning int return 0 on success and non-zero on failure;
 *    on failure a one-line message (NUL-terminated, truncated to err_size
 *    bytes including the NUL) is written to err when err is non-NULL and
 *    err_size > 0. kerncap_replay_open returns NULL on failure. The
 *    non-zero codes are from the exit-code table every kerncap binary
 *    shares (docs/EXIT_CODES.md, common/exit_codes.h):
 *      KERNCAP_REPLAY_E_USAGE (2)      bad argument or options
 *      KERNCAP_REPLAY_E_REPLAY (1)     anything else that failed
 *      KERNCAP_REPLAY_E_NO_DEVICE (77) no CUDA driver or no CUDA device
 *    (kerncap_replay_open reports its failures as 2 or 1 through err only.)
 *  - A handle is not thread-safe: serialize the calls on one handle. Calls
 *    may come from any thread; each call that touches the GPU first makes
 *    the session's context (the device's PRIMARY context, the one the CUDA
 *    runtime, PyTorch and Triton use) current on the calling thread, and
 *    leaves it current.
 *  - libcuda.so.1 is loaded at run time (dlopen) by the first call that
 *    needs the GPU: the library itself loads, opens captures and describes
 *    them on machines without a driver.
 *  - Diagnostics (warnings, RELOCATING notices) go to stderr, as kerncap-replay
 *    prints them.
 */
#ifndef KERNCAP_REPRODUCER_REPLAY_CAPI_KERNCAP_REPLAY_CAPI_H_
#define KERNCAP_REPRODUCER_REPLAY_CAPI_KERNCAP_REPLAY_CAPI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KERNCAP_REPLAY_API __attribute__((visibility("default")))

/* Incremented when a function or a documented JSON key changes meaning
 * (additions do not change it). kerncap_replay_capi_version() returns it. */
#define KERNCAP_REPLAY_CAPI_VERSION 2  /* 2: E_REPLAY is 1 (was 3), the shared table */

#define KERNCAP_REPLAY_E_USAGE 2
#define KERNCAP_REPLAY_E_REPLAY 1
#define KERNCAP_REPLAY_E_NO_DEVICE 77

typedef struct kerncap_replay kerncap_replay;

/* Opens a capture. Needs no GPU.
 *
 * capture_path: a .kcap file (what `kerncap-replay` and `kerncapctl export`
 *   use), or a folder holding one: <folder>/capture.kcap (a reproducer
 *   project), else the folder's only *.kcap file.
 * options_json: NULL or "" for the defaults, else a JSON object with any of
 *   "device"           int, default -1: the captured device ordinal (0 if
 *                      absent); like kerncap-replay --device
 *   "allow_relocation" bool, default true; false is --no-relocate
 *   "force_relocation" bool, default false; true is --force-relocate
 *   "code_object"      string or null: a cubin/PTX file defining the captured
 *                      kernel name, loaded instead of the captured code
 *                      object (--code-object); only kerncap_replay_launch
 *                      runs it
 *   "verify_digests"   bool, default false: recompute each chunk's SHA-256
 *                      on read (--verify-digests)
 *   Unknown keys are an error. */
KERNCAP_REPLAY_API kerncap_replay* kerncap_replay_open(const char* capture_path,
                                                       const char* options_json, char* err,
                                                       size_t err_size);

/* Restores the pre-dispatch state at the captured virtual addresses
 * (relocating with pointer patching when allowed and an address cannot be
 * had), loads the code object, restores module variables and function
 * attributes: kerncap-replay's restore. Afterwards the device's primary
 * context is current on the calling thread. Call it BEFORE anything else in
 * the process uses the GPU (torch, triton): the address ranges are reserved
 * before the context exists, so allocations of others cannot take them. A second call only makes the
 * context current again. A failed prepare releases everything it had taken,
 * so it can be retried. Without a CUDA driver or device it fails with a
 * message that says so ("no CUDA driver: ...", "no CUDA device"). */
KERNCAP_REPLAY_API int kerncap_replay_prepare(kerncap_replay* r, char* err, size_t err_size);

/* A JSON description of the capture, owned by the handle: valid until the
 * next call on the handle, or close. NULL only for a NULL handle or when
 * memory runs out. Keys (numbers are JSON integers, addresses included):
 *
 *   "capture_id", "capture_path",
 *   "kernel": {"name" (mangled), "demangled", "platform" ("cuda", "hsa", ...),
 *              "arch", "jit_metadata" (the Triton/JIT metadata the capture
 *              holds, parsed; absent when none; a string when not JSON)},
 *   "device": {"ordinal", "name", "arch", "uuid"}      (the captured device)
 *   "prepared": bool, "relocated": bool (some region is not at its captured
 *   address), "relocation": "none", "note" (only small pinned host blocks
 *   moved, with no pointer to them) or "relocated" (see "replay"'s
 *   "moved_ranges": each moved region's kind, old and new address, and the
 *   pointers found into it), "post_complete": bool,
 *   "launch": {"grid": [x,y,z], "block": [x,y,z], "shared_bytes",
 *              "private_bytes", "cluster": [x,y,z] ([1,1,1] when none),
 *              "cooperative": bool, "attributes": {name: value}},
 *   "argument_blob_hex": the whole captured argument blob,
 *   "arguments": [{"index", "offset", "size", "kind" ("by_value", "pointer",
 *                  "hidden", "unspecified"), "name", "type_name",
 *                  "hex" (the captured bytes in memory order, two hex digits
 *                         per byte: little-endian for numbers and pointers),
 *                  "pointer_region" (for an 8-byte argument that is not
 *                         hidden, whose value lies in a captured region:
 *                         that region's index; else -1),
 *                  "pointer_offset" (only when pointer_region >= 0: the
 *                         value minus the region's captured_va),
 *                  after prepare only: "replay_hex" (the bytes this replay
 *                         launches with: relocated pointers and texture/
 *                         surface handles replaced)}],
 *   "texture_objects": [{"type" ("texture", "surface"), "captured_handle",
 *                  "argument_offsets" (blob offsets of the words holding
 *                  it), "captured_ptr", "bytes" (memory it covers),
 *                  after prepare only: "replay_handle", "replay_ptr" (the
 *                  object recreated for this replay; a kernel launched by
 *                  the caller must be given replay_handle)}],
 *   "regions": [{"index" (pre-image index, the one validate's "regions" and
 *                kerncap-replay --region-dtype take), "name" (the module
 *                variable's symbol; "" for allocations: the name reports
 *                use), "captured_va", "size", "kind" ("device", "device_vmm",
 *                "managed", "host_pinned", "module_global", "constant",
 *                "kernarg", ...), "device" (captured ordinal),
 *                "host": bool (host memory), "written": bool (the captured
 *                kernel changed it),
 *                after prepare only: "restored": bool, "replay_va" (its
 *                address in this replay; 0 when not restored, e.g. kernarg
 *                regions and module variables the code object lacks)}],
 *   after prepare only: "replay": the restore facts kerncap-replay --json
 *                prints (device used, moved ranges, timings, warnings), and
 *                "replay_device": the ordinal of the device replayed on (make
 *                it the current device of torch/triton before launching). */
KERNCAP_REPLAY_API const char* kerncap_replay_info_json(kerncap_replay* r);

/* A captured virtual address -> its address in this replay: identity unless
 * the region was relocated (or is a module variable, which lives where the
 * loaded module put it). Any address inside a restored region translates.
 * 0 when the address is in no restored region, before prepare, and for a
 * NULL handle. */
KERNCAP_REPLAY_API uint64_t kerncap_replay_translate(kerncap_replay* r, uint64_t captured_va);

/* Launches the captured kernel (or options' code_object) with the captured
 * grid/block/shared memory/cluster/cooperative configuration and argument
 * blob (pointers patched when relocated) on the session's stream, and waits
 * for it. Prepares first when needed. *ms (may be NULL) = device time in
 * milliseconds (CUDA events). */
KERNCAP_REPLAY_API int kerncap_replay_launch(kerncap_replay* r, double* ms, char* err,
                                             size_t err_size);

/* Puts every region the captured kernel writes back to its pre-dispatch
 * bytes (pointers patched when relocated), synchronously: the context is
 * synchronized before and after. For repeated launches and timing of
 * in-place kernels. The bytes are read from the capture once and then kept
 * in host memory. Prepares first when needed. */
KERNCAP_REPLAY_API int kerncap_replay_restore_inputs(kerncap_replay* r, char* err,
                                                     size_t err_size);

/* Synchronizes the context (waiting for kernels launched by the caller too)
 * and compares every restored region's device memory with the captured
 * post-dispatch state. Needs a prepared handle and a capture with a post
 * image. Launches nothing.
 *
 * options_json: NULL or "" = every region bitwise exact; else an object:
 *   "dtype"       element type of every region: "f32", "f16", "bf16", "f64",
 *                 "i8".."i64", "u8".."u64", "bytes" (also "float", "half",
 *                 "int32", ...)                 -> CompareOptions::dtype
 *   "atol", "rtol" numbers >= 0, "ulp" integer >= 0
 *                                               -> CompareOptions::tolerance
 *   "nan_unequal" bool: a NaN never matches (default: NaN matches NaN)
 *   "regions"     {"<selector>": {"dtype", "atol", "rtol", "ulp"}, ...}: per
 *                 region overrides; selector = the region's index (decimal),
 *                 its captured address ("0x..."), or its name. Each becomes a
 *                 CompareOptions rule (RegionDTypeRule) with the region's
 *                 dtype (else the global one) and, when it sets atol, rtol or
 *                 ulp, its own tolerance (keys it leaves out keep the global
 *                 value). A selector that matches no region is an error.
 *   Tolerances apply to typed elements only (comparator.h): a tolerance with
 *   no dtype to apply it to is an error, not a silent exact comparison.
 *   Element e matches a when bitwise equal, or |a-e| <= atol + rtol*|e|, or
 *   the ULP distance <= ulp. Unknown keys are errors.
 *
 * *report_json: malloc'd (free with kerncap_replay_free); on success only.
 * It is the document `kerncap-replay validate --json` prints ("result":
 * "pass", "fail" or "incomplete", "regions_compared", "regions_failing",
 * "region_results": [...] with every compared region's statistics,
 * "not_compared": [{"index", "post_only", "va", "kind", "name", "size",
 * "reason"}] for captured state the comparison could not cover, e.g. a
 * module variable the loaded code object lacks, and the restore facts) plus
 *   "pass": bool (every region within tolerance AND nothing left
 *           uncompared: "result" is "pass"),
 *   "differing": [{"index", "name", "va", "replay_va", "dtype", "count"
 *                  (elements outside the tolerance), "elements_differing"
 *                  (bitwise), "worst_abs", "worst_rel", "worst_ulp",
 *                  "first_fail_offset", "samples": [{"offset", "expected",
 *                  "actual"}]}] for the regions that FAIL (empty iff pass),
 *   "within_tolerance": the same for regions that differ bitwise but pass.
 * A failed comparison is not an error: the function returns 0 and "pass"
 * is false. Infinite/NaN errors are the strings "inf", "-inf", "nan". */
KERNCAP_REPLAY_API int kerncap_replay_validate(kerncap_replay* r, const char* options_json,
                                               char** report_json, char* err, size_t err_size);

/* Times the captured kernel, or a variant of it, exactly as `kerncap-replay
 * bench` does (the same session stream and launch call for every binary):
 * before each timed launch the regions the kernel writes are restored (and,
 * with cold_l2, a buffer of twice the L2 size is overwritten on the stream),
 * then CUDA events are recorded around the kernel launch alone. A variant
 * and the captured binary are interleaved ABBA. For the timing the
 * persisting-L2 limit is set to 0, persisting lines are reset and the
 * stream's access-policy window cleared (the caller's limit is put back
 * afterwards). Every timed binary is validated before the timing loop and
 * again after it (inputs restored, one launch, a full comparison), so a
 * binary that corrupts state only on later launches shows. Prepares first
 * when needed; the primary context is current afterwards, and the memory
 * holds one launch's result (as after kerncap_replay_launch: call
 * kerncap_replay_restore_inputs before launching again).
 *
 * options_json: NULL or "" for the defaults, else an object with
 *   "iterations"        int 1..1000000, default 100: timed launches (of each
 *                       binary)
 *   "warmup"            int 0..100000, default 10: untimed launches first
 *   "cold_l2"           bool, default false
 *   "variant"           string or null: a cubin/PTX/fatbin file defining the
 *                       captured kernel name (its module variables are
 *                       matched to the captured ones as validate does); null:
 *                       time the captured binary alone
 *   "compare_original"  bool, default true when a variant is given, else
 *                       false: also time the captured binary, interleaved
 *                       (without a variant: the captured binary against a
 *                       second copy of itself, a noise check)
 *   "validate"          object: how the validations compare, the options of
 *                       kerncap_replay_validate (default: bitwise)
 *   Unknown keys are errors.
 *
 * *report_json: malloc'd (free with kerncap_replay_free); on success only:
 *   {"variant": stats or null,      the variant (null without one)
 *    "original": stats or null,     the captured binary (null with a variant
 *                                   and compare_original false)
 *    "speedup": number or null,     original median / variant median (> 1:
 *                                   the variant is faster); null unless both
 *    "spread": {"pairs", "median", "p10", "p90", "min", "max"} or null: the
 *              ratios original/variant of the launches timed back to back
 *    "cold_l2": bool, "l2_flush_bytes", "iterations", "warmup",
 *    "interleave": "ABBA" or null, "restore_each": bool,
 *    "protocol": what one timed launch is, in words,
 *    "persisting_l2": {"supported", "limit_before_bytes",
 *                      "limit_during_bytes", "lines_reset",
 *                      "stream_window_cleared", "note"?},
 *    "validated":   {"variant": verdict, "original": verdict}  before timing,
 *    "revalidated": {"variant": verdict, "original": verdict}  after it,
 *                   verdict = "pass", "fail", "incomplete" (as validate's
 *                   "result"), or null (that binary was not timed, or the
 *                   capture has no post image),
 *    "validation": {"variant": {"before": v, "after": v} or null,
 *                   "original": ..., "changed_during_timing": [regions the
 *                   launches wrote that the capture says the kernel does
 *                   not], "note"?}, v = {"result", "regions_compared",
 *                   "regions_failing", "failing": [...], "not_compared": [...]},
 *    "pass": bool (every verdict present is "pass"),
 *    "replay": the restore facts}
 *   stats = {"iterations", "min_ms", "median_ms", "mean_ms", "max_ms",
 *            "p10_ms", "p90_ms", "stddev_ms", "code_object"}.
 * A binary that does not validate is not an error: the function returns 0
 * and "pass" is false. */
KERNCAP_REPLAY_API int kerncap_replay_bench(kerncap_replay* r, const char* options_json,
                                            char** report_json, char* err, size_t err_size);

/* Frees memory the library returned (report_json). NULL-safe. */
KERNCAP_REPLAY_API void kerncap_replay_free(void* p);

/* Releases everything: unmaps the restored memory, frees the address
 * reservations, unloads the module, releases the primary context (other
 * users of it keep it alive). NULL-safe. */
KERNCAP_REPLAY_API void kerncap_replay_close(kerncap_replay* r);

/* The kerncap version (project(kerncap VERSION ...) in CMakeLists.txt). */
KERNCAP_REPLAY_API const char* kerncap_replay_version(void);

/* KERNCAP_REPLAY_CAPI_VERSION of the library (compare with the header's). */
KERNCAP_REPLAY_API int kerncap_replay_capi_version(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* KERNCAP_REPRODUCER_REPLAY_CAPI_KERNCAP_REPLAY_CAPI_H_ */
