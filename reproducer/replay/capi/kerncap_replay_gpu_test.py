"""GPU test of the ctypes binding, used the way a Triton reproducer uses it:
prepare, translate the captured pointer, launch the kernel OURSELVES in the
primary context (the PTX loaded through libcuda with ctypes, standing in for
a Triton JIT launch), validate, restore the inputs, repeat; then the
library's own launch. Exits 77 (ctest: skipped) without a driver or device.

Environment as kerncap_replay_test.py (ctest sets it).
"""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import kerncap_replay as kr  # noqa: E402

LIB = os.environ.get("KERNCAP_REPLAY_TEST_LIB", "")
FIXTURE = os.environ.get("KERNCAP_REPLAY_TEST_FIXTURE", "")
TABLE_VA = 0x7F3B00000000
DATA_VA = 0x7F3B00200000
N = 100000
SKIP = 77


def load_cuda():
    """libcuda with the few functions used here, or None (no driver/device)."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        print("SKIPPED: no CUDA driver: %s" % e)
        return None
    vp, u32 = ctypes.c_void_p, ctypes.c_uint
    cu.cuInit.argtypes = [u32]
    cu.cuDeviceGetCount.argtypes = [ctypes.POINTER(ctypes.c_int)]
    cu.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    cu.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(vp), ctypes.c_int]
    cu.cuDevicePrimaryCtxRelease_v2.argtypes = [ctypes.c_int]
    cu.cuCtxGetCurrent.argtypes = [ctypes.POINTER(vp)]
    cu.cuCtxSynchronize.argtypes = []
    cu.cuModuleLoadData.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p]
    cu.cuModuleGetFunction.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_char_p]
    cu.cuModuleUnload.argtypes = [vp]
    cu.cuLaunchKernel.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp,
                                  ctypes.POINTER(vp), ctypes.POINTER(vp)]
    cu.cuMemcpyDtoH_v2.argtypes = [vp, ctypes.c_uint64, ctypes.c_size_t]
    count = ctypes.c_int(0)
    rc = cu.cuInit(0)
    if rc != 0 or cu.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        print("SKIPPED: no CUDA device (cuInit %d)" % rc)
        return None
    return cu


CU = None


class GpuTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kc_capi_py_gpu_")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.module = None

    def tearDown(self):
        if self.module:
            CU.cuModuleUnload(self.module)

    def write(self, *args):
        path = os.path.join(self.tmp, "c.kcap")
        ptx = os.path.join(self.tmp, "add_one.ptx")
        subprocess.check_call([FIXTURE, path, "--write-ptx=" + ptx] + list(args))
        with open(ptx, "rb") as f:
            self.ptx = f.read()
        return path

    def check(self, rc, what):
        self.assertEqual(rc, 0, "%s failed: CUresult %d" % (what, rc))

    def external_launch(self, r):
        """add_one(translated table, N) in the current context, as Triton would."""
        current, primary, dev = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int(0)
        self.check(CU.cuCtxGetCurrent(ctypes.byref(current)), "cuCtxGetCurrent")
        self.check(CU.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self.check(CU.cuDevicePrimaryCtxRetain(ctypes.byref(primary), dev), "retain")
        CU.cuDevicePrimaryCtxRelease_v2(dev)
        self.assertEqual(current.value, primary.value, "the primary context is not current")
        if not self.module:
            module, fn = ctypes.c_void_p(), ctypes.c_void_p()
            self.check(CU.cuModuleLoadData(ctypes.byref(module), self.ptx), "cuModuleLoadData")
            self.module = module
            self.check(CU.cuModuleGetFunction(ctypes.byref(fn), module, b"add_one"),
                       "cuModuleGetFunction")
            self.fn = fn
        table = ctypes.c_uint64(r.translate(TABLE_VA))
        self.assertNotEqual(table.value, 0)
        n = ctypes.c_uint32(N)
        params = (ctypes.c_void_p * 2)(ctypes.addressof(table), ctypes.addressof(n))
        self.check(CU.cuLaunchKernel(self.fn, (N + 255) // 256, 1, 1, 256, 1, 1, 0, None,
                                     params, None), "cuLaunchKernel")

    def value(self, r, i):
        out = ctypes.c_uint64(0)
        self.check(CU.cuCtxSynchronize(), "cuCtxSynchronize")
        self.check(CU.cuMemcpyDtoH_v2(ctypes.byref(out), r.translate(DATA_VA + 8 * i), 8),
                   "cuMemcpyDtoH")
        return out.value

    def test_external_launch_validate_restore(self):
        with kr.Replay(self.write(), library=LIB) as r:
            info = r.prepare()
            self.assertTrue(info["prepared"])
            self.assertTrue(all(x["restored"] for x in info["regions"]))
            if not info["relocated"]:
                self.assertEqual(r.translate(DATA_VA + 16), DATA_VA + 16)
            self.assertEqual(self.value(r, 7), 21)

            self.external_launch(r)
            report = r.validate()
            self.assertTrue(report["pass"], report)
            self.assertEqual(report["differing"], [])
            self.assertEqual(self.value(r, 7), 22)

            self.external_launch(r)  # twice without restoring: off by one
            report = r.validate(dtype="u64")
            self.assertFalse(report["pass"])
            self.assertEqual(len(report["differing"]), 1)
            self.assertEqual(report["differing"][0]["index"], 1)
            self.assertEqual(report["differing"][0]["count"], N)
            self.assertTrue(r.validate(regions={1: {"dtype": "u64", "atol": 1}})["pass"])

            r.restore_inputs()
            self.assertEqual(self.value(r, 7), 21)
            self.external_launch(r)
            self.assertTrue(r.validate()["pass"])

            times = []
            for _ in range(3):
                r.restore_inputs()
                times.append(r.launch())
            self.assertTrue(all(t > 0 for t in times), times)
            self.assertTrue(r.validate()["pass"])

    def test_forced_relocation(self):
        with kr.Replay(self.write(), force_relocation=True, library=LIB) as r:
            info = r.prepare()
            self.assertTrue(info["relocated"])
            data = r.translate(DATA_VA)
            self.assertNotIn(data, (0, DATA_VA))
            self.assertEqual(info["regions"][1]["replay_va"], data)
            self.external_launch(r)
            self.assertTrue(r.validate()["pass"])

    def test_bench_same_binary_as_variant_is_even(self):
        with kr.Replay(self.write(), library=LIB) as r:
            r.prepare()
            alone = r.bench(iterations=20, warmup=3)
            self.assertIsNone(alone["variant"])
            self.assertGreater(alone["original"]["median_ms"], 0)
            rep = r.bench(variant=os.path.join(self.tmp, "add_one.ptx"), iterations=50, warmup=5,
                          cold_l2=True)
            print(json.dumps({k: rep[k] for k in ("variant", "original", "speedup", "spread",
                                                  "revalidated", "persisting_l2")}))
            self.assertGreater(rep["speedup"], 0.7)
            self.assertLess(rep["speedup"], 1.4)
            self.assertEqual(rep["revalidated"], {"variant": "pass", "original": "pass"})
            self.assertTrue(rep["pass"])
            self.assertEqual(rep["persisting_l2"]["limit_during_bytes"], 0)

    def test_wrong_golden_image(self):
        with kr.Replay(self.write("--golden-delta=2"), library=LIB) as r:
            r.prepare()
            self.assertGreater(r.launch(), 0)
            report = r.validate(dtype="u64")
            self.assertFalse(report["pass"])
            self.assertEqual(report["result"], "fail")


if __name__ == "__main__":
    if not os.path.isfile(LIB) or not os.path.isfile(FIXTURE):
        print("set KERNCAP_REPLAY_TEST_LIB and KERNCAP_REPLAY_TEST_FIXTURE (ctest does)")
        sys.exit(1)
    CU = load_cuda()
    if CU is None:
        sys.exit(SKIP)
    unittest.main(verbosity=2)
