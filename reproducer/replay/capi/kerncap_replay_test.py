"""Tests of the ctypes binding kerncap_replay.py (no GPU needed).

Run by ctest (replay_capi_python_test) with
  KERNCAP_REPLAY_TEST_LIB      the built libkerncap_replay.so
  KERNCAP_REPLAY_TEST_FIXTURE  the replay_capi_fixture binary (writes captures)
Standard library only (unittest).
"""

import ctypes
import importlib.util
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import kerncap_replay as kr  # noqa: E402

LIB = os.environ.get("KERNCAP_REPLAY_TEST_LIB", "")
FIXTURE = os.environ.get("KERNCAP_REPLAY_TEST_FIXTURE", "")

DATA_VA = 0x7F3B00200000
TABLE_VA = 0x7F3B00000000
N = 100000


def have_cuda_driver():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def load_copy(folder):
    """kerncap_replay.py copied into `folder` and imported from there."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "kerncap_replay.py")
    shutil.copy(os.path.join(HERE, "kerncap_replay.py"), path)
    return load_module(path)


def load_module(path):
    spec = importlib.util.spec_from_file_location("kerncap_replay_copy_%d" % id(path), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Base(unittest.TestCase):
    def setUp(self):
        if not os.path.isfile(LIB) or not os.path.isfile(FIXTURE):
            self.fail("set KERNCAP_REPLAY_TEST_LIB and KERNCAP_REPLAY_TEST_FIXTURE (ctest does)")
        self.tmp = tempfile.mkdtemp(prefix="kc_capi_py_")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        cwd = os.getcwd()
        self.addCleanup(os.chdir, cwd)
        env = {k: v for k, v in os.environ.items()
               if k not in ("KERNCAP_REPLAY_LIB", "KERNCAP_REPLAY")}
        patcher = mock.patch.dict(os.environ, env, clear=True)
        patcher.start()
        self.addCleanup(patcher.stop)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def fixture(self, *args, name="c.kcap"):
        out = self.path(name)
        subprocess.check_call([FIXTURE, out] + list(args))
        return out

    def link(self, target, *parts):
        p = self.path(*parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        os.symlink(target, p)
        return p

    def fake_tool(self, *parts):
        p = self.path(*parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(p, os.stat(p).st_mode | stat.S_IXUSR)
        return p


class FindLibraryTest(Base):
    def test_explicit(self):
        self.assertEqual(kr.find_library(LIB), LIB)

    def test_explicit_missing_is_an_error_naming_it(self):
        missing = self.path("nope", "libkerncap_replay.so")
        with self.assertRaises(kr.ReplayError) as cm:
            kr.find_library(missing)
        self.assertIn(missing, str(cm.exception))
        self.assertIn("explicit", str(cm.exception))
        self.assertEqual(cm.exception.code, 0)

    def test_environment(self):
        os.environ["KERNCAP_REPLAY_LIB"] = LIB
        self.assertEqual(kr.find_library(), LIB)
        # An explicit one wins over the environment.
        other = self.link(LIB, "other", "libkerncap_replay.so")
        self.assertEqual(kr.find_library(other), other)
        os.environ["KERNCAP_REPLAY_LIB"] = self.path("missing.so")
        with self.assertRaises(kr.ReplayError) as cm:
            kr.find_library()
        self.assertIn("$KERNCAP_REPLAY_LIB", str(cm.exception))
        self.assertIn(self.path("missing.so"), str(cm.exception))

    def _isolated(self):
        """A copy of the module with nothing around it, an empty cwd and PATH."""
        mod = load_copy(self.path("mod"))
        os.makedirs(self.path("cwd"))
        os.chdir(self.path("cwd"))
        os.makedirs(self.path("emptybin"))
        os.environ["PATH"] = self.path("emptybin")
        return mod

    def test_nothing_found_lists_every_place_tried(self):
        mod = self._isolated()
        self.fake_tool("inst", "bin", "kerncap-replay")  # a kerncap-replay without the library
        os.environ["PATH"] = self.path("inst", "bin")
        with mock.patch("ctypes.util.find_library", return_value=None):
            with self.assertRaises(mod.ReplayError) as cm:
                mod.find_library()
        msg = str(cm.exception)
        for expected in ("next to kerncap_replay.py", self.path("mod", "libkerncap_replay.so"),
                         "./lib", self.path("cwd", "lib", "libkerncap_replay.so"),
                         "kerncap-replay on $PATH",
                         self.path("inst", "lib", "libkerncap_replay.so"),
                         self.path("inst", "bin", "libkerncap_replay.so"),
                         'ctypes.util.find_library("kerncap_replay")', "KERNCAP_REPLAY_LIB"):
            self.assertIn(expected, msg)

    def test_next_to_the_module(self):
        mod = self._isolated()
        here = self.link(LIB, "mod", "libkerncap_replay.so")
        self.assertEqual(mod.find_library(), here)

    def test_lib_folder_of_the_working_directory(self):
        mod = self._isolated()
        self.link(LIB, "cwd", "lib", "libkerncap_replay.so")
        self.assertEqual(os.path.realpath(mod.find_library()), os.path.realpath(LIB))

    def test_beside_kerncap_replay_on_path(self):
        mod = self._isolated()
        self.fake_tool("inst", "bin", "kerncap-replay")
        lib = self.link(LIB, "inst", "lib", "libkerncap_replay.so")
        os.environ["PATH"] = os.pathsep.join([self.path("emptybin"), self.path("inst", "bin")])
        self.assertEqual(mod.find_library(), lib)
        # The same folder as the binary, when there is no ../lib.
        os.remove(lib)
        same = self.link(LIB, "inst", "bin", "libkerncap_replay.so")
        self.assertEqual(mod.find_library(), same)

    def test_kerncap_replay_environment_variable(self):
        mod = self._isolated()
        tool = self.fake_tool("other", "bin", "kerncap-replay")
        lib = self.link(LIB, "other", "lib", "libkerncap_replay.so")
        os.environ["KERNCAP_REPLAY"] = tool
        self.assertEqual(mod.find_library(), lib)

    def test_ctypes_fallback(self):
        mod = self._isolated()
        with mock.patch("ctypes.util.find_library", return_value=LIB) as fl:
            self.assertEqual(mod.find_library(), LIB)
        fl.assert_called_with("kerncap_replay")

    def test_build_tree_copy_finds_its_library(self):
        # CMake copies the binding next to the library (<build>/lib).
        copy = os.path.join(os.path.dirname(LIB), "kerncap_replay.py")
        self.assertTrue(os.path.isfile(copy), copy)
        mod = load_module(copy)
        self.assertEqual(os.path.realpath(mod.find_library()), os.path.realpath(LIB))

    def test_not_a_replay_library(self):
        # Any other shared library loaded here, e.g. libc (its path from the maps).
        other = None
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "/libc.so" in path or "/libc-" in path:
                    other = path
                    break
        if other is None or not os.path.isfile(other):
            self.skipTest("libc's path not found in /proc/self/maps")
        with self.assertRaises(kr.ReplayError) as cm:
            kr.Replay(self.path("x.kcap"), library=other)
        self.assertIn("not a kerncap replay library", str(cm.exception))


class ReplayTest(Base):
    def test_open_and_info(self):
        path = self.fixture("--rich")
        with kr.Replay(path, library=LIB) as r:
            info = r.info
            self.assertEqual(info["capture_id"], "cap-capi-selftest")
            self.assertEqual(info["capture_path"], path)
            self.assertEqual(info["kernel"]["name"], "add_one")
            self.assertEqual(info["kernel"]["jit_metadata"]["num_warps"], 8)
            self.assertFalse(info["prepared"])
            self.assertFalse(info["relocated"])
            self.assertEqual(info["launch"]["block"], [256, 1, 1])
            self.assertEqual(info["launch"]["grid"], [(N + 255) // 256, 2, 1])
            self.assertEqual(info["launch"]["cluster"], [2, 1, 1])
            self.assertEqual(info["launch"]["shared_bytes"], 4096)
            args = info["arguments"]
            self.assertEqual(len(args), 4)
            self.assertEqual(int.from_bytes(bytes.fromhex(args[0]["hex"]), "little"), TABLE_VA)
            self.assertEqual(args[0]["pointer_region"], 0)
            self.assertEqual(int.from_bytes(bytes.fromhex(args[1]["hex"]), "little"), N)
            self.assertEqual(args[1]["pointer_region"], -1)
            self.assertEqual(args[3]["pointer_region"], 1)
            self.assertEqual(args[3]["pointer_offset"], 16)
            regions = info["regions"]
            self.assertEqual([x["kind"] for x in regions],
                             ["device", "device", "host_pinned", "module_global", "kernarg"])
            self.assertEqual(regions[1]["captured_va"], DATA_VA)
            self.assertEqual(regions[1]["size"], N * 8)
            self.assertTrue(regions[1]["written"])
            self.assertFalse(regions[0]["written"])
            self.assertEqual(regions[3]["name"], "kc_scale")
            self.assertNotIn("replay_va", regions[0])
            self.assertEqual(r.translate(DATA_VA), 0)  # before prepare
            self.assertEqual(r.library, LIB)
        self.assertIsNone(r._handle)

    def test_open_a_project_folder(self):
        os.makedirs(self.path("proj"))
        self.fixture(name=os.path.join("proj", "capture.kcap"))
        with kr.Replay(self.path("proj"), library=LIB) as r:
            self.assertEqual(r.info["capture_path"], self.path("proj", "capture.kcap"))

    def test_bad_capture_path(self):
        missing = self.path("missing.kcap")
        with self.assertRaises(kr.ReplayError) as cm:
            kr.Replay(missing, library=LIB)
        self.assertIn(missing, str(cm.exception))
        self.assertIn("no such file", str(cm.exception))

    def test_options_reach_the_library(self):
        path = self.fixture()
        with self.assertRaises(kr.ReplayError) as cm:
            kr.Replay(path, allow_relocation=False, force_relocation=True, library=LIB)
        self.assertIn("contradicting", str(cm.exception))
        missing = self.path("k.cubin")
        with self.assertRaises(kr.ReplayError) as cm:
            kr.Replay(path, code_object=missing, library=LIB)
        self.assertIn(missing, str(cm.exception))
        with self.assertRaises(kr.ReplayError) as cm:
            kr.Replay(path, device=-5, library=LIB)
        self.assertIn("'device'", str(cm.exception))
        kr.Replay(path, device=0, force_relocation=True, library=LIB).close()

    def test_prepare_error_is_a_replay_error(self):
        if have_cuda_driver():
            self.skipTest("libcuda.so.1 is present: kerncap_replay_gpu_test.py covers prepare")
        with kr.Replay(self.fixture(), library=LIB) as r:
            for _ in range(2):
                with self.assertRaises(kr.ReplayError) as cm:
                    r.prepare()
                self.assertIn("no CUDA driver", str(cm.exception))
                self.assertEqual(cm.exception.code, kr.E_NO_DEVICE)
                self.assertTrue(cm.exception.no_device)
            for call in (r.launch, r.restore_inputs):
                with self.assertRaises(kr.ReplayError) as cm:
                    call()
                self.assertTrue(cm.exception.no_device, str(cm.exception))
            self.assertFalse(r.info["prepared"])

    def test_validate_errors(self):
        with kr.Replay(self.fixture("--rich"), library=LIB) as r:
            with self.assertRaises(kr.ReplayError) as cm:
                r.validate(atol=1e-3)
            self.assertEqual(cm.exception.code, kr.E_USAGE)
            self.assertIn("no dtype", str(cm.exception))
            with self.assertRaises(kr.ReplayError) as cm:
                r.validate(regions={7: {"dtype": "f32"}})
            self.assertIn("regions['7']: no such region", str(cm.exception))
            with self.assertRaises(kr.ReplayError) as cm:
                r.validate(dtype="f9")
            self.assertEqual(cm.exception.code, kr.E_USAGE)
            # Well-formed options get as far as the missing prepare.
            for kwargs in ({}, {"dtype": "f32", "atol": 1e-3, "rtol": 1e-2, "ulp": 2},
                           {"regions": {1: {"dtype": "u64", "atol": 1}}},
                           {"regions": {"kc_scale": {"dtype": "f32"}}},
                           {"regions": {hex(DATA_VA): {"dtype": "u64"}}}):
                with self.assertRaises(kr.ReplayError) as cm:
                    r.validate(**kwargs)
                self.assertIn("not prepared", str(cm.exception), kwargs)
                self.assertEqual(cm.exception.code, kr.E_REPLAY)

    def test_close_is_idempotent(self):
        r = kr.Replay(self.fixture(), library=LIB)
        r.close()
        r.close()
        with self.assertRaises(kr.ReplayError) as cm:
            r.info
        self.assertIn("closed", str(cm.exception))
        self.assertEqual(r.translate.__name__, "translate")
        with self.assertRaises(kr.ReplayError):
            r.translate(DATA_VA)

    def test_version(self):
        self.assertRegex(kr.version(LIB), r"^\d+\.\d+")


if __name__ == "__main__":
    unittest.main(verbosity=2)
