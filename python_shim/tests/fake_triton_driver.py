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
        self.utils = FakeUtils(self)
        driver = self

        class Launcher:
            def __init__(self, src, metadata):
                pass

            def __call__(self, *args):
                driver.launches += 1

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


class FakeTensor:
    """What Triton's argument specialisation needs of a tensor."""

    def __init__(self, ptr, dtype="float32"):
        self.ptr = ptr
        self.dtype = FakeDtype(dtype)

    def data_ptr(self):
        return self.ptr


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
    driver.set_active(d)
    return d


def deactivate():
    from triton.runtime.driver import driver  # pylint: disable=import-outside-toplevel
    driver._active = None  # pylint: disable=protected-access
