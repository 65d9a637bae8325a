"""Hand-off to the agent through its C API: a fake agent library built with
cc at test time, and the real libkerncap_agent.so when it is built.

Library lookups must find an already-loaded agent, never load one; each
case that loads a library runs in a child interpreter so that the test
process itself stays clean."""
import json
import os
import textwrap

import pytest

from conftest import HERE, cdll_noload, child_env, compile_fake_agent, run_child

REPO = os.path.dirname(os.path.dirname(HERE))


def _maps_contains(path):
    with open("/proc/self/maps") as f:
        maps = f.read()
    return path in maps or os.path.realpath(path) in maps


def test_lookup_never_loads_a_library(fake_agent_dir, monkeypatch):
    from kerncap_shim import _agent
    lib = compile_fake_agent(fake_agent_dir, "libkerncap_agent_notloaded.so")
    monkeypatch.setenv("CUDA_INJECTION64_PATH", lib)
    monkeypatch.setenv("KERNCAP_SHIM_AGENT", lib)
    link = _agent.AgentLink()
    assert link.resolve() is None
    assert link.hinted()
    assert not _maps_contains(lib), "the lookup mapped the library"
    assert cdll_noload(lib) is None


@pytest.mark.parametrize("route", ["CUDA_INJECTION64_PATH", "LD_PRELOAD", "HSA_TOOLS_LIB", "maps", "global"])
def test_finds_loaded_agent(fake_agent_dir, route):
    name = "libkerncap_agent_fake.so" if route == "maps" else "libfake_agent.so"
    lib = compile_fake_agent(fake_agent_dir, name)
    env = child_env(CUDA_INJECTION64_PATH=None, HSA_TOOLS_LIB=None, LD_PRELOAD=None, KERNCAP_SHIM_AGENT=None)
    # How the library gets into the process, as the real agent would.
    if route == "LD_PRELOAD":
        env["LD_PRELOAD"] = lib
        load = ""
    elif route == "global":
        load = "ctypes.CDLL(%r, mode=ctypes.RTLD_GLOBAL)" % lib
    else:
        # RTLD_LOCAL, like the CUDA driver's dlopen of an injection library:
        # the symbol is not in the global table, only a path lookup finds it.
        load = "ctypes.CDLL(%r)" % lib
        if route in ("CUDA_INJECTION64_PATH", "HSA_TOOLS_LIB"):
            env[route] = lib if route == "CUDA_INJECTION64_PATH" else "/nonexistent/libx.so " + lib
    code = textwrap.dedent("""
        import ctypes, json
        %s
        from kerncap_shim import _agent
        link = _agent.AgentLink()
        rc = link.send("kc_kernel", b'{"a":1}')
        lib = ctypes.CDLL(%r, mode=__import__("os").RTLD_NOLOAD | 1)
        lib.fake_agent_last_name.restype = ctypes.c_char_p
        lib.fake_agent_last_json.restype = ctypes.c_char_p
        print(json.dumps({"rc": rc, "where": link.where,
                          "name": lib.fake_agent_last_name().decode(),
                          "json": lib.fake_agent_last_json().decode(),
                          "calls": lib.fake_agent_calls()}))
    """) % (load, lib)
    r = run_child(code, env)
    assert r.returncode == 0, r.stderr.decode()
    out = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert out["rc"] == 0 and out["calls"] == 1
    assert out["name"] == "kc_kernel" and out["json"] == '{"a":1}'
    if route == "global":
        assert out["where"] == "global symbol table"
    else:
        assert os.path.basename(out["where"]) == os.path.basename(lib)


def test_compile_end_to_end_through_fake_library(fake_agent_dir):
    """LD_PRELOADed fake agent, a real Triton compile: the library receives
    the kernel name and a JSON document describing that compile."""
    pytest.importorskip("triton", reason="triton is not installed")
    lib = compile_fake_agent(fake_agent_dir)
    code = textwrap.dedent("""
        import ctypes, hashlib, json, os
        import kerncap_shim
        kerncap_shim.install()
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        import shim_test_kernels as k
        ck = triton.compile(ASTSource(k.kc_add_kernel, dict(k.ADD_SIGNATURE), {"BLOCK": 128}),
                            target=GPUTarget("cuda", 90, 32), options={"num_warps": 2})
        lib = ctypes.CDLL(os.environ["LD_PRELOAD"], mode=os.RTLD_NOLOAD | 1)
        lib.fake_agent_last_name.restype = ctypes.c_char_p
        lib.fake_agent_last_json.restype = ctypes.c_char_p
        print(json.dumps({"name": lib.fake_agent_last_name().decode(),
                          "doc": json.loads(lib.fake_agent_last_json()),
                          "sha": hashlib.sha256(ck.asm["cubin"]).hexdigest(),
                          "status": kerncap_shim.status()}))
    """)
    r = run_child(code, child_env(LD_PRELOAD=lib))
    assert r.returncode == 0, r.stderr.decode()
    out = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert out["name"] == "kc_add_kernel"
    doc = out["doc"]
    assert doc["kernel_name"] == "kc_add_kernel" and doc["current"] == out["sha"]
    v = doc["variants"][0]
    assert v["binary"]["sha256"] == out["sha"] and v["constexprs"] == {"BLOCK": 128} and v["num_warps"] == 2
    assert out["status"]["agent"] == lib and out["status"]["last_result"] == {"kc_add_kernel": 0}


def _real_agent(kind):
    """(agent path, stub libcuda to load it with or "", skip reason)."""
    if kind == "hsa":
        path = os.environ.get("KERNCAP_AGENT_HSA_LIB") or os.path.join(REPO, "build", "lib",
                                                                      "libkerncap_agent_hsa.so")
        if not os.path.exists(path):
            return None, None, "the HSA agent is not built (%s; set KERNCAP_AGENT_HSA_LIB)" % path
        return path, "", None
    path = os.environ.get("KERNCAP_AGENT_LIB") or os.path.join(REPO, "build", "lib", "libkerncap_agent.so")
    if not os.path.exists(path):
        return None, None, "the CUDA agent is not built (%s; set KERNCAP_AGENT_LIB)" % path
    # It links libcuda.so.1: the driver where there is one, else the
    # toolkit's stub (CUPTI then fails and the agent stays inactive).
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/cuda/lib64"):
        if os.path.exists(os.path.join(d, "libcuda.so.1")):
            return path, "", None
    roots = ["/usr/local/cuda"] + sorted(os.path.join("/usr/local", d) for d in (
        os.listdir("/usr/local") if os.path.isdir("/usr/local") else []) if d.startswith("cuda-"))
    stubs = [os.path.join(r, sub, "stubs", "libcuda.so") for r in roots
             for sub in ("lib64", "lib", "targets/x86_64-linux/lib")]
    stubs.append("/usr/lib/x86_64-linux-gnu/stubs/libcuda.so")
    for s in stubs:
        if os.path.exists(s):
            return path, s, None
    return None, None, "no libcuda.so.1 and no CUDA stub libcuda.so to load the agent with"


@pytest.mark.parametrize("kind,how", [("cuda", "LD_PRELOAD"), ("cuda", "CUDA_INJECTION64_PATH"),
                                      ("hsa", "LD_PRELOAD"), ("hsa", "HSA_TOOLS_LIB")])
def test_real_agent_accepts_metadata(tmp_path, kind, how):
    """The real agents load without a GPU (CUDA: CUPTI fails, the agent
    stays inactive; HSA: no runtime calls OnLoad) and their C API takes
    the shim's documents."""
    agent, stub, reason = _real_agent(kind)
    if agent is None:
        pytest.skip(reason)
    env = child_env(KERNCAP_AGENT_SOCKET=str(tmp_path / "no-daemon.sock"), LD_PRELOAD=None,
                    CUDA_INJECTION64_PATH=None, HSA_TOOLS_LIB=None)
    if stub:
        d = tmp_path / "stub"
        d.mkdir()
        os.symlink(stub, str(d / "libcuda.so.1"))
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = str(d) + (os.pathsep + old if old else "")
    if how == "LD_PRELOAD":
        env["LD_PRELOAD"] = agent
        load = ""
    else:
        # What the CUDA driver (during cuInit) or the HSA runtime does: a
        # dlopen with RTLD_LOCAL.
        env[how] = agent
        load = "ctypes.CDLL(%r)" % agent
    code = textwrap.dedent("""
        import ctypes, json
        %s
        import kerncap_shim
        from kerncap_shim import _agent
        link = _agent.AgentLink()
        fn = link.resolve()
        ok = link.send("kc_add_kernel", json.dumps({"schema": "kerncap.triton-jit/1"}).encode())
        big = link.send("kc_add_kernel", b'"' + b"x" * (1 << 20) + b'"')
        empty = link.send("", b"{}")
        lib = ctypes.CDLL(link.where, mode=__import__("os").RTLD_NOLOAD | 1)
        print(json.dumps({"found": fn is not None, "where": link.where, "ok": ok, "big": big,
                          "empty": empty, "active": lib.kerncap_agent_active()}))
    """) % load
    r = run_child(code, env, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    out = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert out["found"], out
    assert os.path.realpath(out["where"]) == os.path.realpath(agent)
    assert (out["ok"], out["big"], out["empty"]) == (0, 2, 1)
