"""A Triton driver that needs no GPU, so the real JIT, Autotuner and
Heuristics code paths run on a CPU-only machine: kernels compile for an
explicit target (sm_90 by default), "loading" and "launching" do nothing,
and benchmark timings come from a function the test chooses.

Only what triton.runtime.jit / autotuner / compiler ask of the active
driver is provided (Triton 3.x: get_current_device, get_current_stream,
get_current_target, get_benchmarker, launcher_cls, utils.load_binary,
utils.get_device_properties).
"""


def _load_binary_arity():
    import triton  # pylint: disable=import-outside-toplevel
    try:
        major, minor = (int(x) for x in triton.__version__.split(".")[:2])
    except ValueError:
        return 5
    return 5 if (major, minor) >= (3, 4) else 4


_LOAD_BINARY_ARITY = 5


class FakeUtils:
    def __init__(self, driver):
        self.driver = driver

    def load_binary(self, name, kernel, shared, device):
        self.driver.loaded.append((name, len(kernel)))
        # module, function, n_regs, n_spills[, n_max_threads (newer Triton)]
        return (1, 2, 32, 0, 1024)[:_LOAD_BINARY_ARITY]

    def get_device_properties(self, device):
        return {"max_shared_mem": 232448, "multiprocessor_count": 132, "max_num_regs": 65536,
                "warpSize": 32, "sm_clock_rate": 1, "mem_clock_rate": 1, "mem_bus_width": 1}


class FakeDriver:
    def __init__(self, target=None, timing=None):
        from triton.backends.compiler import GPUTarget  # pylint: disable=import-outside-toplevel
        self.target = target or GPUTarget("cuda", 90, 32)
        self.loaded = []
        self.launches = 0
        self.bench_calls = 0
        # timing(call_index) -> milliseconds; default: every config equal.
        self.timing = timing or (lambda i: 1.0)
        self.on_launch = None
        self.utils = FakeUtils(self)
        driver = self

        class Launcher:
            """Launches nothing; like Triton's CudaLauncher it asks the
            allocators for the kernel's global and profile scratch, and it
            reports each launch to driver.on_launch (grid, the arguments by
            name, the scratch pointers) when a test set one."""

            def __init__(self, src, metadata):
                self.src = src
                self.metadata = metadata

            def _scratch(self, size, align, allocator, grid, stream):
                if not size:
                    return None
                buf = allocator.get()(grid[0] * grid[1] * grid[2] * getattr(self.metadata, "num_ctas", 1) * size,
                                      align, stream)
                return buf.data_ptr() if hasattr(buf, "data_ptr") else buf

            def __call__(self, *args):
                driver.launches += 1
                grid, stream, rest = args[:3], args[3], args[9:]
                info = {"grid": list(grid), "name": getattr(self.metadata, "name", None)}
                try:
                    from triton.runtime import _allocation  # pylint: disable=import-outside-toplevel
                    md = self.metadata
                    info["global_scratch"] = self._scratch(getattr(md, "global_scratch_size", 0),
                                                           getattr(md, "global_scratch_align", 1),
                                                           _allocation._allocator, grid, stream)
                    info["profile_scratch"] = self._scratch(getattr(md, "profile_scratch_size", 0),
                                                            getattr(md, "profile_scratch_align", 1),
                                                            _allocation._profile_allocator, grid, stream)
                except ImportError:
                    pass
                names = list(getattr(getattr(self.src, "fn", None), "arg_names", []) or [])
                info["args"] = dict(zip(names, rest))
                if driver.on_launch is not None:
                    driver.on_launch(info)

        self.launcher_cls = Launcher

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return self.target

    def get_active_torch_device(self):
        return None

    def get_benchmarker(self):
        def bench(kernel_call, quantiles=None, **_):
            kernel_call()
            t = float(self.timing(self.bench_calls))
            self.bench_calls += 1
            return [t, t, t] if quantiles else t
        return bench


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


ELEMENT_SIZES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
                 "int32": 4, "int64": 8}


class FakeTensor:
    """What Triton's argument specialisation needs of a tensor (and the
    shape the shim records of it)."""

    def __init__(self, ptr, dtype="float32", shape=(1024,), strides=None):
        self.ptr = ptr
        self.dtype = FakeDtype(dtype)
        self.shape = tuple(shape)
        if strides is None:
            strides, acc = [], 1
            for d in reversed(self.shape):
                strides.insert(0, acc)
                acc *= d
        self._strides = tuple(strides)

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return self._strides

    def element_size(self):
        return ELEMENT_SIZES[self.dtype.name]


_DRIVER = None


def activate(timing=None, target=None):
    """Makes the (one, reused) fake driver active, with fresh counters.

    One instance for the whole process because Triton < 3.4 Autotuners keep
    the benchmarker they got from the driver at construction time."""
    global _LOAD_BINARY_ARITY, _DRIVER  # pylint: disable=global-statement
    _LOAD_BINARY_ARITY = _load_binary_arity()
    from triton.runtime.driver import driver  # pylint: disable=import-outside-toplevel
    if _DRIVER is None:
        _DRIVER = FakeDriver()
    d = _DRIVER
    if target is not None:
        d.target = target
    d.timing = timing or (lambda i: 1.0)
    d.loaded, d.launches, d.bench_calls = [], 0, 0
    d.on_launch = None
    driver.set_active(d)
    return d


def deactivate():
    from triton.runtime.driver import driver  # pylint: disable=import-outside-toplevel
    driver._active = None  # pylint: disable=protected-access
