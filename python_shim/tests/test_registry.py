"""Documents: bounded size, strict JSON, variant tables. No Triton needed."""
import json
import math

from kerncap_shim import _record, _registry


class _Link:
    def __init__(self, rc=0):
        self.sent = []
        self.rc = rc

    def send(self, name, data):
        self.sent.append((name, data))
        return self.rc


def _variant(i, size=100):
    return {"name": "k", "binary": {"format": "cubin", "sha256": "%064x" % i, "size": size},
            "triton_hash": "h%d" % i, "num_warps": 4, "num_stages": 3, "constexprs": {"BLOCK": 16 * (i + 1)},
            "options": {}}


def test_json_is_strict_and_bounded():
    v = _record.jsonable({"inf": math.inf, "ninf": -math.inf, "nan": math.nan, "big": 1 << 70,
                          "bytes": b"\x00\x01", "s": "x" * 10000, (1, 2): [1] * 1000, "t": (1, 2)})
    text = json.dumps(v, allow_nan=False)  # raises on NaN/Infinity
    assert v["inf"] == {"float": "inf"} and v["ninf"] == {"float": "-inf"} and v["nan"] == {"float": "nan"}
    assert v["big"] == {"int": str(1 << 70)} and v["bytes"] == {"bytes": 2}
    assert len(v["s"]) < 5000 and v["s"].endswith("[truncated]")
    assert len(v["1,2"]) == _record.MAX_ITEMS + 1 and v["t"] == [1, 2]
    assert "\x00" not in text


def test_variants_bounded_and_current_kept():
    link = _Link()
    reg = _registry.Registry(link)
    for i in range(_registry.MAX_VARIANTS + 5):
        reg.add_variant("k", _variant(i))
    doc = json.loads(link.sent[-1][1])
    assert len(doc["variants"]) == _registry.MAX_VARIANTS
    assert doc["current"] == "%064x" % (_registry.MAX_VARIANTS + 4)
    assert doc["variants"][0]["id"] == "%064x" % 5


def test_document_never_exceeds_agent_limit():
    link = _Link()
    reg = _registry.Registry(link)
    huge = "x" * (120 * 1024)
    for i in range(_registry.MAX_VARIANTS):
        fn = ("f%d" % i, {"name": "k", "source": huge + str(i), "source_truncated": False})
        reg.add_variant("k", _variant(i), function=fn)
    data = link.sent[-1][1]
    assert len(data) <= _registry.MAX_DOC_BYTES < (1 << 20)
    doc = json.loads(data)
    assert doc["truncated"]
    assert doc["current"] == "%064x" % (_registry.MAX_VARIANTS - 1)
    assert any(v["id"] == doc["current"] for v in doc["variants"])


def test_same_binary_merges_and_unchanged_document_is_not_resent():
    link = _Link()
    reg = _registry.Registry(link)
    a = _variant(1)
    a.pop("binary")  # first report knew only Triton's hash
    reg.add_variant("k", a)
    b = _variant(1)
    b["via"] = "jit_post_compile_hook"
    reg.add_variant("k", b)
    doc = json.loads(link.sent[-1][1])
    assert len(doc["variants"]) == 1 and doc["variants"][0]["binary"]["sha256"] == "%064x" % 1
    n = len(link.sent)
    reg.add_variant("k", dict(_variant(1), via="jit_post_compile_hook"))
    assert len(link.sent) == n


def test_refusal_is_counted_not_raised():
    link = _Link(rc=2)
    reg = _registry.Registry(link)
    assert reg.add_variant("k", _variant(0)) == 2
    assert reg.stats["refused"] == 1 and "json larger than 1 MiB" in reg.errors[-1]


def test_config_matching():
    v = _variant(0)
    assert _record.config_matches({"kwargs": {"BLOCK": 16}, "num_warps": 4, "num_stages": 3}, v)
    assert not _record.config_matches({"kwargs": {"BLOCK": 32}, "num_warps": 4}, v)
    assert not _record.config_matches({"kwargs": {"BLOCK": 16}, "num_warps": 8}, v)
    assert not _record.config_matches({"kwargs": {"OTHER": 1}}, v)


def test_fork_child_does_not_inherit_held_locks():
    """A thread of the parent may hold the shim's locks at fork time; the
    child must still be able to record (os.register_at_fork re-creates them)."""
    import os
    import signal
    from kerncap_shim._state import SHIM
    held = [SHIM.registry._lock, SHIM.link._lock]  # pylint: disable=protected-access
    for lock in held:
        lock.acquire()
    try:
        pid = os.fork()
        if pid == 0:  # child: a deadlock here is ended by the alarm
            signal.alarm(10)
            try:
                SHIM.link.resolve()
                SHIM.registry.add_variant("kc_fork", _variant(7))
                os._exit(0 if "kc_fork" in SHIM.registry.names() else 2)
            except BaseException:  # pylint: disable=broad-except
                os._exit(3)
    finally:
        for lock in held:
            lock.release()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    SHIM.registry.clear()


def test_chosen_variant_is_pinned_against_eviction_and_truncation():
    link = _Link()
    reg = _registry.Registry(link)
    for i in range(3):
        reg.add_variant("k", _variant(i))
    cfg = {"kwargs": {"BLOCK": 16 * 2}, "num_warps": 4, "num_stages": 3}
    reg.set_autotune("k", {"kind": "triton.Autotuner", "configs": [cfg], "chosen": cfg, "chosen_index": 0})
    chosen = "%064x" % 1
    for i in range(3, 3 + 2 * _registry.MAX_VARIANTS):
        reg.add_variant("k", _variant(i))
    doc = json.loads(link.sent[-1][1])
    ids = [v["id"] for v in doc["variants"]]
    assert chosen in ids and doc["pinned"] == [chosen]
    assert len(ids) == _registry.MAX_VARIANTS + 1
    assert doc["evicted_variants"] == 3 + 2 * _registry.MAX_VARIANTS - len(ids)
    assert doc["autotune"]["chosen_variant"] == chosen
    # Dropped last when the document is too large.
    huge = "x" * (200 * 1024)
    for i in range(100, 106):
        reg.add_variant("k", _variant(i), function=("f%d" % i, {"name": "k", "source": huge + str(i)}))
    doc = json.loads(link.sent[-1][1])
    assert "older variants" in doc["truncated"]
    assert chosen in [v["id"] for v in doc["variants"]]
