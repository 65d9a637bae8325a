"""Build steps that pyproject.toml cannot express.

The gRPC/protobuf definitions live in the repository's proto/ folder
(../../proto). At build time they are compiled into one FileDescriptorSet
(kerncap/_generated/kerncap_v1.binpb, see src/kerncap/_protoc.py for why not
*_pb2.py), and the type stub of the message classes is generated from it
(kerncap/_messages.pyi, src/kerncap/_stubgen.py); `sdist` copies the .proto
files into the sdist so it builds on its own. Nothing generated is committed.
"""
import importlib.util
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent


def _package_module(name):
    # Loaded by path: importing the kerncap package here would need grpc.
    spec = importlib.util.spec_from_file_location(f"_kerncap_{name}",
                                                  HERE / "src" / "kerncap" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _protoc_module():
    return _package_module("_protoc")


def _proto_root() -> Path:
    # The repository's copy wins (freshest); an sdist carries its own.
    repo = HERE.parent.parent / "proto"
    if (repo / "kerncap" / "v1" / "control.proto").is_file():
        return repo
    bundled = HERE / "proto"
    if (bundled / "kerncap" / "v1" / "control.proto").is_file():
        return bundled
    raise FileNotFoundError(
        f"kerncap .proto files not found in {repo} or {bundled}: build from the kerncap "
        "repository or from an sdist made by `python -m build --sdist`")


class BuildPyWithDescriptors(build_py):
    def run(self):
        super().run()
        protoc = _protoc_module()
        targets = [Path(self.build_lib) / "kerncap" / "_generated"]
        if getattr(self, "editable_mode", False):
            # Editable installs import from src/: put it there too (gitignored).
            targets.append(HERE / "src" / "kerncap" / "_generated")
        for target in targets:
            used = protoc.compile_descriptor_set(_proto_root(), target / protoc.DESCRIPTOR_FILE)
            self.announce(f"kerncap: compiled {_proto_root()} with {used} into {target}", level=2)
            self._write_stub(target / protoc.DESCRIPTOR_FILE, target.parent / "_messages.pyi")

    def _write_stub(self, descriptor_set, out):
        try:
            stubgen = _package_module("_stubgen")  # needs protobuf's descriptor_pb2
        except ImportError as e:
            self.warn(f"kerncap: no {out.name} (static types of kerncap.pb): {e}")
            return
        stubgen.write_stub(descriptor_set.read_bytes(), out)

    def get_outputs(self, include_bytecode=1):
        outputs = super().get_outputs(include_bytecode)
        kerncap = Path(self.build_lib) / "kerncap"
        generated = [str(kerncap / "_generated" / "kerncap_v1.binpb"),
                     str(kerncap / "_messages.pyi")]
        return outputs + [g for g in generated if g not in outputs]


class SdistWithProtos(sdist):
    def run(self):
        src = _proto_root()
        dst = HERE / "proto"
        if src != dst:
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(src / "kerncap", dst / "kerncap",
                            ignore=shutil.ignore_patterns("*.txt", "*.cmake"))
        super().run()


setup(cmdclass={"build_py": BuildPyWithDescriptors, "sdist": SdistWithProtos})
