"""Per-kernel-name tables of compiled variants, and the JSON handed to the agent.

The agent keeps one JSON document per kernel name and attaches the latest one
to a capture (agent/core/jit_metadata_registry.h). One Triton kernel name
usually stands for several binaries: an autotuned kernel compiles one per
config, and a JIT function is respecialised per argument types and
alignments, all under the same entry-point name. A single "last compiled"
record would often describe the wrong binary (autotuning compiles every
candidate, then launches the winner). So each document lists the recent
variants of that name, each with the SHA-256 of its code object, and says
which one is expected to run next (``current``: the last compiled, or the
autotuner's choice once it is made). A reader of a capture matches the
capture's code object digest (manifest code_objects[].digest, SHA-256 of the
whole image) against ``variants[].binary.sha256`` — exact, whatever the
timing — and falls back to ``current``.

Document layout (schema "kerncap.triton-jit/1"), compact JSON:

  schema, kernel_name, producer {shim, python, triton, torch, pid}
  current            variant id expected to run next
  variants[]         oldest first: id, name, binary {format, sha256, size},
                     triton_hash, target {backend, arch, warp_size, name},
                     num_warps, num_stages, num_ctas, maxnreg, shared,
                     signature {arg: type}, constexprs {arg: value},
                     specialization {arg: [[attr, value]]}, options {...},
                     function (key into functions), config (the autotuner
                     config it was compiled from, when known), via, cache_hit
  functions{key}     name, qualname, module, file, first_line, source,
                     source_sha256, source_bytes, source_truncated, params[]
  autotune           kind, function, key_args, configs[], chosen,
                     chosen_index, chosen_variant, tuning_cache[], timings
  inductor           kernel_name, source file Inductor wrote, heuristics
  truncated[]        what was dropped to stay under the size limit

Bounded everywhere: variants per name, names per process, source bytes,
document bytes (the agent refuses more than 1 MiB).
"""
import collections
import json
import os
import threading

from . import _record

SCHEMA = "kerncap.triton-jit/1"
MAX_VARIANTS = 16
MAX_NAMES = 1024
# The agent's limit is 1 MiB; stay clearly below it.
MAX_DOC_BYTES = (1 << 20) - 4096
MAX_TUNING_CACHE = 16
MAX_CONFIGS = 512
# Variants an autotuner chose (one per tuning key) are pinned: never evicted,
# never dropped to fit the document. Bounded like the tuning history.
MAX_PINNED = 16


class _Table:
    __slots__ = ("name", "variants", "functions", "autotune", "inductor", "current",
                 "last_sent", "by_hash", "delivered", "pinned", "evicted")

    def __init__(self, name):
        self.name = name
        self.variants = collections.OrderedDict()  # id -> record
        self.functions = {}
        self.autotune = None
        self.inductor = None
        self.current = None
        self.last_sent = None
        self.by_hash = {}  # triton hash -> variant id
        self.delivered = False
        # Variant ids an autotuner chose, oldest first (never evicted).
        self.pinned = collections.OrderedDict()
        self.evicted = 0  # variants dropped from the table so far

    def pin(self, vid):
        self.pinned.pop(vid, None)
        self.pinned[vid] = True
        while len(self.pinned) > MAX_PINNED:
            self.pinned.popitem(last=False)

    def evict_one(self):
        """Drops the oldest variant that is neither current nor pinned.
        False when every variant is protected."""
        for vid in self.variants:
            if vid != self.current and vid not in self.pinned:
                rec = self.variants.pop(vid)
                self.by_hash.pop(rec.get("triton_hash"), None)
                self.evicted += 1
                return True
        return False


def _variant_id(rec):
    b = rec.get("binary") or {}
    if b.get("sha256"):
        return b["sha256"]
    if rec.get("triton_hash"):
        return "triton:" + rec["triton_hash"]
    return None


class Registry:
    """Thread-safe. The lock is held while tables change and while the agent
    is called (a short C call), never while Triton or user code runs."""

    def __init__(self, link):
        self._link = link
        self._lock = threading.Lock()
        self._tables = collections.OrderedDict()
        self._anon = 0
        self.stats = collections.Counter()
        self.errors = collections.deque(maxlen=16)
        self.last_result = {}

    def reset_after_fork(self):
        # A thread of the parent may have held the lock at fork time.
        self._lock = threading.Lock()

    def clear(self):
        with self._lock:
            self._tables.clear()
            self.stats.clear()
            self.errors.clear()
            self.last_result.clear()

    def note_error(self, where, exc):
        self.stats["errors"] += 1
        self.errors.append("%s: %s: %s" % (where, type(exc).__name__, exc))

    # -- queries -------------------------------------------------------------

    def names(self):
        with self._lock:
            return list(self._tables)

    def knows(self, name, triton_hash):
        with self._lock:
            t = self._tables.get(name)
            return t is not None and triton_hash in t.by_hash

    def variant_by_hash(self, name, triton_hash):
        with self._lock:
            t = self._tables.get(name)
            if t is None:
                return None
            vid = t.by_hash.get(triton_hash)
            return dict(t.variants[vid]) if vid in t.variants else None

    def document(self, name):
        """The document as it would be sent now (a dict), or None."""
        with self._lock:
            t = self._tables.get(name)
            if t is None:
                return None
            return json.loads(self._encode(t)[0])

    # -- updates -------------------------------------------------------------

    def _table(self, name):
        t = self._tables.get(name)
        if t is None:
            t = _Table(name)
            self._tables[name] = t
            while len(self._tables) > MAX_NAMES:
                self._tables.popitem(last=False)
        else:
            self._tables.move_to_end(name)
        return t

    def add_variant(self, name, variant, function=None, autotune=None, inductor=None,
                    make_current=True):
        """Records one compiled variant (merging with what is known of the
        same binary) and hands the updated document to the agent."""
        with self._lock:
            t = self._table(name)
            if function is not None:
                fkey, finfo = function
                t.functions[fkey] = finfo
                variant["function"] = fkey
            vid = _variant_id(variant)
            if vid is None:
                self._anon += 1
                vid = "anon:%d" % self._anon
            # The same binary can be reported twice (listener and post-compile
            # hook): keep what each report knew.
            old = t.variants.pop(vid, None)
            if old is None and variant.get("triton_hash") in t.by_hash:
                old_id = t.by_hash[variant["triton_hash"]]
                old = t.variants.pop(old_id, None)
            if old is not None:
                merged = dict(old)
                for k, v in variant.items():
                    if v is not None and (k not in merged or merged[k] in (None, {}, [])
                                          or k in ("binary",) and "sha256" not in (merged.get(k) or {})):
                        merged[k] = v
                variant = merged
            variant["id"] = vid
            t.variants[vid] = variant
            if variant.get("triton_hash"):
                t.by_hash[variant["triton_hash"]] = vid
            if make_current:
                t.current = vid
            # The oldest unprotected variants go: an autotuner with more
            # candidates than MAX_VARIANTS compiles them all before it
            # chooses, and the one it chose must survive (pinned).
            while len(t.variants) > MAX_VARIANTS + len(t.pinned) and t.evict_one():
                pass
            if autotune is not None:
                self._set_autotune_locked(t, autotune, move_current=False)
            if inductor is not None:
                t.inductor = inductor
            self._attach_configs_locked(t)
            self.stats["variants"] += 1
            return self._send_locked(t)

    def set_autotune(self, name, autotune, move_current=True):
        """Records the autotuner's state; when it names a chosen config,
        the newest variant compiled from that config becomes current."""
        with self._lock:
            t = self._table(name)
            self._set_autotune_locked(t, autotune, move_current)
            self._attach_configs_locked(t)
            return self._send_locked(t)

    def set_inductor(self, name, inductor):
        with self._lock:
            t = self._table(name)
            t.inductor = inductor
            return self._send_locked(t)

    def _set_autotune_locked(self, t, autotune, move_current):
        prev = t.autotune or {}
        if autotune.get("chosen") is None and prev.get("chosen") is not None and \
                prev.get("function") == autotune.get("function"):
            # A snapshot taken mid-benchmark does not know the choice yet;
            # keep the one made earlier for the same function.
            for k in ("chosen", "chosen_index"):
                if k in prev:
                    autotune[k] = prev[k]
        configs = autotune.get("configs")
        if isinstance(configs, list) and len(configs) > MAX_CONFIGS:
            autotune["configs"] = configs[:MAX_CONFIGS]
            autotune["configs_truncated"] = len(configs)
        t.autotune = autotune
        chosen = autotune.get("chosen")
        if chosen is not None:
            vid = self._match_locked(t, chosen, autotune.get("function"))
            autotune["chosen_variant"] = vid
            if vid is not None:
                t.pin(vid)
            if move_current and vid is not None:
                t.current = vid

    def has_config(self, name, cfg_json, function=None):
        """Whether a variant compiled from autotuner config ``cfg_json`` is
        in the table (with its binary digest)."""
        with self._lock:
            t = self._tables.get(name)
            if t is None:
                return False
            vid = self._match_locked(t, cfg_json, function)
            return vid is not None and "sha256" in (t.variants[vid].get("binary") or {})

    @staticmethod
    def _match_locked(t, cfg, function):
        for vid in reversed(t.variants):
            rec = t.variants[vid]
            if function is not None and rec.get("function") not in (None, function):
                continue
            if _record.config_matches(cfg, rec):
                return vid
        return None

    @staticmethod
    def _attach_configs_locked(t):
        # Which candidate each variant was compiled from.
        at = t.autotune
        if not at or not isinstance(at.get("configs"), list):
            return
        for rec in t.variants.values():
            if "config_index" in rec:
                continue
            if at.get("function") is not None and rec.get("function") not in (None, at.get("function")):
                continue
            for i, cfg in enumerate(at["configs"]):
                if ("config" in rec and rec["config"] == cfg) or \
                        ("config" not in rec and _record.config_matches(cfg, rec)):
                    rec["config"] = cfg
                    rec["config_index"] = i
                    break

    # -- delivery ------------------------------------------------------------

    def _encode(self, t):
        doc = collections.OrderedDict()
        doc["schema"] = SCHEMA
        doc["kernel_name"] = t.name
        doc["producer"] = _record.producer_info()
        doc["current"] = t.current
        doc["variants"] = list(t.variants.values())
        # Ids of the variants autotuners chose (kept whatever the bounds),
        # and how many older variants the table dropped: a reader that finds
        # no variant for a captured binary can tell why.
        doc["pinned"] = list(t.pinned)
        doc["evicted_variants"] = t.evicted
        doc["functions"] = t.functions
        if t.autotune is not None:
            doc["autotune"] = t.autotune
        if t.inductor is not None:
            doc["inductor"] = t.inductor
        truncated = []

        def enc():
            if truncated:
                doc["truncated"] = truncated
            return json.dumps(doc, separators=(",", ":"), allow_nan=False, ensure_ascii=True,
                              default=lambda o: {"repr": repr(o)[:256]}).encode("ascii")

        data = enc()
        if len(data) <= MAX_DOC_BYTES:
            return data, truncated
        # 1. Older variants, keeping the current and the chosen ones.
        variants = list(t.variants.values())
        while len(data) > MAX_DOC_BYTES and len(variants) > 1:
            for i, rec in enumerate(variants):
                if rec.get("id") != t.current and rec.get("id") not in t.pinned:
                    del variants[i]
                    break
            else:
                break
            doc["variants"] = variants
            if "older variants" not in truncated:
                truncated.append("older variants")
            data = enc()
        # 2. Sources, first cut to 16 KiB each, then dropped.
        for cap in (16 * 1024, 0):
            if len(data) <= MAX_DOC_BYTES:
                break
            funcs = {}
            for k, f in doc["functions"].items():
                f = dict(f)
                if "source" in f and len(f["source"]) > cap:
                    f["source"] = f["source"][:cap]
                    f["source_truncated"] = True
                funcs[k] = f
            doc["functions"] = funcs
            truncated.append("source to %d bytes" % cap)
            data = enc()
        # 3. The autotuner's candidate list and history.
        if len(data) > MAX_DOC_BYTES and "autotune" in doc:
            at = dict(doc["autotune"])
            for k in ("configs", "tuning_cache", "timings"):
                at.pop(k, None)
            doc["autotune"] = at
            truncated.append("autotune configs")
            data = enc()
        if len(data) > MAX_DOC_BYTES:
            cur = t.variants.get(t.current) or (variants[-1] if variants else {})
            small = {k: cur.get(k) for k in ("id", "name", "binary", "num_warps", "num_stages", "target")}
            doc = collections.OrderedDict(
                [("schema", SCHEMA), ("kernel_name", t.name), ("current", t.current),
                 ("variants", [small]), ("truncated", ["everything but the current variant"])])
            data = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode("ascii")
        return data, truncated

    def _send_locked(self, t):
        """Returns the agent's code, or None when there is no agent."""
        try:
            data, truncated = self._encode(t)
        except Exception as e:  # pylint: disable=broad-except
            self.note_error("encode %s" % t.name, e)
            return None
        if truncated:
            self.stats["truncated"] += 1
        if data == t.last_sent:
            return 0
        try:
            rc = self._link.send(t.name, data)
        except Exception as e:  # pylint: disable=broad-except
            self.note_error("send %s" % t.name, e)
            return None
        if rc is None:
            self.stats["no_agent"] += 1
            return None
        self.last_result[t.name] = rc
        if rc == 0:
            t.last_sent = data
            t.delivered = True
            self.stats["sent"] += 1
            self.stats["sent_bytes"] += len(data)
            # Names recorded before the agent appeared (rare: compiles ahead
            # of cuInit) go now.
            if self.stats["no_agent"]:
                self._flush_undelivered_locked()
        else:
            self.stats["refused"] += 1
            self.errors.append("agent refused %s (%d bytes): %d %s" % (
                t.name, len(data), rc, _agent_text(rc)))
        return rc

    def _flush_undelivered_locked(self):
        self.stats["no_agent"] = 0
        for other in list(self._tables.values()):
            if not other.delivered:
                try:
                    data, _ = self._encode(other)
                    if self._link.send(other.name, data) == 0:
                        other.last_sent = data
                        other.delivered = True
                        self.stats["sent"] += 1
                except Exception as e:  # pylint: disable=broad-except
                    self.note_error("flush %s" % other.name, e)

    def resend_all(self):
        with self._lock:
            for t in self._tables.values():
                t.last_sent = None
                self._send_locked(t)


def _agent_text(rc):
    from ._agent import RESULT_TEXT  # pylint: disable=import-outside-toplevel
    return RESULT_TEXT.get(rc, "unknown")


def debug_enabled():
    return os.environ.get("KERNCAP_SHIM_DEBUG", "") not in ("", "0")
