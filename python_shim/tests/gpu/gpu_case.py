"""Helpers for the shim's GPU cases (run by run_gpu_shim_tests.py, each case
in its own process with the agent loaded through CUDA_INJECTION64_PATH and
the shim activated by KERNCAP_TRITON_SHIM=1 + PYTHONPATH).

A case warms its kernel up first (compiles, autotunes), then arms kerncapd
for exactly that kernel and this process, launches it again until the
capture appears, and checks the capture's manifest (`kerncapctl --json show`):
kernel.jit_metadata_json must describe the launched binary, i.e. hold a
variant whose code object SHA-256 is one of the manifest's code objects, and
carry the expected (chosen) configuration.

Exit codes: 0 pass, 1 fail, 77 skip (no torch/triton/GPU).
"""
import base64
import json
import os
import subprocess
import sys
import time

SKIP = 77


def skip(msg):
    print("SKIP: %s" % msg)
    sys.exit(SKIP)


def fail(msg):
    print("FAIL: %s" % msg)
    sys.stdout.flush()
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def require_gpu():
    try:
        import torch  # pylint: disable=import-outside-toplevel
        import triton  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except Exception as e:  # pylint: disable=broad-except
        skip("cannot import torch/triton (%s)" % e)
    if not torch.cuda.is_available():
        skip("torch %s sees no CUDA device" % torch.__version__)
    return torch


def shim_status():
    import kerncap_shim  # pylint: disable=import-outside-toplevel
    return kerncap_shim.status()


def require_shim():
    """The shim must have been activated by the environment (not by us)."""
    st = shim_status()
    check(st["enabled"] and st["triton_hooks"] in ("knobs", "legacy"),
          "the shim is not active (KERNCAP_TRITON_SHIM/PYTHONPATH): %s" % st)
    return st


def ctl(*args, timeout=60):
    exe = os.environ.get("KERNCAP_CTL")
    sock = os.environ.get("KERNCAP_CTL_SOCKET")
    if not exe or not sock:
        fail("KERNCAP_CTL and KERNCAP_CTL_SOCKET must be set by the runner")
    r = subprocess.run([exe, "--socket=" + sock] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout, check=False)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def arm(kernel, match="substring"):
    rc, out, err = ctl("--json", "arm", "--kernel=" + kernel, "--match=" + match, "--count=1",
                       "--pid=%d" % os.getpid(), "--ttl=5m")
    check(rc == 0, "kerncapctl arm failed (%d): %s %s" % (rc, out, err))
    print("armed %s (%s): %s" % (kernel, match, out.strip()[:200]))


def captures():
    rc, out, err = ctl("--json", "captures")
    if rc != 0:
        return []
    try:
        return json.loads(out).get("captures", [])
    except ValueError:
        return []


def launch_until_captured(launch, timeout_s=90):
    """Launches until kerncapd lists a capture (the arm reaches the agent
    asynchronously). Returns the capture id."""
    import torch  # pylint: disable=import-outside-toplevel
    deadline = time.time() + timeout_s
    n = 0
    while time.time() < deadline:
        launch()
        torch.cuda.synchronize()
        n += 1
        caps = captures()
        if caps:
            cid = caps[0].get("capture_id")
            print("captured %s after %d launch(es) since arming" % (cid, n))
            return cid
        time.sleep(0.2)
    fail("no capture within %ds (%d launches)" % (timeout_s, n))
    return None


def manifest(capture_id):
    rc, out, err = ctl("--json", "show", capture_id)
    check(rc == 0, "kerncapctl show failed: %s %s" % (out, err))
    detail = json.loads(out)
    return detail.get("manifest", detail)


def jit_document(m):
    k = m.get("kernel") or {}
    text = k.get("jit_metadata_json") or ""
    check(text, "the capture carries no jit_metadata_json (kernel %r)" % k.get("mangled_name"))
    return json.loads(text)


def code_digests(m):
    out = []
    for c in m.get("code_objects") or []:
        d = c.get("digest")
        if d:
            out.append(base64.b64decode(d).hex())
    return out


def captured_variant(doc, m):
    """The variant whose binary is one of the capture's code objects."""
    digests = set(code_digests(m))
    for v in doc.get("variants", []):
        if (v.get("binary") or {}).get("sha256") in digests:
            return v
    return None


def config_of(cfg):
    """A triton.Config (or the shim's JSON for one) as comparable fields."""
    if isinstance(cfg, dict):
        return {"kwargs": cfg.get("kwargs"), "num_warps": cfg.get("num_warps"),
                "num_stages": cfg.get("num_stages")}
    return {"kwargs": dict(cfg.kwargs), "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def dump(name, obj):
    """Keeps a JSON artefact in the case's log folder (set by the runner)."""
    d = os.environ.get("KERNCAP_CASE_LOG_DIR")
    if d:
        with open(os.path.join(d, name + ".json"), "w") as f:
            json.dump(obj, f, indent=1)


def describe(doc, m):
    """What was captured vs what the shim recorded, for failure reports."""
    launch = m.get("launch") or {}
    print("  capture: grid %s block %s; code objects %s" % (
        launch.get("grid"), launch.get("block"),
        [(c.get("name"), base64.b64decode(c.get("digest") or "").hex()[:16]) for c in m.get("code_objects") or []]))
    for v in doc.get("variants", []):
        print("  variant %s%s constexprs=%s num_warps=%s num_stages=%s config_index=%s" % (
            v["id"][:16], " (current)" if v["id"] == doc.get("current") else "", v.get("constexprs"),
            v.get("num_warps"), v.get("num_stages"), v.get("config_index")))
    print("  autotune chosen: %s" % (doc.get("autotune") or {}).get("chosen"))


def check_capture(cid, kernel_name, chosen=None, source_file=None):
    """Common checks; returns (manifest, document, variant that ran).

    The shim's part: the document names the variant expected to run
    (``current``), whose launch geometry matches the captured launch and
    whose config is the autotuner's choice. The agent's part: the capture's
    code object is that variant's binary (same SHA-256). A mismatch there is
    reported as the agent's; KERNCAP_SHIM_GPU_WAIVE_CODE_OBJECT=1 turns it
    into a warning."""
    m = manifest(cid)
    dump("manifest", m)
    k = m.get("kernel") or {}
    check(k.get("mangled_name") == kernel_name, "captured %r, expected %r" % (k.get("mangled_name"), kernel_name))
    doc = jit_document(m)
    dump("jit_metadata", doc)
    describe(doc, m)
    print("jit_metadata_json: %d bytes, %d variant(s), current %s" % (
        len(k["jit_metadata_json"]), len(doc.get("variants", [])), str(doc.get("current"))[:16]))
    check(doc.get("schema") == "kerncap.triton-jit/1", "schema %r" % doc.get("schema"))
    check(doc.get("kernel_name") == kernel_name, "document is for %r" % doc.get("kernel_name"))
    cur = next((x for x in doc.get("variants", []) if x.get("id") == doc.get("current")), None)
    check(cur is not None, "the document's current variant %r is not among its variants" % doc.get("current"))
    # Launch geometry: Triton launches num_warps * warp_size threads per block.
    block = (m.get("launch") or {}).get("block") or []
    warp = (cur.get("target") or {}).get("warp_size") or 32
    check(block and block[0] == cur.get("num_warps", 0) * warp,
          "captured block %s but the current variant has num_warps=%s" % (block, cur.get("num_warps")))
    fn = (doc.get("functions") or {}).get(cur.get("function"))
    check(fn is not None and "def " in (fn.get("source") or ""), "no source recorded for the variant")
    if source_file is not None:
        check(os.path.realpath(fn.get("file", "")) == os.path.realpath(source_file),
              "source file %r, expected %r" % (fn.get("file"), source_file))
    if chosen is not None:
        want = config_of(chosen)
        at = doc.get("autotune") or {}
        check(at.get("chosen") is not None, "no autotuner choice recorded: %s" % at)
        check(config_of(at["chosen"]) == want, "recorded choice %s, the autotuner chose %s"
              % (config_of(at["chosen"]), want))
        check(cur.get("config") is not None and config_of(cur["config"]) == want,
              "current variant's config %s, chosen %s" % (cur.get("config"), want))
        for k2, val in (want["kwargs"] or {}).items():
            check((cur.get("constexprs") or {}).get(k2) == val, "constexpr %s=%r, chosen %r"
                  % (k2, (cur.get("constexprs") or {}).get(k2), val))
        check(cur.get("num_warps") == want["num_warps"],
              "num_warps %r vs %r" % (cur.get("num_warps"), want["num_warps"]))
    # The agent's part.
    v = captured_variant(doc, m)
    check(v is not None, "no variant's binary sha256 is among the capture's code objects %s; variants %s"
          % (code_digests(m), [(x.get("binary") or {}).get("sha256") for x in doc.get("variants", [])]))
    print("capture's code object is variant %s (constexprs=%s num_warps=%s via=%s)" % (
        v["id"][:16], v.get("constexprs"), v.get("num_warps"), v.get("via")))
    if v["id"] != cur["id"]:
        msg = ("AGENT: the capture's code object is variant %s (config %s) while the launch geometry (grid %s, "
               "block %s) is that of the variant that ran, %s (config %s): the agent shipped another module's "
               "cubin for a kernel name that several modules define" % (
                   v["id"][:16], config_of(v.get("config") or {}), (m.get("launch") or {}).get("grid"), block,
                   cur["id"][:16], config_of(cur.get("config") or {})))
        if os.environ.get("KERNCAP_SHIM_GPU_WAIVE_CODE_OBJECT", "") not in ("", "0"):
            print("[ WAIVED ] " + msg)
        else:
            fail(msg)
    return m, doc, cur


def try_validate(cid):
    """Replays the capture (kerncapctl validate); informational only: the
    shim's own checks do not depend on replay."""
    rc, out, err = ctl("validate", cid[:12], "--json", timeout=240)
    print("[ info ] kerncapctl validate %s: exit %d %s" % (cid[:12], rc, (out or err).strip()[:300]))
    return rc
