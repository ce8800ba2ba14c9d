#!/usr/bin/env bash
# A rank lost in the middle of training (tests/mpi_check.c lost/resume,
# Open MPI on loopback; skipped, saying so, where mpirun or nabla's MPI
# support is missing). Three ranks train three epochs through nb_train
# with a checkpoint after each:
#  - rank 2 kills itself (SIGKILL) in the middle of epoch 2. Under plain
#    mpirun the job is ended by mpirun at once; under
#    `mpirun --enable-recovery` (the survivors are left running) ranks 0 and
#    1 fail within the 3 s timeout with nabla's error naming rank 2;
#  - rank 0 stops (SIGSTOP) in the middle of writing epoch 2's checkpoint
#    and is killed there: ranks 1 and 2 fail naming rank 0;
#  - each time the last checkpoint (epoch 1's) is whole, and resuming from
#    it on 3 ranks gives the uninterrupted run exactly, on 2 and 4 ranks (the
#    same global batch of 12, the shards following the new rank count) to
#    rounding, as it does one process's; the checkpoint is on rank 0's
#    disk only (nb_train sends it to the others);
#  - a damaged checkpoint fails on every rank, rank 0 saying why.
# Every mpirun runs under `timeout`: a rank that hangs fails the test.
set -euo pipefail
build=$1
src=$2
source "$(dirname "$0")/mpi_env.bash"
check=$build/tests/mpi_check
pass=0 fail=0
out=$(mktemp -d)
killer=
cleanup() {
    if [ -n "$killer" ]; then kill "$killer" 2>/dev/null || true; fi
    for f in "$out"/*/pid.*; do
        if [ -f "$f" ]; then kill -9 "$(cat "$f")" 2>/dev/null || true; fi
    done
    rm -rf "$out"
}
trap cleanup EXIT
mpirun_() { timeout 120 mpirun --oversubscribe --mca btl self,vader "$@"; }

verdict() { # NAME OK(0/1) LOG: also fails on a sanitizer's report in LOG
    if [ "$2" = 0 ] && ! grep -Eq 'Sanitizer|runtime error' "$3"; then echo "ok   $1"; pass=$((pass + 1))
    else echo "FAIL $1"; cat "$3"; fail=$((fail + 1)); fi
}

# lost NAME VICTIM [MPIRUN OPTION]: the lost run in $out/NAME.
lost() {
    local dir=$out/$1 victim=$2 t0 rc=0
    mkdir -p "$dir"
    t0=$(date +%s)
    NABLA_COMM_TIMEOUT=3 mpirun_ ${3:-} -np 3 "$check" lost "$dir" "$victim" >"$dir/log" 2>&1 || rc=$?
    echo $(( $(date +%s) - t0 )) >"$dir/seconds"
    [ "$rc" -ne 124 ] || echo "mpirun timed out: a rank hung" >>"$dir/log"
    echo "$rc" >"$dir/rc"
}

# The writer stopped inside its save: kill it there, as a crash would.
kill_stopped_writer() {
    local pidf=$1 pid state
    for _ in $(seq 600); do
        if [ -f "$pidf" ]; then
            pid=$(cat "$pidf")
            state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
            if [ "$state" = T ]; then kill -9 "$pid"; return; fi
        fi
        sleep 0.1
    done
}

# resume NAME NP: resumes NAME's checkpoint (a copy of it) on NP ranks.
resume() {
    local dir=$out/$1.resume$2 rc=0
    mkdir -p "$dir"
    cp "$out/$1/ckpt.safetensors" "$dir/"
    mpirun_ -np "$2" "$check" resume "$dir" 3 >"$dir/log" 2>&1 || rc=$?
    oks=$(grep -c ': ok ' "$dir/log" || true)
    ok=1; [ $rc -eq 0 ] && [ "$oks" -eq "$2" ] && ! grep -q FAIL "$dir/log" && ok=0
    verdict "$1: its epoch-1 checkpoint resumed on $2 ranks: $(sed -n 's/^rank 0: ok //p' "$dir/log")" $ok "$dir/log"
}

# Plain mpirun ends the whole job when a rank is killed.
lost plain 2
ok=1
[ "$(cat "$out/plain/rc")" -ne 0 ] && [ "$(cat "$out/plain/rc")" -ne 124 ] &&
    grep -q 'rank 2 .*signal 9' "$out/plain/log" && ok=0
verdict "plain mpirun: rank 2 killed in epoch 2 ends the job in $(cat "$out/plain/seconds")s" $ok "$out/plain/log"

# With the survivors left running, nabla names the lost rank.
lost killed 2 --enable-recovery
oks=$(grep -c ': ok stopped' "$out/killed/log" || true)
ok=1; [ "$oks" -eq 2 ] && ! grep -q FAIL "$out/killed/log" && [ "$(cat "$out/killed/rc")" -ne 124 ] && ok=0
verdict "rank 2 killed in epoch 2: ranks 0 and 1 stop within the timeout naming it ($(cat "$out/killed/seconds")s in all)" \
    $ok "$out/killed/log"
grep -m1 '^rank 0: ok' "$out/killed/log" || true

mkdir -p "$out/writer"
kill_stopped_writer "$out/writer/pid.0" &
killer=$!
lost writer 0 --enable-recovery
wait "$killer" || true
killer=
oks=$(grep -c ': ok stopped' "$out/writer/log" || true)
ok=1
[ "$oks" -eq 2 ] && ! grep -q FAIL "$out/writer/log" && [ "$(cat "$out/writer/rc")" -ne 124 ] &&
    ls "$out/writer"/ckpt.safetensors.tmp.* >/dev/null 2>&1 && ok=0
verdict "rank 0 killed while writing epoch 2's checkpoint: ranks 1 and 2 name it, its temporary file is left" \
    $ok "$out/writer/log"

# A damaged checkpoint: rank 0 says why, the others that rank 0 could not
# resume, and nobody waits for anybody.
mkdir -p "$out/damaged"
head -c 100 "$out/killed/ckpt.safetensors" >"$out/damaged/ckpt.safetensors"
rc=0
mpirun_ -np 2 "$check" resume "$out/damaged" 3 >"$out/damaged/log" 2>&1 || rc=$?
ok=1
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q '^rank 0: FAIL resumed: train: resuming from' "$out/damaged/log" &&
    grep -q '^rank 1: FAIL resumed: train: rank 0 could not resume' "$out/damaged/log" && ok=0
verdict "a damaged checkpoint fails on every rank at once" $ok "$out/damaged/log"

for np in 3 2 4; do resume killed $np; done
resume plain 3
resume writer 2
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
