"""Tests of Replay.bench() and the verdicts of the ctypes binding on the fake
CUDA driver (no GPU needed).

The fake (reproducer/replay/testing/fake_cuda.h, a libcuda.so.1 stand-in) is
loaded first with RTLD_GLOBAL, so libkerncap_replay.so's dlopen("libcuda.so.1")
finds it. Its add_one kernel takes 1 ms of fake device time.

Run by ctest (replay_capi_python_fake_test) with
  KERNCAP_REPLAY_TEST_LIB        the built libkerncap_replay.so
  KERNCAP_REPLAY_TEST_FIXTURE    the replay_capi_fixture binary (writes captures)
  KERNCAP_REPLAY_TEST_FAKE_CUDA  the fake driver
Standard library only (unittest).
"""

import ctypes
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
FAKE = os.environ.get("KERNCAP_REPLAY_TEST_FAKE_CUDA", "")

STATS_KEYS = {"iterations", "min_ms", "median_ms", "mean_ms", "max_ms", "p10_ms", "p90_ms"}


class FakeDriverTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not all(os.path.isfile(p) for p in (LIB, FIXTURE, FAKE)):
            raise AssertionError("set KERNCAP_REPLAY_TEST_LIB, KERNCAP_REPLAY_TEST_FIXTURE and "
                                 "KERNCAP_REPLAY_TEST_FAKE_CUDA (ctest does)")
        cls.fake = ctypes.CDLL(FAKE, mode=ctypes.RTLD_GLOBAL)
        cls.fake.kc_fake_cuda_reset.restype = None
        cls.fake.kc_fake_cuda_persisting_l2_limit.restype = ctypes.c_ulonglong

    def setUp(self):
        self.fake.kc_fake_cuda_reset()
        self.tmp = tempfile.mkdtemp(prefix="kc_capi_fake_py_")
        self.kcap = os.path.join(self.tmp, "c.kcap")
        self.ptx = os.path.join(self.tmp, "add_one.ptx")
        subprocess.check_call([FIXTURE, self.kcap, "--write-ptx=" + self.ptx])

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def replay(self):
        r = kr.Replay(self.kcap, library=LIB)
        self.addCleanup(r.close)
        r.prepare()
        return r

    def test_bench_of_the_captured_binary_alone(self):
        rep = self.replay().bench(iterations=5, warmup=1)
        self.assertIsNone(rep["variant"])
        self.assertTrue(STATS_KEYS <= set(rep["original"]), rep["original"])
        self.assertEqual(rep["original"]["iterations"], 5)
        self.assertEqual(rep["original"]["median_ms"], 1.0)
        self.assertIsNone(rep["speedup"])
        self.assertEqual(rep["revalidated"], {"variant": None, "original": "pass"})
        self.assertTrue(rep["pass"])
        self.assertFalse(rep["cold_l2"])

    def test_the_same_binary_as_a_variant_measures_even(self):
        rep = self.replay().bench(variant=self.ptx, iterations=6, warmup=2, cold_l2=True)
        self.assertTrue(STATS_KEYS <= set(rep["variant"]))
        self.assertEqual(rep["speedup"], 1.0)
        self.assertEqual(rep["spread"]["p10"], 1.0)
        self.assertEqual(rep["spread"]["p90"], 1.0)
        self.assertEqual(rep["interleave"], "ABBA")
        self.assertTrue(rep["cold_l2"])
        self.assertEqual(rep["revalidated"], {"variant": "pass", "original": "pass"})

    def test_compare_original_false_times_the_variant_alone(self):
        rep = self.replay().bench(variant=self.ptx, iterations=2, warmup=0,
                                  compare_original=False)
        self.assertEqual(rep["variant"]["iterations"], 2)
        self.assertIsNone(rep["original"])
        self.assertIsNone(rep["revalidated"]["original"])

    def test_bad_options_raise_with_the_usage_code(self):
        r = self.replay()
        with self.assertRaises(kr.ReplayError) as e:
            r.bench(iterations=0)
        self.assertEqual(e.exception.code, kr.E_USAGE)
        with self.assertRaises(kr.ReplayError) as e:
            r.bench(variant=os.path.join(self.tmp, "missing.cubin"))
        self.assertIn("no such file", str(e.exception))

    def test_validate_after_a_launch_passes(self):
        r = self.replay()
        r.launch()
        rep = r.validate()
        self.assertTrue(rep["pass"])
        self.assertEqual(rep["result"], "pass")
        self.assertEqual(rep["not_compared"], [])


if __name__ == "__main__":
    unittest.main()
