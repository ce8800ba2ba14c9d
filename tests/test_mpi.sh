#!/usr/bin/env bash
# Data parallelism over real processes (Open MPI on loopback; skipped,
# saying so, where mpirun or nabla's MPI support is missing):
#  - tests/mpi_check.c under `mpirun -np 2`, 3 and 4 (oversubscribed):
#    N ranks with batch B/N train as one process with batch B, SGD and Adam,
#    static and eager, every rank identical after every step, whatever the
#    bucket size; the sharded reader covers each epoch once; a rank with a
#    different model is named on every rank; a rank that stays away makes
#    the others fail after the timeout rather than hang; nb_train over the
#    ranks writes from rank 0 only and resumes on every rank exactly; an
#    all-reduce left open moves on inside the GEMMs that follow it; large
#    all-reduces, several open at once, one that ranks join late (the
#    first rank napping meanwhile), and nb_ddp's gradients (unused
#    and shared ones among them) are exact through shared memory and, with
#    NABLA_COMM_SHM=0, through the ring (which also trains);
#  - `mpirun -np 2 examples/mnist_mlp --mpi` (static and --eager, one
#    epoch) reaches the test accuracy of one process within 0.2 points and
#    prints each rank's share once (needs MNIST in the build's data folder,
#    CMake's NABLA_DATA_DIR).
set -euo pipefail
build=$1
src=$2
source "$(dirname "$0")/mpi_env.bash"
# Shared memory on one machine (no network, and no complaint about it).
mpirun_() { timeout 300 mpirun --oversubscribe --mca btl self,vader -np "$@"; }
pass=0 fail=0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# expect NAME COUNT FILE RC: COUNT "ok" lines, no FAIL in FILE and exit
# status 0 (RC "any": the run is meant to end badly).
expect() {
    local oks
    oks=$(grep -c ': ok ' "$3" || true)
    if [ "$oks" -eq "$2" ] && ! grep -q FAIL "$3" && { [ "$4" = any ] || [ "$4" -eq 0 ]; }; then
        echo "ok   $1 ($oks checks)"; pass=$((pass + 1))
    else
        echo "FAIL $1: $oks of $2 checks passed"; cat "$3"; fail=$((fail + 1))
    fi
}

for np in 2 3 4; do
    for check in equal shard mismatch progress big; do
        rc=0
        # progress checks nabla's GEMM, which a run under NABLA_BLAS=1 (the
        # clang pass of make test) would hand to the BLAS: that moves open
        # all-reduces on between ops only.
        env=()
        [ $check = progress ] && env=(-x NABLA_BLAS=0)
        mpirun_ $np "${env[@]}" "$build/tests/mpi_check" $check >"$out/$check" 2>&1 || rc=$?
        case $check in equal) n=$((np * 4)) ;; shard | progress) n=$np ;; mismatch) n=$((np * 2)) ;; big) n=$((np * 4)) ;; esac
        expect "$check, $np ranks" $n "$out/$check" $rc
    done
done
for check in big equal; do
    rc=0
    mpirun_ 3 -x NABLA_COMM_SHM=0 "$build/tests/mpi_check" $check >"$out/$check" 2>&1 || rc=$?
    case $check in equal) n=12 ;; big) n=12 ;; esac
    expect "$check, 3 ranks, the ring" $n "$out/$check" $rc
done
for np in 2 3; do
    mkdir -p "$out/train$np"
    rc=0
    mpirun_ $np "$build/tests/mpi_check" train "$out/train$np" >"$out/train" 2>&1 || rc=$?
    expect "train, $np ranks" $np "$out/train" $rc
done
# Rank 1 leaves without joining: mpirun itself fails, the others report.
mpirun_ 3 "$build/tests/mpi_check" timeout >"$out/timeout" 2>&1 || true
expect "timeout, 3 ranks" 3 "$out/timeout" any

data=$(sed -n 's/^NABLA_DATA_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
if grep -Eq '^NABLA_(SANITIZE|TSAN):BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    echo "skipped: mnist_mlp --mpi in a sanitizer build (a minute of MNIST; the plain build runs it)"
elif [ -n "$data" ] && [ -d "$data/mnist" ]; then
    export NABLA_DATA=$data
    for mode in "" --eager; do
        one=$("$build/examples/mnist_mlp" --epochs 1 --quiet $mode | sed -n 's/^test accuracy: //p')
        rc=0
        mpirun_ 2 "$build/examples/mnist_mlp" --mpi --epochs 1 --quiet $mode >"$out/mnist" 2>&1 || rc=$?
        two=$(sed -n 's/^test accuracy: //p' "$out/mnist")
        shares=$(grep -c '^rank [01] of 2: 30000 of the 60000 training examples' "$out/mnist" || true)
        if [ $rc -eq 0 ] && [ -n "$one" ] && [ -n "$two" ] && [ "$shares" -eq 2 ] &&
            awk -v a="$one" -v b="$two" 'BEGIN { d = a - b; exit !(d < 0.002 && d > -0.002) }'; then
            echo "ok   mnist_mlp --mpi ${mode:-static}: 2 ranks $two, 1 process $one"; pass=$((pass + 1))
        else
            echo "FAIL mnist_mlp --mpi ${mode:-static}: 2 ranks '$two', 1 process '$one', shares printed $shares"
            cat "$out/mnist"; fail=$((fail + 1))
        fi
    done
else
    echo "skipped: mnist_mlp --mpi (no MNIST in the build's data folder, NABLA_DATA_DIR=${data:-none})"
fi
# ZeRO-1 (tests/mpi_zero_check.c): sharded optimiser = nb_ddp, 1/N of the state.
for np in 2 3; do
    rc=0
    mpirun_ $np "$build/tests/mpi_zero_check" >"$out/zero" 2>&1 || rc=$?
    expect "zero, $np ranks" $((np * 15)) "$out/zero" $rc
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
