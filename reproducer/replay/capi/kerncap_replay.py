"""kerncap_replay: a dependency-free ctypes binding of libkerncap_replay.so.

Restores a captured kernel dispatch's memory at its original virtual
addresses in this process, so that code in the same process (e.g. a Triton
JIT function launched through torch) can run against it in the device's
primary context, then validates the result against the captured outputs and
times launches. See kerncap_replay_capi.h for the exact semantics.

    from kerncap_replay import Replay

    with Replay("capture.kcap") as r:
        info = r.prepare()                    # memory restored, context current
        # a pointer argument's captured value, as an address in this replay:
        arg = info["arguments"][0]
        ptr = r.translate(int.from_bytes(bytes.fromhex(arg["hex"]), "little"))
        ...                                   # launch the kernel yourself
        report = r.validate(dtype="f32", atol=1e-5)
        assert report["pass"], report["differing"]
        r.restore_inputs()                    # before launching again
        timing = r.bench(variant="rebuilt.cubin")  # the same launch path for both
        print(timing["speedup"], timing["revalidated"])

Python 3.8+, standard library only.
"""

import ctypes
import ctypes.util
import json
import os
import shutil

__all__ = ["ReplayError", "Replay", "find_library", "version", "LIBRARY_NAME"]

LIBRARY_NAME = "libkerncap_replay.so"

# Return codes of the C API (kerncap-replay's exit codes).
E_USAGE = 2
E_REPLAY = 1  # the shared exit-code table (docs/EXIT_CODES.md)
E_NO_DEVICE = 77

_ERR_SIZE = 4096


class ReplayError(RuntimeError):
    """A failure reported by libkerncap_replay (or finding it).

    ``code`` is the C API's return code: 2 bad argument/options, 1 replay
    error, 77 no CUDA driver or device (a test may treat it as "skip"),
    0 when the library could not be found or loaded.
    """

    def __init__(self, message, code=0):
        super().__init__(message)
        self.code = code

    @property
    def no_device(self):
        return self.code == E_NO_DEVICE


def _candidates(explicit):
    """(path, where it came from) in search order; paths may not exist."""
    out = []
    if explicit:
        out.append((os.fspath(explicit), "explicit library argument"))
    env = os.environ.get("KERNCAP_REPLAY_LIB")
    if env:
        out.append((env, "$KERNCAP_REPLAY_LIB"))
    here = os.path.dirname(os.path.abspath(__file__))
    out.append((os.path.join(here, LIBRARY_NAME), "next to kerncap_replay.py"))
    out.append((os.path.join(here, "lib", LIBRARY_NAME), "lib/ next to kerncap_replay.py"))
    out.append((os.path.join(os.getcwd(), "lib", LIBRARY_NAME), "./lib"))
    tools = []
    tool_env = os.environ.get("KERNCAP_REPLAY")
    if tool_env:
        tools.append((tool_env, "$KERNCAP_REPLAY"))
    on_path = shutil.which("kerncap-replay")
    if on_path:
        tools.append((on_path, "kerncap-replay on $PATH"))
    for tool, where in tools:
        # $KERNCAP_REPLAY may name the binary or the folder holding it.
        tool_dir = tool if os.path.isdir(tool) else os.path.dirname(os.path.abspath(tool))
        real_dir = os.path.dirname(os.path.realpath(tool)) if not os.path.isdir(tool) else tool_dir
        for d in dict.fromkeys([tool_dir, real_dir]):  # the link's folder, then the target's
            out.append((os.path.normpath(os.path.join(d, "..", "lib", LIBRARY_NAME)),
                        "%s (%s/../lib)" % (where, d)))
            out.append((os.path.join(d, LIBRARY_NAME), "%s (%s)" % (where, d)))
    return out


def find_library(explicit=None):
    """The path of libkerncap_replay.so.

    Order: `explicit`; $KERNCAP_REPLAY_LIB; next to this file, its lib/ and
    ./lib; the folder of kerncap-replay ($KERNCAP_REPLAY, else found on
    $PATH)/../lib and that folder itself; ctypes.util.find_library
    ("kerncap_replay"). An explicit path or $KERNCAP_REPLAY_LIB that does not
    exist is an error (not silently skipped). Raises ReplayError listing
    every place tried.
    """
    tried = []
    for path, where in _candidates(explicit):
        if os.path.isfile(path):
            return path
        tried.append("%s: %s" % (where, path))
        if where in ("explicit library argument", "$KERNCAP_REPLAY_LIB"):
            raise ReplayError("%s not found (%s)" % (LIBRARY_NAME, tried[-1]))
    found = ctypes.util.find_library("kerncap_replay")
    if found:
        return found
    tried.append('ctypes.util.find_library("kerncap_replay"): nothing')
    raise ReplayError(
        "%s not found; tried:\n  %s\nBuild it (target kerncap_replay_capi, in <build>/lib), "
        "or set $KERNCAP_REPLAY_LIB to its path." % (LIBRARY_NAME, "\n  ".join(tried)))


_LIBS = {}


def _load(path):
    lib = _LIBS.get(path)
    if lib is not None:
        return lib
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ReplayError("cannot load %s: %s" % (path, e)) from e
    c_char_p, c_void_p, c_size_t = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t
    try:
        lib.kerncap_replay_open.restype = c_void_p
        lib.kerncap_replay_open.argtypes = [c_char_p, c_char_p, c_char_p, c_size_t]
        lib.kerncap_replay_prepare.restype = ctypes.c_int
        lib.kerncap_replay_prepare.argtypes = [c_void_p, c_char_p, c_size_t]
        lib.kerncap_replay_info_json.restype = c_char_p
        lib.kerncap_replay_info_json.argtypes = [c_void_p]
        lib.kerncap_replay_translate.restype = ctypes.c_uint64
        lib.kerncap_replay_translate.argtypes = [c_void_p, ctypes.c_uint64]
        lib.kerncap_replay_launch.restype = ctypes.c_int
        lib.kerncap_replay_launch.argtypes = [c_void_p, ctypes.POINTER(ctypes.c_double),
                                              c_char_p, c_size_t]
        lib.kerncap_replay_restore_inputs.restype = ctypes.c_int
        lib.kerncap_replay_restore_inputs.argtypes = [c_void_p, c_char_p, c_size_t]
        lib.kerncap_replay_validate.restype = ctypes.c_int
        # report_json as void** so that ctypes hands back the raw pointer to free.
        lib.kerncap_replay_validate.argtypes = [c_void_p, c_char_p, ctypes.POINTER(c_void_p),
                                                c_char_p, c_size_t]
        lib.kerncap_replay_free.restype = None
        lib.kerncap_replay_free.argtypes = [c_void_p]
        lib.kerncap_replay_close.restype = None
        lib.kerncap_replay_close.argtypes = [c_void_p]
        lib.kerncap_replay_version.restype = c_char_p
        lib.kerncap_replay_version.argtypes = []
    except AttributeError as e:
        raise ReplayError("%s is not a kerncap replay library: %s" % (path, e)) from e
    # Newer than the rest: an older library works without it (bench() says so).
    if hasattr(lib, "kerncap_replay_bench"):
        lib.kerncap_replay_bench.restype = ctypes.c_int
        lib.kerncap_replay_bench.argtypes = [c_void_p, c_char_p, ctypes.POINTER(c_void_p),
                                             c_char_p, c_size_t]
    _LIBS[path] = lib
    return lib


def version(library=None):
    """The library's kerncap version string."""
    return _load(find_library(library)).kerncap_replay_version().decode()


def _text(err):
    return err.value.decode("utf-8", "replace")


class Replay:
    """One capture, replayed in this process. A context manager (closes)."""

    def __init__(self, capture_path, device=-1, allow_relocation=True, force_relocation=False,
                 code_object=None, library=None):
        self._handle = None
        self.library = find_library(library)
        self._lib = _load(self.library)
        options = {"device": int(device), "allow_relocation": bool(allow_relocation),
                   "force_relocation": bool(force_relocation)}
        if code_object is not None:
            options["code_object"] = os.fspath(code_object)
        err = ctypes.create_string_buffer(_ERR_SIZE)
        handle = self._lib.kerncap_replay_open(os.fsencode(os.fspath(capture_path)),
                                               json.dumps(options).encode(), err, _ERR_SIZE)
        if not handle:
            raise ReplayError(_text(err) or "kerncap_replay_open failed", E_REPLAY)
        self._handle = handle

    # -- lifetime ---------------------------------------------------------
    def close(self):
        """Releases the restored memory, reservations and module. Idempotent."""
        handle, self._handle = self._handle, None
        if handle:
            self._lib.kerncap_replay_close(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def _h(self):
        if not self._handle:
            raise ReplayError("the replay is closed", E_USAGE)
        return self._handle

    def _check(self, rc, err, what):
        if rc != 0:
            raise ReplayError(_text(err) or ("%s failed (code %d)" % (what, rc)), rc)

    # -- the C API ----------------------------------------------------------
    @property
    def info(self):
        """The capture (and, after prepare, placement) as a dict; re-read each time."""
        text = self._lib.kerncap_replay_info_json(self._h())
        if text is None:
            raise ReplayError("kerncap_replay_info_json failed", E_REPLAY)
        return json.loads(text.decode("utf-8", "replace"))

    def prepare(self):
        """Restores the pre-dispatch state; the primary context is current afterwards.

        Call it before torch/triton touch the GPU (so nothing else can take the
        captured address ranges first), then make info["replay_device"] their
        current device. Returns info.
        """
        err = ctypes.create_string_buffer(_ERR_SIZE)
        self._check(self._lib.kerncap_replay_prepare(self._h(), err, _ERR_SIZE), err,
                    "prepare")
        return self.info

    def translate(self, captured_va):
        """Captured address -> address in this replay (0: in no restored region)."""
        return int(self._lib.kerncap_replay_translate(self._h(), int(captured_va)))

    def launch(self):
        """Launches the captured kernel (synchronized); device time in ms."""
        ms = ctypes.c_double(0.0)
        err = ctypes.create_string_buffer(_ERR_SIZE)
        self._check(self._lib.kerncap_replay_launch(self._h(), ctypes.byref(ms), err,
                                                    _ERR_SIZE), err, "launch")
        return ms.value

    def restore_inputs(self):
        """Puts every region the kernel writes back to its pre-dispatch bytes."""
        err = ctypes.create_string_buffer(_ERR_SIZE)
        self._check(self._lib.kerncap_replay_restore_inputs(self._h(), err, _ERR_SIZE), err,
                    "restore_inputs")

    def validate(self, atol=0.0, rtol=0.0, ulp=0, dtype=None, regions=None):
        """Compares device memory with the captured outputs; the report dict.

        `regions`: {index, "0xVA" or name: {"dtype", "atol", "rtol", "ulp"}}.
        A failed comparison is report["pass"] == False, not an exception.
        """
        options = {}
        if dtype is not None:
            options["dtype"] = dtype
        if atol:
            options["atol"] = float(atol)
        if rtol:
            options["rtol"] = float(rtol)
        if ulp:
            options["ulp"] = int(ulp)
        if regions:
            options["regions"] = {str(k): dict(v) for k, v in regions.items()}
        return self._call_report(self._lib.kerncap_replay_validate, options, "validate")

    def bench(self, variant=None, iterations=100, warmup=10, cold_l2=False,
              compare_original=None, validate=None):
        """Times the captured kernel, or `variant` (a cubin/PTX/fatbin file
        defining the captured kernel) against it, through kerncap-replay
        bench's launch path; the report dict (kerncap_replay_bench).

        compare_original defaults to True when a variant is given. `validate`:
        the options of validate() as a dict ({"dtype": "f32", "atol": ...}) for
        the validations before and after the timing. A binary that does not
        validate is report["pass"] == False, not an exception. Afterwards the
        memory holds one launch's result: restore_inputs() before launching.
        """
        options = {"iterations": int(iterations), "warmup": int(warmup),
                   "cold_l2": bool(cold_l2),
                   "variant": os.fspath(variant) if variant is not None else None}
        if compare_original is not None:
            options["compare_original"] = bool(compare_original)
        if validate:
            options["validate"] = dict(validate)
        fn = getattr(self._lib, "kerncap_replay_bench", None)
        if fn is None:
            raise ReplayError("%s has no kerncap_replay_bench (an older library): rebuild it"
                              % self.library, E_USAGE)
        return self._call_report(fn, options, "bench")

    def _call_report(self, fn, options, what):
        err = ctypes.create_string_buffer(_ERR_SIZE)
        report = ctypes.c_void_p()
        rc = fn(self._h(), json.dumps(options).encode(), ctypes.byref(report), err, _ERR_SIZE)
        try:
            self._check(rc, err, what)
            return json.loads(ctypes.string_at(report.value).decode("utf-8", "replace"))
        finally:
            if report.value:
                self._lib.kerncap_replay_free(report)
