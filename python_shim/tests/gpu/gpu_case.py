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
import re
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


def digest_hex(d):
    """A digest from kerncapctl's JSON as lowercase hex: the JSON policy
    (docs/JSON.md) writes digests as hex; older daemons wrote base64."""
    if not d:
        return ""
    if re.fullmatch(r"[0-9a-f]{64}", d):
        return d
    return base64.b64decode(d).hex()


def code_digests(m):
    return [digest_hex(c.get("digest")) for c in m.get("code_objects") or [] if c.get("digest")]


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
        [(c.get("name"), digest_hex(c.get("digest"))[:16]) for c in m.get("code_objects") or []]))
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


# ---------------------------------------------------------------------------
# Triton reproducer projects (`kerncapctl repro` of the capture, then the
# project's run.py in a process of its own). KERNCAP_SHIM_REPRO=0 leaves
# them out.


def repro_enabled():
    return os.environ.get("KERNCAP_SHIM_REPRO", "1") not in ("", "0")


def repro_env():
    """run.py's environment: the case's, minus the agent and the shim (the
    reproducer is a plain process), plus where libkerncap_replay.so is."""
    env = dict(os.environ)
    # Nor the application's compiler settings: run.py must take them from
    # kerncap.json (the shim recorded them), as on another machine.
    for k in ("CUDA_INJECTION64_PATH", "KERNCAP_TRITON_SHIM", "KERNCAP_SHIM_DEBUG", "KERNCAP_AGENT_SOCKET",
              "TRITON_DEBUG", "TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH", "TRITON_DISABLE_LINE_INFO"):
        env.pop(k, None)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
             if p and not p.rstrip("/").endswith(os.path.join("kerncap_shim", "_site"))]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


class Repro:
    """A generated project and its run.py."""

    def __init__(self, cid, name):
        import tempfile  # pylint: disable=import-outside-toplevel
        self.name = name
        self.dir = os.path.join(tempfile.mkdtemp(prefix="kc_repro_%s_" % name), "project")
        t0 = time.time()
        rc, out, err = ctl("--json", "repro", cid, "--out", self.dir, timeout=300)
        check(rc == 0, "kerncapctl repro %s failed (%d): %s %s" % (cid, rc, out[-2000:], err[-2000:]))
        self.project = json.loads(out)["project"]
        dump("repro_kerncap", self.project)
        check(self.project.get("kind") == "triton", "kerncapctl repro made a %r project, not a Triton one: %s"
              % (self.project.get("kind"), self.project.get("warnings")))
        t = self.project["triton"]
        print("[ repro ] %s in %.1f s: variant by %s, kernel.py from %s, %d parameter(s), warnings %s" % (
            self.dir, time.time() - t0, t["variant"]["selected_by"], t["kernel_source"]["origin"],
            len(t["parameters"]), self.project.get("warnings")))
        check(t["variant"]["selected_by"] == "code_object_digest",
              "the project's variant was selected by %s, not by the captured binary's digest"
              % t["variant"]["selected_by"])
        self.kernel_py = os.path.join(self.dir, "kernel.py")
        with open(self.kernel_py) as f:
            self.kernel_source = f.read()
        self.runs = 0

    def run(self, *args, expect_rc=0, timeout=300):
        """python3 run.py --json ARGS; returns its JSON document."""
        self.runs += 1
        py = os.environ.get("KERNCAP_PYTHON", sys.executable)
        cmd = [py, "run.py", "--json"] + list(args)
        t0 = time.time()
        r = subprocess.run(cmd, cwd=self.dir, env=repro_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, check=False)
        out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        d = os.environ.get("KERNCAP_CASE_LOG_DIR")
        if d:
            with open(os.path.join(d, "repro_run_%d.txt" % self.runs), "w") as f:
                f.write("$ %s\nexit %d\n--- stdout\n%s\n--- stderr\n%s\n" % (" ".join(cmd), r.returncode, out, err))
        try:
            doc = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        except ValueError:
            doc = {}
        b = doc.get("binary") or {}
        v = doc.get("validation") or {}
        print("[ repro ] run.py %s: exit %d in %.1f s; binary %s; validation %s %s%s" % (
            " ".join(args) or "(captured config)", r.returncode, time.time() - t0,
            "identical" if b.get("identical") else ("same code" if b.get("same") else "DIFFERENT"),
            "pass" if v.get("pass") else "FAIL", v.get("failing") or "",
            "; notes %s" % doc.get("notes") if doc.get("notes") else ""))
        accepted = expect_rc if isinstance(expect_rc, tuple) else (expect_rc,)
        check(r.returncode in accepted, "run.py %s exited %d, expected %s:\n%s\n%s" % (
            " ".join(args), r.returncode, " or ".join(map(str, accepted)), out[-3000:], err[-3000:]))
        return doc

    def edit(self, old, new):
        check(old in self.kernel_source, "kernel.py has no %r to edit:\n%s" % (old, self.kernel_source))
        with open(self.kernel_py, "w") as f:
            f.write(self.kernel_source.replace(old, new, 1))

    def restore(self):
        with open(self.kernel_py, "w") as f:
            f.write(self.kernel_source)

    def cleanup(self):
        import shutil  # pylint: disable=import-outside-toplevel
        shutil.rmtree(os.path.dirname(self.dir), ignore_errors=True)


def first_store_edit(source, fn_name):
    """An edit of the kernel's first tl.store(PTR, VALUE, ...) that changes
    what it stores (VALUE + 1): (old, new, the pointer parameter written)."""
    import re  # pylint: disable=import-outside-toplevel
    body = source[source.index("def %s(" % fn_name):]
    m = re.search(r"tl\.store\(\s*([A-Za-z_][A-Za-z0-9_]*)([^,]*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*([,)])", body)
    check(m is not None, "no tl.store(ptr..., value...) in %s to edit" % fn_name)
    old = m.group(0)
    new = "tl.store(%s%s, %s + 1%s" % (m.group(1), m.group(2), m.group(3), m.group(4))
    return old, new, m.group(1)


def other_num_warps(n):
    return 8 if n != 8 else 4


def validate_exact_or_within(repro, args, tolerance, why):
    """run.py ARGS must pass: bitwise, or (another configuration may sum in
    another order) within `tolerance`, per buffer dtype."""
    doc = repro.run(*args, expect_rc=(0, 8))  # pass or outputs differ
    if (doc.get("validation") or {}).get("pass"):
        return doc
    print("[ info ] %s: not bitwise equal (%s); again with %s" % (
        why, (doc.get("validation") or {}).get("failing"), " ".join(tolerance)))
    return repro.run(*(list(args) + list(tolerance)))


def check_bench(repro, iterations):
    """run.py --bench N: both binaries timed by the replay library (kernel.py's
    cubin as a variant of the captured kernel); for the unchanged kernel.py
    (the captured binary rebuilt) the speedup must be about 1.0."""
    doc = repro.run("--bench", str(iterations))
    b = doc.get("bench") or {}
    var, orig = b.get("variant") or {}, b.get("original") or {}
    check(var.get("median_ms", 0) > 0 and orig.get("median_ms", 0) > 0, "bench %s" % b)
    check(b.get("speedup") is not None, "bench without a speedup: %s" % b)
    check(b.get("pass") is not False, "the timed binaries do not validate: validated %s, revalidated %s" % (
        b.get("validated"), b.get("revalidated")))
    print("[ repro ] bench: kernel.py median %.4f ms, captured binary %.4f ms, speedup %.3fx (spread %s)" % (
        var["median_ms"], orig["median_ms"], b["speedup"], b.get("spread")))
    check(0.85 <= b["speedup"] <= 1.15, "the same binary timed %.3fx of itself: both binaries are not measured the "
          "same way" % b["speedup"])
    return b


def check_reproducer(cid, kernel_name, edit=None, config_runs=(), tolerance=("--rtol", "1e-3", "--atol", "1e-3"),
                     bench=0, failing_exactly=None, keep=False, repro=None):
    """The reproducer checks every case makes after its own:

    1. kerncapctl repro CAPTURE: a Triton project whose variant is the
       captured binary's;
    2. run.py (captured configuration): passes, and Triton built the same
       binary (same code; the line table names kernel.py);
    3. kernel.py edited to store something else: validation fails, naming
       the buffer, and the binary differs;
    4. --config with another num_warps: passes (bitwise, or within
       `tolerance` where another warp count sums in another order), and the
       binary differs (the config took effect);
    5. each of `config_runs` ((args, why)): passes likewise;
    6. --bench N when `bench`: about 1.0x (check_bench).
    `failing_exactly`: the edit must fail exactly these buffers (buffers
    sharing an allocation with them must not be blamed). `keep`: return the
    Repro (the caller cleans up) instead of the project. `repro`: a project
    generated already (gc.Repro), e.g. before the application's files were
    moved away."""
    if not repro_enabled():
        print("[ info ] reproducer checks left out (KERNCAP_SHIM_REPRO=0)")
        return None
    repro = repro or Repro(cid, kernel_name)
    try:
        t = repro.project["triton"]
        fn = t["function"]["name"]
        doc = repro.run()
        check(doc.get("result") == "pass", "run.py did not pass: %s" % doc.get("validation"))
        check((doc.get("binary") or {}).get("same"), "run.py built another binary than the captured one: %s; "
              "notes %s" % (doc.get("binary"), doc.get("notes")))
        # 3. An edit that changes the results.
        old, new, buffer = edit if edit is not None else first_store_edit(repro.kernel_source, fn)
        repro.edit(old, new)
        doc = repro.run(expect_rc=8)  # outputs differ (docs/EXIT_CODES.md)
        failing = (doc.get("validation") or {}).get("failing") or []
        check(any(buffer in f.split("/") for f in failing),
              "the edited kernel failed validation but %r is not among the failing buffers %s" % (buffer, failing))
        if failing_exactly is not None:
            check(sorted(failing) == sorted(failing_exactly), "the edited kernel failed %s, expected exactly %s "
                  "(buffers: %s)" % (failing, failing_exactly, (doc.get("validation") or {}).get("buffers")))
        check(not (doc.get("binary") or {}).get("same"), "the edited kernel.py built the captured binary")
        repro.restore()
        # 4. Another num_warps.
        warps = other_num_warps(t["launch_options"].get("num_warps", 4))
        doc = validate_exact_or_within(repro, ["--config", json.dumps({"num_warps": warps})], tolerance,
                                       "num_warps=%d" % warps)
        check(not (doc.get("binary") or {}).get("same"),
              "--config num_warps=%d built the captured binary: the option was not applied" % warps)
        check((doc.get("plan") or {}).get("options", {}).get("num_warps") == warps, "plan %s" % doc.get("plan"))
        # 5. Case-specific configurations.
        for args, why in config_runs:
            validate_exact_or_within(repro, list(args), tolerance, why)
        # 6. Timing against the captured binary.
        if bench:
            check_bench(repro, bench)
        print("[ repro ] %s: %d run.py invocation(s) as expected" % (kernel_name, repro.runs))
        if keep:
            return repro
        return repro.project
    finally:
        if not keep:
            repro.cleanup()


def try_validate(cid):
    """Replays the capture (kerncapctl validate); informational only: the
    shim's own checks do not depend on replay."""
    rc, out, err = ctl("validate", cid[:12], "--json", timeout=240)
    print("[ info ] kerncapctl validate %s: exit %d %s" % (cid[:12], rc, (out or err).strip()[:300]))
    return rc
