"""kerncap_shim: hands Triton's JIT-only metadata to the kerncap agent.

The kerncap agent (libkerncap_agent.so, loaded into the application with
CUDA_INJECTION64_PATH or LD_PRELOAD; libkerncap_agent_hsa.so with
HSA_TOOLS_LIB) captures kernel dispatches but only sees binaries. For a
Triton kernel the useful rest lives in Python: the JIT function's source,
its signature and constexprs, the specialisation, the launch options and
the autotuner's candidates and choice. This package records them when
Triton compiles (never per launch) and passes them to the agent through its
C API, ``kerncap_agent_set_jit_metadata(kernel_name, json)``; the agent
attaches them to captures of that kernel (manifest kernel.jit_metadata_json).

Activation, any of:

    import kerncap_shim; kerncap_shim.install()
    import kerncap_shim.auto                    # the same, as an import
    KERNCAP_TRITON_SHIM=1 python app.py         # installed package: .pth file

With no agent loaded (and none named by the environment) the hooks return
at once. See README.md for what is recorded and the limits.
"""

__version__ = "0.1.0"
__all__ = ["install", "uninstall", "installed", "status", "document", "kernels", "env_for_subprocess",
           "__version__"]


def install(agent=None, mode="auto"):
    """Installs the hooks (now if Triton is imported, else when it is).

    ``agent``: leave None to find the loaded agent by itself; or a path of a
    library already loaded in this process, a ctypes library, or a callable
    ``f(name: bytes, json: bytes) -> int`` (tests). ``mode``: "auto" uses
    Triton's knobs where they exist (>= 3.4), "legacy" forces the
    CompiledKernel wrapper used for older releases. Returns True.
    """
    from ._state import SHIM  # pylint: disable=import-outside-toplevel
    return SHIM.install(agent=agent, mode=mode)


def uninstall():
    """Removes the hooks that are still ours and stops recording."""
    from ._state import SHIM  # pylint: disable=import-outside-toplevel
    SHIM.uninstall()


def installed():
    from ._state import SHIM  # pylint: disable=import-outside-toplevel
    return SHIM.enabled


def status():
    """A dict: hooks in place, agent found, kernels recorded, counters and
    the last errors (the shim never raises into the application)."""
    from ._state import SHIM  # pylint: disable=import-outside-toplevel
    return SHIM.status()


def kernels():
    """Kernel names with recorded metadata."""
    from ._state import SHIM  # pylint: disable=import-outside-toplevel
    return SHIM.registry.names()


def document(kernel_name):
    """The JSON document (as a dict) the agent holds, or would hold, for
    ``kernel_name``; None when nothing was recorded under that name."""
    from ._state import SHIM  # pylint: disable=import-outside-toplevel
    return SHIM.registry.document(kernel_name)


def env_for_subprocess(environ=None):
    """Environment for a child process with the shim active, installed or
    not: KERNCAP_TRITON_SHIM=1 plus a PYTHONPATH carrying the package and
    its sitecustomize directory."""
    import os  # pylint: disable=import-outside-toplevel
    from ._startup import site_dirs  # pylint: disable=import-outside-toplevel
    env = dict(os.environ if environ is None else environ)
    env["KERNCAP_TRITON_SHIM"] = "1"
    extra = [d for d in site_dirs() if d]
    old = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join(extra + ([old] if old else []))
    return env
