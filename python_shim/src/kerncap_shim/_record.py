"""Turning Triton objects into bounded, JSON-safe records.

Everything here runs at compile time (or when an autotuner settles on a
config), never per launch, and never raises: every accessor is defensive
because the objects come from several Triton releases (2.1 to 3.6+) and from
torch Inductor, whose attributes differ.

Values are made JSON-safe for nlohmann::json on the C++ side, which rejects
bare NaN/Infinity tokens: non-finite floats become {"float": "inf"}.
"""
import hashlib
import inspect
import math
import os
import sys

# Sizes that keep one document well under the agent's 1 MiB limit.
MAX_SOURCE_BYTES = 128 * 1024
MAX_STR = 4096
MAX_ITEMS = 256
MAX_DEPTH = 8


def source_limit():
    try:
        v = int(os.environ.get("KERNCAP_SHIM_MAX_SOURCE", ""))
        return max(0, v)
    except ValueError:
        return MAX_SOURCE_BYTES


def _type_name(v):
    t = type(v)
    return "%s.%s" % (t.__module__, t.__qualname__)


def jsonable(v, depth=0):
    """A JSON-safe copy of ``v``, bounded in depth, length and item count."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        # Beyond int64 nlohmann would silently turn it into a double.
        return v if -(1 << 63) <= v < (1 << 64) else {"int": str(v)}
    if isinstance(v, float):
        if math.isfinite(v):
            return v
        return {"float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    if isinstance(v, str):
        return v if len(v) <= MAX_STR else v[:MAX_STR] + "...[truncated]"
    if isinstance(v, (bytes, bytearray)):
        return {"bytes": len(v)}
    if depth >= MAX_DEPTH:
        return {"repr": _short_repr(v)}
    if isinstance(v, dict):
        out = {}
        for i, (k, x) in enumerate(v.items()):
            if i >= MAX_ITEMS:
                out["..."] = "%d more" % (len(v) - MAX_ITEMS)
                break
            out[k if isinstance(k, str) else _key_str(k)] = jsonable(x, depth + 1)
        return out
    if isinstance(v, (list, tuple, set, frozenset)):
        seq = list(v) if not isinstance(v, (set, frozenset)) else sorted(v, key=repr)
        out = [jsonable(x, depth + 1) for x in seq[:MAX_ITEMS]]
        if len(seq) > MAX_ITEMS:
            out.append("...%d more" % (len(seq) - MAX_ITEMS))
        return out
    cls = type(v)
    mod = getattr(cls, "__module__", "") or ""
    name = cls.__name__
    # triton.language.constexpr wraps the real value.
    if name == "constexpr" and hasattr(v, "value"):
        return jsonable(v.value, depth + 1)
    # Triton and torch dtypes: their str() is the name Triton's signature uses.
    if name in ("dtype", "pointer_type", "block_type") or (mod.startswith("torch") and name == "dtype"):
        return {"dtype": str(v)}
    if name in ("Config", "InductorConfig") and hasattr(v, "kwargs"):
        return config_json(v)
    if hasattr(v, "_asdict"):  # namedtuples, e.g. GPUTarget on some releases
        try:
            return jsonable(dict(v._asdict()), depth + 1)
        except Exception:  # pylint: disable=broad-except
            pass
    if hasattr(cls, "__dataclass_fields__"):
        try:
            return {k: jsonable(getattr(v, k, None), depth + 1) for k in cls.__dataclass_fields__}
        except Exception:  # pylint: disable=broad-except
            pass
    if hasattr(v, "name") and hasattr(cls, "__members__"):  # enum
        return str(v.name)
    return {"repr": _short_repr(v), "type": _type_name(v)}


def _short_repr(v):
    try:
        r = repr(v)
    except Exception:  # pylint: disable=broad-except
        r = "<unrepresentable %s>" % _type_name(v)
    return r if len(r) <= 256 else r[:256] + "..."


def _key_str(k):
    if isinstance(k, tuple):
        return ",".join(str(x) for x in k)
    return str(k)


def config_json(cfg):
    """An autotuner config (triton.Config or Inductor's) as a dict."""
    if cfg is None:
        return None
    out = {"kwargs": jsonable(dict(getattr(cfg, "kwargs", {}) or {}), 1)}
    for attr in ("num_warps", "num_stages", "num_ctas", "maxnreg", "num_consumer_groups",
                 "num_buffers_warp_spec", "ir_override", "found_by_coordesc"):
        if hasattr(cfg, attr):
            val = getattr(cfg, attr)
            if val is not None:
                out[attr] = jsonable(val, 1)
    if getattr(cfg, "pre_hook", None) is not None:
        out["pre_hook"] = True
    return out


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------
# JIT functions


def unwrap_jit(fn, limit=16):
    """The JITFunction under Autotuner/Heuristics wrappers (their ``.fn``)."""
    seen = 0
    while fn is not None and seen < limit:
        if type(fn).__name__ in ("JITFunction", "InterpretedFunction") or hasattr(fn, "arg_names") and hasattr(fn, "src"):
            return fn
        fn = getattr(fn, "fn", None)
        seen += 1
    return None


def arg_names_of(jit_fn):
    names = getattr(jit_fn, "arg_names", None)
    if isinstance(names, (list, tuple)):
        return [str(n) for n in names]
    params = getattr(jit_fn, "params", None)
    if isinstance(params, (list, tuple)):
        try:
            return [str(p.name) for p in params]
        except Exception:  # pylint: disable=broad-except
            pass
    return []


def _jit_source(jit_fn):
    src = getattr(jit_fn, "src", None)
    if callable(src) and not isinstance(src, str):
        src = None
    if not isinstance(src, str):
        src = getattr(jit_fn, "_src", None)
    if not isinstance(src, str):
        pyfn = getattr(jit_fn, "fn", None)
        if pyfn is not None:
            try:
                src = inspect.getsource(pyfn)
            except (OSError, TypeError):
                src = None
    return src if isinstance(src, str) else None


def function_info(jit_fn, file_hint=None):
    """Source and location of a JIT function, with the source bounded.

    Returns (key, info): the key (a prefix of the source's SHA-256, plus the
    name) lets variants of one kernel name that come from different Python
    functions keep their own source.
    """
    pyfn = getattr(jit_fn, "fn", None)
    code = getattr(pyfn, "__code__", None)
    name = getattr(jit_fn, "__name__", None) or getattr(pyfn, "__name__", None) or "?"
    info = {
        "name": str(name),
        "qualname": str(getattr(pyfn, "__qualname__", None) or getattr(jit_fn, "__qualname__", None) or name),
        "module": str(getattr(jit_fn, "module", None) or getattr(pyfn, "__module__", None)
                      or getattr(jit_fn, "__module__", "") or ""),
    }
    if code is not None:
        info["file"] = code.co_filename
        # co_firstlineno is the first decorator's line for decorated functions.
        info["first_line"] = code.co_firstlineno
    elif file_hint:
        info["file"] = file_hint
    start = getattr(jit_fn, "starting_line_number", None)
    if isinstance(start, int):
        info["starting_line"] = start
        # The def's own line, as Triton computes it for the binary's line
        # table and device-assert messages (get_jit_fn_file_line): the first
        # source line that starts with "def ", counted from the decorators.
        raw = getattr(jit_fn, "raw_src", None)
        if isinstance(raw, (list, tuple)):
            for idx, line in enumerate(raw):
                if isinstance(line, str) and line.strip().startswith("def "):
                    info["def_line"] = start + idx
                    break
    src = _jit_source(jit_fn)
    limit = source_limit()
    if src is not None:
        raw = src.encode("utf-8", "replace")
        info["source_sha256"] = sha256_hex(raw)
        info["source_bytes"] = len(raw)
        if len(raw) > limit:
            info["source"] = raw[:limit].decode("utf-8", "ignore")
            info["source_truncated"] = True
        else:
            info["source"] = src
            info["source_truncated"] = False
    params = []
    plist = getattr(jit_fn, "params", None)
    if isinstance(plist, (list, tuple)):
        for p in plist:
            try:
                entry = {"name": str(p.name), "constexpr": bool(getattr(p, "is_constexpr", False))}
                ann = getattr(p, "annotation", None)
                if ann not in (None, "", inspect.Parameter.empty):
                    entry["annotation"] = str(ann)
                if getattr(p, "do_not_specialize", False):
                    entry["do_not_specialize"] = True
                if getattr(p, "do_not_specialize_on_alignment", False):
                    entry["do_not_specialize_on_alignment"] = True
                params.append(entry)
            except Exception:  # pylint: disable=broad-except
                continue
    else:
        constexpr_idx = set(getattr(jit_fn, "constexprs", []) or [])
        for i, n in enumerate(arg_names_of(jit_fn)):
            params.append({"name": n, "constexpr": i in constexpr_idx})
    if params:
        info["params"] = params
    key = "%s:%s" % (info["name"], (info.get("source_sha256") or "nosource")[:16])
    return key, info


# ---------------------------------------------------------------------------
# Compiled kernels


def _path_name(path, arg_names):
    """A Triton argument path ((3,) or (3, 1) for tuple members, or a name)
    as a readable name: "BLOCK" or "pair[1]"."""
    if isinstance(path, str):
        return path
    if isinstance(path, int):
        path = (path,)
    if isinstance(path, tuple) and path and isinstance(path[0], int):
        head = arg_names[path[0]] if path[0] < len(arg_names) else "arg%d" % path[0]
        return head + "".join("[%s]" % p for p in path[1:])
    return _key_str(path)


def signature_of(src, arg_names):
    sig = getattr(src, "signature", None)
    if not isinstance(sig, dict):
        return None
    return {_path_name(k, arg_names): jsonable(v, 1) for k, v in sig.items()}


def constexprs_of(src, arg_names):
    consts = getattr(src, "constants", None)
    if consts is None:
        consts = getattr(src, "constexprs", None)
    if not isinstance(consts, dict):
        return None
    return {_path_name(k, arg_names): jsonable(v, 1) for k, v in consts.items()}


def specialization_of(src, arg_names):
    attrs = getattr(src, "attrs", None)
    if attrs is None:
        return None
    if isinstance(attrs, dict):
        return {_path_name(k, arg_names): jsonable(v, 1) for k, v in attrs.items()}
    # Triton 3.0-3.2: AttrsDescriptor objects.
    for meth in ("to_dict", "get_fn_attrs"):
        f = getattr(attrs, meth, None)
        if callable(f):
            try:
                return jsonable(f(), 1)
            except Exception:  # pylint: disable=broad-except
                pass
    return jsonable(attrs, 1)


def metadata_dict(metadata):
    if metadata is None:
        return {}
    if isinstance(metadata, dict):
        return metadata
    asdict = getattr(metadata, "_asdict", None)
    if callable(asdict):
        try:
            return dict(asdict())
        except Exception:  # pylint: disable=broad-except
            return {}
    try:
        return dict(vars(metadata))
    except TypeError:
        return {}


def target_of(md):
    t = md.get("target")
    out = {}
    if t is not None:
        if isinstance(t, dict):
            out = {k: t.get(k) for k in ("backend", "arch", "warp_size") if k in t}
        else:
            for k in ("backend", "arch", "warp_size"):
                if hasattr(t, k):
                    out[k] = getattr(t, k)
    else:
        # Triton 2.x: {"device_type": "cuda", "cc": 90} or similar.
        if "device_type" in md:
            out["backend"] = md.get("device_type")
        if "cc" in md:
            out["arch"] = md.get("cc")
    out = {k: jsonable(v, 1) for k, v in out.items()}
    arch = out.get("arch")
    if out.get("backend") == "cuda" and isinstance(arch, int):
        out["name"] = "sm_%d" % arch
    elif isinstance(arch, str):
        out["name"] = arch
    return out


# Compile options worth having at the top of a variant; everything else that
# is a scalar goes under "options".
_MAIN_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "shared", "warp_size")
_SKIP_OPTIONS = {"name", "hash", "target", "extern_libs", "triton_version", "constants", "signature",
                 "tensordesc_meta"}


def options_of(md):
    main = {}
    rest = {}
    for k, v in md.items():
        if k in _SKIP_OPTIONS:
            continue
        if k in _MAIN_OPTIONS:
            main[k] = jsonable(v, 1)
        elif v is None or isinstance(v, (bool, int, float, str)):
            # Lists (supported fp8 types, dot precisions...) describe the
            # compiler, not the kernel: left out.
            rest[k] = jsonable(v, 1)
    return main, rest


BINARY_EXTS = ("cubin", "hsaco")


def binary_from_asm(asm):
    """(format, bytes) of the device binary in a CompiledKernel.asm."""
    if asm is None:
        return None, None
    for ext in BINARY_EXTS:
        try:
            if ext in asm:
                data = asm[ext]
                if isinstance(data, str):
                    data = data.encode("latin-1")
                if isinstance(data, (bytes, bytearray)):
                    return ext, bytes(data)
        except Exception:  # pylint: disable=broad-except
            continue
    return None, None


MAX_BINARY_READ = 512 << 20


def binary_from_group(metadata_group):
    """(format, bytes) read from the compiler's own output file (the
    compilation listener sees paths, not bytes). Read only; never written."""
    if not isinstance(metadata_group, dict):
        return None, None
    for fname, path in metadata_group.items():
        for ext in BINARY_EXTS:
            if isinstance(fname, str) and fname.endswith("." + ext):
                try:
                    if os.path.getsize(path) > MAX_BINARY_READ:
                        return ext, None
                    with open(path, "rb") as f:
                        return ext, f.read()
                except (OSError, TypeError):
                    return ext, None
    return None, None


def variant_record(src, metadata, binary_format, binary, via, cache_hit=None, jit_fn=None):
    """One compiled variant. ``src`` is an ASTSource-like object (or None),
    ``metadata`` the compiled kernel's metadata (dict or namedtuple)."""
    md = metadata_dict(metadata)
    jit_fn = jit_fn if jit_fn is not None else getattr(src, "fn", None)
    arg_names = arg_names_of(jit_fn) if jit_fn is not None else []
    name = md.get("name") or getattr(src, "name", None) or getattr(jit_fn, "__name__", None)
    rec = {"name": str(name) if name is not None else None}
    if binary is not None:
        rec["binary"] = {"format": binary_format, "sha256": sha256_hex(binary), "size": len(binary)}
    elif binary_format:
        rec["binary"] = {"format": binary_format}
    h = md.get("hash")
    if isinstance(h, str):
        rec["triton_hash"] = h
    rec["target"] = target_of(md)
    main, rest = options_of(md)
    rec.update(main)
    if src is not None:
        sig = signature_of(src, arg_names)
        if sig is not None:
            rec["signature"] = sig
        consts = constexprs_of(src, arg_names)
        if consts is not None:
            rec["constexprs"] = consts
        spec = specialization_of(src, arg_names)
        if spec is not None:
            rec["specialization"] = spec
    elif isinstance(md.get("constants"), dict):  # Triton 2.x metadata
        rec["constexprs"] = {_path_name(k, arg_names): jsonable(v, 1) for k, v in md["constants"].items()}
    rec["options"] = rest
    version = md.get("triton_version") or getattr(sys.modules.get("triton"), "__version__", None)
    if version is not None:
        rec["triton_version"] = str(version)
    rec["build"] = build_info(rec.get("target"))
    rec["via"] = via
    if cache_hit is not None:
        rec["cache_hit"] = bool(cache_hit)
    return rec


# ---------------------------------------------------------------------------
# The arguments of the launch that compiled a variant

MAX_ARGS = 64


def _ints(seq):
    try:
        out = [int(x) for x in seq]
    except (TypeError, ValueError):
        return None
    return out if len(out) <= 16 else None


def compile_args(bound_args):
    """The tensors' extents and the scalars of the launch during which the
    variant was compiled (JITFunction.run's bound arguments): {"tensors":
    {name: {dtype, element_size, shape, strides, span_bytes}}, "scalars":
    {name: value}}. A reproducer uses the extents to tell buffers that share
    one allocation apart, when the captured launch's scalars are these (the
    same sizes). Compile time only; tensors are not kept."""
    tensors, scalars = {}, {}
    for i, (name, v) in enumerate(bound_args.items()):
        if i >= MAX_ARGS:
            break
        if isinstance(v, bool) or isinstance(v, (int, float)):
            if isinstance(v, float) and not math.isfinite(v):
                continue
            scalars[str(name)] = v
            continue
        if not callable(getattr(v, "data_ptr", None)):
            continue
        try:
            shape = _ints(v.shape)
            strides = _ints(v.stride()) if callable(getattr(v, "stride", None)) else None
            esize = v.element_size() if callable(getattr(v, "element_size", None)) else None
        except Exception:  # pylint: disable=broad-except
            continue
        if shape is None or strides is None or not isinstance(esize, int) or len(shape) != len(strides):
            continue
        if any(s < 0 for s in strides):
            continue
        span = 0 if 0 in shape else (sum((d - 1) * st for d, st in zip(shape, strides)) + 1) * esize
        tensors[str(name)] = {"dtype": str(getattr(v, "dtype", "")), "element_size": esize, "shape": shape,
                              "strides": strides, "span_bytes": span}
    return {"tensors": tensors, "scalars": scalars}


# ---------------------------------------------------------------------------
# The build environment: what changes the binary besides source and options


def build_info(target):
    """What the compiler used besides the source and the options, so that a
    reproducer can rebuild the same binary: the ptxas Triton ran (path and
    release: Inductor points TRITON_PTXAS_PATH at torch's own ptxas), the
    environment variables that enter Triton's compile cache key
    (get_cache_invalidating_env_vars: TRITON_DISABLE_LINE_INFO,
    TRITON_ENABLE_ASAN, DISABLE_LLVM_OPT, ...), PTXAS_OPTIONS, the debug
    knob (TRITON_DEBUG) and the libdevice file. Cheap: Triton caches the
    ptxas lookup (one `ptxas --version` per path and process)."""
    out = {}
    tr = sys.modules.get("triton")
    knobs = getattr(tr, "knobs", None)
    try:
        from triton._C.libtriton import get_cache_invalidating_env_vars  # pylint: disable=import-outside-toplevel
        out["env"] = {str(k): str(v) for k, v in dict(get_cache_invalidating_env_vars()).items()}
    except Exception:  # pylint: disable=broad-except
        pass
    # Variables read by the compiler that are not in that list everywhere.
    extra = {k: os.environ[k] for k in ("TRITON_DEBUG", "PTXAS_OPTIONS", "TRITON_PTXAS_PATH",
                                        "TRITON_PTXAS_BLACKWELL_PATH", "TRITON_LIBDEVICE_PATH",
                                        "TRITON_DEFAULT_FP_FUSION", "TRITON_F32_DEFAULT",
                                        "TRITON_OVERRIDE_ARCH", "TRITON_DISABLE_LINE_INFO")
             if k in os.environ}
    if extra:
        out.setdefault("env", {}).update(extra)
    if knobs is None:
        return out
    rt = getattr(knobs, "runtime", None)
    if rt is not None and hasattr(rt, "debug"):
        out["debug_knob"] = bool(rt.debug)
    backend = (target or {}).get("backend")
    arch = (target or {}).get("arch")
    nv = getattr(knobs, "nvidia", None)
    if backend == "cuda" and nv is not None:
        attr = "ptxas_blackwell" if isinstance(arch, int) and arch >= 100 else "ptxas"
        try:
            tool = getattr(nv, attr)
            out["ptxas"] = {"path": str(tool.path), "version": str(tool.version), "knob": attr}
        except Exception as e:  # pylint: disable=broad-except
            out["ptxas"] = {"error": "%s: %s" % (type(e).__name__, e)}
        try:
            lib = nv.libdevice_path
            if lib:
                out["libdevice"] = str(lib)
        except Exception:  # pylint: disable=broad-except
            pass
    return out


def config_matches(cfg_json, variant):
    """Whether ``variant`` (a record) was compiled from autotuner config
    ``cfg_json``: every config kwarg equals the variant's constexpr (or
    option) of that name, and the launch options agree."""
    if not cfg_json or not variant:
        return False
    consts = variant.get("constexprs") or {}
    opts = variant.get("options") or {}
    for k, v in (cfg_json.get("kwargs") or {}).items():
        if k in consts:
            if consts[k] != v:
                return False
        elif k in opts:
            if opts[k] != v:
                return False
        elif k in variant:
            if variant[k] != v:
                return False
        else:
            return False
    for k in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        if k in cfg_json and cfg_json[k] is not None and k in variant and variant[k] is not None:
            if variant[k] != cfg_json[k]:
                return False
    return True


def producer_info():
    out = {"shim": _shim_version(), "python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid()}
    # Where the application's modules are found: the reproducer generator
    # resolves the imports of kernel helpers against these folders to copy
    # their sources (bounded; strings only).
    out["sys_path"] = [p for p in sys.path if isinstance(p, str) and p][:64]
    tr = sys.modules.get("triton")
    if tr is not None:
        out["triton"] = str(getattr(tr, "__version__", "?"))
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = str(getattr(torch, "__version__", "?"))
    return out


def _shim_version():
    from . import __version__  # pylint: disable=import-outside-toplevel
    return __version__
