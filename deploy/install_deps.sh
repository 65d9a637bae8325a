#!/usr/bin/env bash
# Installs the Debian 12 packages kerncap builds and tests with. Idempotent.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libzstd-dev zstd libxxhash-dev libsqlite3-dev libssl-dev openssl
  libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3
  # Python client (client/python): venv + pip for its test environments, and
  # Debian's grpcio/protobuf/xxhash/pytest so its tests also run offline and
  # against the oldest supported versions (client/python/run_tests.sh).
  python3-venv python3-pip python3-setuptools python3-grpcio python3-protobuf python3-xxhash
  python3-pytest
  # ROCm/HSA backend: HSA headers, HIP headers and device libraries
  # for compiling the test kernels, clang/lld/LLVM 15 (code objects, LLVM's
  # ELF + msgpack static libraries, libFuzzer).
  libhsa-runtime-dev libamdhip64-dev rocm-device-libs clang-15 lld-15 llvm-15-dev
  # CUDA reproducers' minimal unit (kerncap-cuda-slice): clang 15's AST
  # library, headers and static archives (reproducer/generator/slicer), and
  # the zlib and terminfo archives its static link takes (libz.a, libtinfo.a).
  libclang-15-dev zlib1g-dev libncurses-dev
  # kerncapctl's completion scripts are run, not only generated, by CliTest
  # (client/kerncapctl/cli_test.cc): bash is always there; zsh and fish.
  zsh fish
  # A real Slurm for tests/slurm (slurmctld + slurmd on this machine, munge
  # for their authentication): the cluster-job flow with deploy/slurm's hooks.
  slurmctld slurmd slurm-client munge
  # GNU time: peak RSS in tests/slurm/fanout_scale.sh.
  time
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
