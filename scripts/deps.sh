#!/usr/bin/env bash
# Checks for what nabla needs to build and installs what is missing (Debian's
# packages, through apt-get). Required: a C compiler, make, CMake, pkg-config,
# zlib, and protobuf-c (the protoc-c compiler and the library: program files
# are protobuf).
# With --test, also what the test suite uses: Graphviz (the drawing test
# renders with it), gnuplot (the training test draws its curves), Debian's
# Python with NumPy, ONNX, PyTorch and torchvision (the interchange tests
# compare with them; tests/test_onnx_finetune.sh exports torchvision's
# models), ONNX's proto (libonnx-dev: ONNX import and export are built when it
# is there), Open MPI (libopenmpi-dev and openmpi-bin: the MPI communicator
# is built when it is there, and tests/test_mpi.sh runs ranks with mpirun), iproute2
# (tests/test_mpi_hosts.sh makes hosts of network namespaces with ip netns), OpenBLAS
# (libopenblas-pthread-dev: the GEMM calls it when it is there, and the tests
# check it and nabla's own kernel both), clang-format-19 (tests/test_format.sh
# checks the layout with it) and, where clang is installed, its libFuzzer runtime (`make fuzz`). Optional ones are only reported: the build detects them
# and works without.
set -euo pipefail

for_tests=0
[ "${1:-}" = "--test" ] && for_tests=1

missing=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

have_cmd cc || have_cmd gcc || missing+=(gcc)
have_cmd make || missing+=(make)
have_cmd cmake || missing+=(cmake)
have_cmd pkg-config || missing+=(pkg-config)
[ -f /usr/include/zlib.h ] || have_pkg zlib1g-dev || missing+=(zlib1g-dev)
have_cmd protoc-c || missing+=(protobuf-c-compiler)
[ -f /usr/include/protobuf-c/protobuf-c.h ] || have_pkg libprotobuf-c-dev || missing+=(libprotobuf-c-dev)
if [ $for_tests = 1 ]; then
    have_cmd dot || missing+=(graphviz)
    have_cmd gnuplot || missing+=(gnuplot-nox)
    [ -f /usr/include/onnx/onnx.proto ] || have_pkg libonnx-dev || missing+=(libonnx-dev)
    have_pkg libopenmpi-dev || missing+=(libopenmpi-dev)
    # OpenBLAS (pthread flavour): the GEMM's BLAS path is built and tested
    # beside nabla's own, and PyTorch runs on it, not on the reference BLAS.
    ls /usr/lib/*/libopenblas.so /usr/lib/*/openblas*/libopenblas.so >/dev/null 2>&1 || missing+=(libopenblas-pthread-dev)
    have_cmd mpirun || missing+=(openmpi-bin)
    # ip netns: tests/test_mpi_hosts.sh makes hosts of network namespaces.
    have_cmd ip || missing+=(iproute2)
    # tests/test_format.sh checks the layout with clang-format 19.
    have_cmd clang-format-19 || missing+=(clang-format-19)
    # Debian's own Python (not one first on PATH), as the tests call it.
    py=/usr/bin/python3
    [ -x $py ] || missing+=(python3)
    [ -x $py ] && $py -c 'import numpy' 2>/dev/null || missing+=(python3-numpy)
    [ -x $py ] && $py -c 'import onnx' 2>/dev/null || missing+=(python3-onnx)
    [ -x $py ] && $py -c 'import torch' 2>/dev/null || missing+=(python3-torch)
    [ -x $py ] && $py -c 'import torchvision' 2>/dev/null || missing+=(python3-torchvision)
    # Debian ships libFuzzer apart from clang, as libclang-rt-<major>-dev.
    if have_cmd clang && ! "$(dirname "$0")/../fuzz/run.sh" --check; then
        clang_major=$(clang -dumpversion 2>/dev/null | cut -d. -f1)
        if [ -n "$clang_major" ]; then missing+=("libclang-rt-$clang_major-dev"); fi
    fi
fi

if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing packages: ${missing[*]}"
    if [ "$(id -u)" -eq 0 ]; then sudo=""; elif have_cmd sudo; then sudo="sudo"; else
        echo "deps: need root (or sudo) to run: apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Optional: what each one turns on.
report() { # name, test, what it enables, package
    if eval "$2"; then printf 'deps: %-12s found     (%s)\n' "$1" "$3"
    else printf 'deps: %-12s not found (%s; apt-get install %s)\n' "$1" "$3" "$4"; fi
}
if [ "${NABLA_DEPS_QUIET:-0}" != 1 ]; then
    report openblas "ls /usr/lib/*/libopenblas.so /usr/lib/*/openblas*/libopenblas.so >/dev/null 2>&1" "BLAS matrix products" libopenblas-dev
    report graphviz "have_cmd dot" "rendering program drawings" graphviz
    report gnuplot "have_cmd gnuplot" "training curve plots" gnuplot
    report mpi "have_cmd mpicc && have_cmd mpirun" "data-parallel training over processes" "libopenmpi-dev openmpi-bin"
    report torch "/usr/bin/python3 -c 'import torch' 2>/dev/null" "side-by-side benchmarks, interchange tests" python3-torch
    report onnx "[ -f /usr/include/onnx/onnx.proto ]" "ONNX import and export" libonnx-dev
fi
