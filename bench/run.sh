#!/usr/bin/env bash
# Runs a nabla benchmark and its PyTorch twin side by side, on the same
# machine, in one go, and prints the ratio per case (PyTorch / nabla: above 1,
# nabla is better, whether the figure is time or memory).
#
#   bench/run.sh [train|eager|transforms|lstm|ddp|memory|transformer|contention|gpt2] [SCALE]
#     train       one training step of the MNIST MLP (batch 1 to 256), LeNet, a 784-1024-1024-10 MLP at
#                 batch 128 and a conv net with batch norm on 3x32x32 images (default); at 1 thread
#                 and at all threads, rounds alternating the sides; GFLOP/s against the FMA peak
#     eager       the eager tape: per recorded op, per backward node, a 100k-op chain; in rounds
#                 alternating the sides (NABLA_BENCH_ROUNDS, default 5)
#     transforms  jvp and hvp of a tanh MLP loss, the full Hessian of a small MLP loss, jacrev and
#                 jacfwd of a 64-in 64-out tanh MLP (beside functorch)
#     lstm        one training step of char_rnn's LSTM (hidden 128, 64 steps, batch 32,
#                 vocabulary 65) beside nn.LSTM; at 1 thread and at all threads, in rounds as train
#     ddp         data-parallel training (needs Open MPI), Adam: samples per second of the
#                 784-512-512-10 MLP at a global batch of 256 and LeNet at 128, static, eager
#                 (nb_ddp) and eager with ZeRO-1, at 1 and 2 processes of one thread each, the
#                 2-process speed-up, the all-reduce time per step, the part of it that overlaps
#                 backward and the time waited after it; beside PyTorch's DDP (gloo); with
#                 NABLA_BENCH_BUSY=1, all of it while a busy loop holds one core
#     memory      the memory of one training step (SGD) of the 784-1024-1024-10 MLP at batch 128,
#                 a 12-layer 784-wide MLP at batch 256, char_rnn's LSTM and LeNet at batch 64:
#                 the resident set's rise at its peak (nabla, nabla with sqrt(n) recomputation,
#                 PyTorch; one process per case and side, one thread), nabla's own count, the
#                 activations kept for backward, and the time recomputation costs
#     transformer one training step (AdamW) of a pre-norm transformer block (batch 16, sequence 64,
#                 width 128, 4 heads, GELU MLP 512) beside nn.TransformerEncoderLayer, and of
#                 char_gpt's default model beside the same GPT in PyTorch; static and eager, at 1
#                 thread and at all threads, rounds alternating the sides; GFLOP/s against the
#                 FMA peak that bench/fma_peak measures
#     contention  the train cases and an MNIST epoch (examples/mnist_mlp, beside the same MLP in
#                 PyTorch) with a busy loop of the script's own holding one core, as on a machine
#                 someone else is using: at the default thread count and at one thread, rounds
#                 alternating the sides; default / 1 thread is at most 1.1 when the team degrades
#                 gracefully (NABLA_DATA: where mnist/ is, default ../shared/data)
#     gpt2        one training step (AdamW) of GPT-2 124M at batch 4, sequence 64 (bench_gpt2), static
#                 and eager, beside the same GPT-2 in PyTorch from the same weights (a safetensors
#                 file): the first three losses must agree to 1e-4; at 1 thread and at all threads,
#                 rounds alternating the sides (NABLA_BENCH_ROUNDS, default 2); GFLOP/s against the
#                 FMA peak, peak RSS of each process (NABLA_BENCH_GPT2_MODEL: another size or L,H,C,T,V)
#     SCALE  < 1 runs fewer training steps (a quick look)
#
# Uses build-bench/ (a Release build) and Debian's python3-torch if present.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-train}
scale=${2:-1}
threads=${NABLA_BENCH_THREADS:-$(nproc)}
case "$which" in
    train) target=bench_train; torch_script=bench/bench_torch.py; torch_args=("$scale" "$threads") ;;
    eager) target=bench_eager; torch_script=bench/bench_eager_torch.py; torch_args=() ;;
    transforms) target=bench_transforms; torch_script=bench/bench_transforms_torch.py; torch_args=() ;;
    lstm) target=bench_lstm; torch_script=bench/bench_lstm_torch.py; torch_args=("$scale") ;;
    ddp) target=bench_ddp; torch_script=bench/bench_ddp_torch.py; torch_args=() ;;
    memory) target=bench_memory; torch_script=bench/bench_memory_torch.py; torch_args=() ;;
    transformer) target=bench_transformer; torch_script=bench/bench_transformer_torch.py; torch_args=() ;;
    contention) target="bench_train mnist_mlp"; torch_script=bench/bench_torch.py; torch_args=() ;;
    gpt2) target=bench_gpt2; torch_script=bench/bench_gpt2_torch.py; torch_args=() ;;
    *) echo "usage: bench/run.sh [train|eager|transforms|lstm|ddp|memory|transformer|contention|gpt2] [SCALE]" >&2; exit 2 ;;
esac
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DNABLA_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench -j"$(nproc)" --target $target >/dev/null
python=/usr/bin/python3
[ -x "$python" ] || python=python3

# Debian's PyTorch uses whatever libblas.so.3 points to; the reference BLAS
# makes it ten times slower than it should be, which would flatter nabla.
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
case "$blas" in
    *openblas*|*blis*|*mkl*) ;;
    *) case "$which" in train|lstm) echo "bench: warning: libblas.so.3 is the reference BLAS ($blas); PyTorch's" \
            "times will be unfairly slow. apt-get install libopenblas0-pthread gives it OpenBLAS." >&2 ;; esac ;;
esac
# An OpenBLAS older than the CPU does not know it and falls back to its
# generic SSE3 kernels ("Prescott"): Debian 12's 0.3.21 on a Xeon of model
# 207 ran a 512^3 product at 17 GFLOP/s against 100 with its SkylakeX ones.
# Unless the caller chose, both sides get the kernels the CPU can run.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ "$(OPENBLAS_VERBOSE=2 "$python" -c 'import torch' 2>&1 | sed -n 's/^Core: //p' | head -1)" = Prescott ]; then
    if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
    [ -n "${OPENBLAS_CORETYPE:-}" ] && echo "bench: OpenBLAS does not know this CPU and would use its generic kernels;" \
        "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE gives it the ones the CPU runs" >&2
fi
blas_note=${blas:-unknown}${OPENBLAS_CORETYPE:+ (OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE)}

# Per case (field 2), the line with the smallest time (field 4) among the files.
best_of() {
    awk '{ if (!($2 in best) || $4 < best[$2]) { best[$2] = $4; line[$2] = $0 } }
         END { for (k in line) print line[k] }' "$@"
}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# For the modes that alternate the sides in rounds at one thread and at all
# threads: have_torch, rounds (NABLA_BENCH_ROUNDS, 3), tlist (the thread
# counts) and the FMA peaks at those counts before the rounds.
rounds_setup() {
    cmake --build build-bench -j"$(nproc)" --target fma_peak >/dev/null
    have_torch=0
    "$python" -c 'import torch' 2>/dev/null && have_torch=1
    [ $have_torch = 1 ] || echo "bench: PyTorch is not installed (apt-get install python3-torch); nabla's figures only" >&2
    rounds=${NABLA_BENCH_ROUNDS:-3}
    tlist="1"
    [ "$threads" -gt 1 ] && tlist="1 $threads"
    peaks=$(./build-bench/bench/fma_peak $tlist)
}

# ddp: rounds of (nabla 1 process, nabla 2, PyTorch 1, PyTorch 2), so that
# drift hits every side; per case the median over the rounds and its range.
if [ "$which" = ddp ]; then
    command -v mpirun >/dev/null || { echo "bench ddp: mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 1; }
    ./build-bench/nabla --version 2>/dev/null | grep -q '^features:.* mpi' || cmake --build build-bench --target nabla_cli >/dev/null
    ./build-bench/nabla --version | grep -q '^features:.* mpi' || { echo "bench ddp: nabla was built without MPI" >&2; exit 1; }
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
    have_torch=0
    "$python" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null && have_torch=1
    rounds=${NABLA_BENCH_ROUNDS:-3}
    busy_note=""
    if [ "${NABLA_BENCH_BUSY:-0}" = 1 ]; then # a machine shared with other work
        sh -c 'while :; do :; done' &
        busy=$!
        trap 'kill $busy 2>/dev/null; rm -rf "$out"' EXIT
        busy_note="; a busy loop held one core throughout"
    fi
    for r in $(seq "$rounds"); do
        for np in 1 2; do
            mpirun --bind-to core --mca btl self,vader -np $np ./build-bench/bench/bench_ddp "$scale" | sed "s/^/nabla /" >> "$out/all.txt"
            [ $have_torch = 1 ] && "$python" bench/bench_ddp_torch.py $np "$scale" | sed "s/^/torch /" >> "$out/all.txt"
        done
    done
    echo "ddp benchmark (Adam): samples/s at a global batch of 256 (MLP) and 128 (LeNet), split over P processes"
    echo "of one thread each; medians of $rounds rounds that alternate nabla and PyTorch (min-max); $(nproc --all) cores$busy_note."
    echo "speed-up = 2 processes / 1; vs torch = nabla / PyTorch DDP (gloo) samples/s at 2 processes;"
    echo "comm: ms per step while an all-reduce was open; overlap: the part before backward ended; hidden = overlap / comm;"
    echo "wait: ms per step blocked after backward (all at 2 processes, medians); nabla's all-reduces through"
    echo "shared memory (nb_comm_transport; NABLA_COMM_SHM=0 bench/run.sh ddp: through MPI messages, the ring);"
    echo "*_apart: the static case with no communication, each process stepping alone on its share of the batch,"
    echo "started together, a step the slowest's: the most speed-up that this machine leaves any all-reduce"
    awk '
        function median(k,   n, i, j, t, v) { n = split(vals[k], v, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
                                             lo[k] = v[1]; hi[k] = v[n]; return v[int((n + 1) / 2)] }
        function mid(s,   n, i, j, t, v) { n = split(s, v, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
                                             return n ? v[int((n + 1) / 2)] : 0 }
        { k = $1 " " $3 " " $5; vals[k] = vals[k] " " $9; comm[k] = comm[k] " " $11; ov[k] = ov[k] " " $13; hid[k] = hid[k] " " ($15 == "" ? 0 : $15); wt[k] = wt[k] " " ($17 == "" ? 0 : $17)
          seen[$3] = 1; if (!($3 in order)) order[$3] = ++nc; names[order[$3]] = $3 }
        END {
            printf "%-14s %22s %22s %8s %22s %8s %7s %7s %7s %7s\n", "case", "nabla 1 proc", "nabla 2 procs", "speed-up", "torch 2 procs", "vs torch", "comm", "overlap", "hidden", "wait"
            for (i = 1; i <= nc; i++) {
                c = names[i]; a = "nabla " c " 1"; b = "nabla " c " 2"; m = c; sub(/_.*/, "", m); t = "torch " m "_eager 2"
                ma = median(a); mb = median(b)
                tm = (t in vals) && c !~ /_apart$/ ? median(t) : 0
                ts = tm ? sprintf("%.0f (%.0f-%.0f)", tm, lo[t], hi[t]) : "-"
                printf "%-14s %22s %22s %8.2f %22s %8s %7.3f %7.3f %6.0f%% %7.3f\n", c, sprintf("%.0f (%.0f-%.0f)", ma, lo[a], hi[a]),
                       sprintf("%.0f (%.0f-%.0f)", mb, lo[b], hi[b]), mb / ma, ts, tm ? sprintf("%.2f", mb / tm) : "-", mid(comm[b]), mid(ov[b]), mid(hid[b]), mid(wt[b])
            }
            for (i = 1; i <= nc; i++) { c = names[i]; t1 = "torch " c " 1"; t2 = "torch " c " 2"
                if (t1 in vals) printf "PyTorch DDP %s: 1 process %.0f, 2 processes %.0f samples/s, speed-up %.2f\n", c, median(t1), median(t2), median(t2) / median(t1) }
        }' "$out/all.txt"
    exit 0
fi
# contention: a busy loop holds one core for the whole run; rounds of
# (nabla at the default thread count, nabla at 1, PyTorch default, PyTorch
# at 1), each a process of its own; per case the median and range.
if [ "$which" = contention ]; then
    data=${NABLA_DATA:-../shared/data}
    [ -d "$data/mnist" ] || { echo "bench contention: no MNIST in $data/mnist (set NABLA_DATA)" >&2; exit 1; }
    have_torch=0
    "$python" -c 'import torch' 2>/dev/null && have_torch=1
    rounds=${NABLA_BENCH_ROUNDS:-3}
    sh -c 'while :; do :; done' &
    busy=$!
    trap 'kill $busy 2>/dev/null; rm -rf "$out"' EXIT
    epoch_ms() { # the epoch's time from mnist_mlp's samples/s (its training loop alone)
        NABLA_DATA=$data "$@" ./build-bench/examples/mnist_mlp --epochs 1 2>&1 | tr '\r' '\n' |
            sed -n 's/^epoch 1\/1: .*, \([0-9.]*\) samples\/s$/\1/p' | awk '{ printf "case mnist_epoch median_ms %.1f\n", 60000e3 / $1 }'
    }
    for r in $(seq "$rounds"); do
        for t in default 1; do
            n=(env -u NABLA_NUM_THREADS -u OMP_NUM_THREADS)
            [ $t = 1 ] && n=(env NABLA_NUM_THREADS=1)
            "${n[@]}" ./build-bench/bench/bench_train "$scale" | sed "s/^/nabla $t /" >> "$out/all.txt"
            epoch_ms "${n[@]}" | sed "s/^/nabla $t /" >> "$out/all.txt"
            if [ $have_torch = 1 ]; then
                tt=0
                [ $t = 1 ] && tt=1
                env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS "$python" bench/bench_torch.py "$scale" $tt | sed "s/^/torch $t /" >> "$out/all.txt"
                env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS "$python" bench/bench_mnist_torch.py "$data" $tt | sed "s/^/torch $t /" >> "$out/all.txt"
            fi
        done
    done
    echo "contention benchmark: one core of $(nproc) held by a busy loop; one training step (the train cases) and"
    echo "one MNIST epoch (mnist_epoch: examples/mnist_mlp's training loop), ms; medians of $rounds rounds alternating"
    echo "the sides (min-max); default = the thread count each library picks by itself; slowdown = default / 1 thread"
    awk '
        function med(k,   n, i, j, t, v) { n = split(vals[k], v, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
                                         lo = v[1]; hi = v[n]; return v[int((n + 1) / 2)] }
        { k = $1 " " $2 " " $4; vals[k] = vals[k] " " $6; if ($1 == "nabla" && !($4 in seen)) { seen[$4] = 1; names[++nc] = $4 } }
        END {
            printf "%-13s %22s %22s %8s | %22s %22s %8s\n", "case", "nabla default", "nabla 1 thread", "slowdown", "torch default", "torch 1 thread", "slowdown"
            for (i = 1; i <= nc; i++) {
                c = names[i]; d = med("nabla default " c); ds = sprintf("%.4g (%.4g-%.4g)", d, lo, hi)
                o = med("nabla 1 " c); os = sprintf("%.4g (%.4g-%.4g)", o, lo, hi)
                td = "-"; to = "-"; tr = "-"
                if (("torch default " c) in vals) { a = med("torch default " c); td = sprintf("%.4g (%.4g-%.4g)", a, lo, hi)
                    b = med("torch 1 " c); to = sprintf("%.4g (%.4g-%.4g)", b, lo, hi); tr = sprintf("%.2f", a / b) }
                printf "%-13s %22s %22s %8.2f | %22s %22s %8s\n", c, ds, os, d / o, td, to, tr
            }
        }' "$out/all.txt"
    exit 0
fi
# memory: rounds of (nabla, nabla recomputing, PyTorch) per case, each a
# process of its own; per case the median over the rounds.
if [ "$which" = memory ]; then
    export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
    have_torch=0
    "$python" -c 'import torch' 2>/dev/null && have_torch=1
    rounds=${NABLA_BENCH_ROUNDS:-3}
    for r in $(seq "$rounds"); do
        for c in mlp1024 mlp12 lstm lenet; do
            ./build-bench/bench/bench_memory $c | sed "s/^/nabla /" >> "$out/all.txt"
            ./build-bench/bench/bench_memory $c --recompute | sed "s/^/recompute /" >> "$out/all.txt"
            [ $have_torch = 1 ] && "$python" bench/bench_memory_torch.py $c | sed "s/^/torch /" >> "$out/all.txt"
        done
    done
    echo "memory benchmark: one training step (SGD), one thread; medians of $rounds rounds alternating the sides"
    echo "rss: the resident set's rise at the peak of a step over where it stood once model and batch existed (MB);"
    echo "own: nabla's count, the peak of its temporaries; act: activations kept for backward (MB);"
    echo "ratio = nabla rss / PyTorch rss (at most 0.7 is the goal); recompute: sqrt(n) segments"
    awk '
        function med(k,   n, i, j, t, v) { n = split(vals[k], v, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
                                         return v[int((n + 1) / 2)] }
        { side = $1; c = $3; sub(/_recompute$/, "", c); if (!(c in seen)) { seen[c] = 1; names[++nc] = c }
          vals[side " " c " rss"] = vals[side " " c " rss"] " " $5; vals[side " " c " own"] = vals[side " " c " own"] " " $7
          vals[side " " c " ms"] = vals[side " " c " ms"] " " $9; vals[side " " c " act"] = vals[side " " c " act"] " " $11 }
        END {
            printf "%-9s %10s %9s %9s %10s %8s | %10s %9s %9s %9s | %10s %9s\n", "case", "nabla rss", "own", "act", "torch rss", "ratio",
                   "recomp rss", "own", "act", "act cut", "step ms", "+time"
            for (i = 1; i <= nc; i++) {
                c = names[i]; nr = med("nabla " c " rss") / 1024; tr = ("torch " c " rss" in vals) ? med("torch " c " rss") / 1024 : 0
                na = med("nabla " c " act") / 1024; ra = med("recompute " c " act") / 1024
                nm = med("nabla " c " ms"); rm = med("recompute " c " ms")
                printf "%-9s %10.1f %9.1f %9.1f %10s %8s | %10.1f %9.1f %9.1f %8.0f%% | %10.2f %8.0f%%\n", c, nr, med("nabla " c " own") / 1024, na,
                       tr ? sprintf("%.1f", tr) : "-", tr ? sprintf("%.2f", nr / tr) : "-", med("recompute " c " rss") / 1024,
                       med("recompute " c " own") / 1024, ra, (na > 0 ? 100 * (1 - ra / na) : 0), nm, 100 * (rm / nm - 1)
            }
            for (i = 1; i <= nc; i++) { c = names[i]; if (("torch " c " ms") in vals) printf "PyTorch %s: %.2f ms a step\n", c, med("torch " c " ms") }
        }' "$out/all.txt"
    exit 0
fi
# transformer: rounds of (nabla, PyTorch) per model and thread count, each a
# process of its own; per case the median over the rounds and its range.
# PyTorch runs in both of its thread layouts (BLAS threads under one intra-op
# thread, or intra-op threads over a one-thread BLAS) and keeps the better.
if [ "$which" = transformer ]; then
    # PyTorch runs on GNU OpenMP, whose idle threads spin for 300000 rounds
    # by default, which halves a two-thread step here. Unless the caller
    # chose, it gets a shorter spin (nabla's own team spins for 0.1 ms).
    [ -n "${OMP_WAIT_POLICY:-}" ] || export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-30000}
    spin="GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-unset} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}"
    rounds_setup
    for r in $(seq "$rounds"); do
        for m in block gpt; do
            for t in $tlist; do
                OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=1 ./build-bench/bench/bench_transformer $m "$scale" |
                    sed "s/^/nabla $t /" >> "$out/all.txt"
                if [ $have_torch = 1 ]; then
                    a=$(OPENBLAS_NUM_THREADS=$t "$python" bench/bench_transformer_torch.py $m "$scale" 1 | awk '{ print $4 }')
                    b=$a
                    [ "$t" -gt 1 ] && b=$(OPENBLAS_NUM_THREADS=1 "$python" bench/bench_transformer_torch.py $m "$scale" $t | awk '{ print $4 }')
                    echo "torch $t case $m median_ms $(awk -v a="$a" -v b="$b" 'BEGIN { print (a < b ? a : b) }')" >> "$out/all.txt"
                fi
            done
        done
    done
    echo "transformer benchmark: one training step (AdamW); medians of $rounds rounds alternating nabla and PyTorch"
    echo "(min-max); $(nproc) cores; ratio = PyTorch ms / nabla ms (PyTorch: nn.TransformerEncoderLayer for both"
    echo "modes, its better thread layout); GFLOP/s counts the step's multiply-adds twice; $spin"
    echo "$peaks" | awk '{ printf "FMA peak (bench/fma_peak, %s): %s GFLOP/s at %s thread(s)\n", $3, $7, $5 }'
    echo "$peaks" | awk '{ print "peak", $5, $7 }' >> "$out/all.txt"
    awk '
        function med(k,   n, i, j, t, v) { n = split(vals[k], v, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
                                         lo[k] = v[1]; hi[k] = v[n]; return v[int((n + 1) / 2)] }
        $1 == "peak" { peak[$2] = $3; next }
        { side = $1; t = $2; c = $4; k = side " " t " " c; vals[k] = vals[k] " " $6; if (side == "nabla") { gf[c] = $10; if (!(c " " t in seen)) { seen[c " " t] = 1; rows[++n] = c " " t } } }
        END {
            printf "%-14s %7s %22s %22s %7s %9s %7s\n", "case", "threads", "nabla ms", "torch ms", "ratio", "GFLOP/s", "% peak"
            for (i = 1; i <= n; i++) {
                split(rows[i], p, " "); c = p[1]; t = p[2]; m = c; sub(/_.*/, "", m)
                a = med("nabla " t " " c); la = lo["nabla " t " " c]; ha = hi["nabla " t " " c]
                tk = "torch " t " " m; ts = "-"; ratio = "-"
                if (tk in vals) { b = med(tk); ts = sprintf("%.2f (%.2f-%.2f)", b, lo[tk], hi[tk]); ratio = sprintf("%.2f", b / a) }
                g = gf[c] / (a / 1000)
                printf "%-14s %7s %22s %22s %7s %9.1f %6.0f%%\n", c, t, sprintf("%.2f (%.2f-%.2f)", a, la, ha), ts, ratio, g, 100 * g / peak[t]
            }
        }' "$out/all.txt"
    exit 0
fi
# gpt2: one set of first weights (bench_gpt2 init), then rounds of (nabla
# static, nabla eager, PyTorch) per thread count, each a process of its own
# that loads them; PyTorch keeps the better of its two thread layouts, as
# for transformer. Every run's first three losses must match PyTorch's to
# 1e-4 (else the figures compare different computations and the bench
# fails). Per case the median over the rounds and their range; GFLOP/s is
# bench_gpt2's count (6 N B T for the parameters that multiply, wpe aside,
# plus attention's 12 L B T^2 C) over the median time.
if [ "$which" = gpt2 ]; then
    [ -n "${OMP_WAIT_POLICY:-}" ] || export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-30000}
    rounds_setup
    rounds=${NABLA_BENCH_ROUNDS:-2}
    steps=$(awk -v s="$scale" 'BEGIN { n = int(3 * s); print (n < 1 ? 1 : n) }')
    weights=$out/gpt2.safetensors
    OMP_NUM_THREADS=$threads ./build-bench/bench/bench_gpt2 init "$weights" "${NABLA_BENCH_GPT2_MODEL:-124M}"
    for r in $(seq "$rounds"); do
        for t in $tlist; do
            for mode in static eager; do
                OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=1 ./build-bench/bench/bench_gpt2 $mode "$weights" "$steps" 4 64 |
                    sed "s/^/nabla $t /" >> "$out/all.txt"
            done
            if [ $have_torch = 1 ]; then
                OPENBLAS_NUM_THREADS=$t "$python" bench/bench_gpt2_torch.py "$weights" "$steps" 4 64 1 > "$out/torch_a.txt"
                cp "$out/torch_a.txt" "$out/torch_b.txt"
                [ "$t" -gt 1 ] && OPENBLAS_NUM_THREADS=1 "$python" bench/bench_gpt2_torch.py "$weights" "$steps" 4 64 "$t" > "$out/torch_b.txt"
                cat "$out/torch_a.txt" "$out/torch_b.txt" | awk '{ if (!best || $8 + 0 < best) { best = $8 + 0; line = $0 } } END { print line }' |
                    sed "s/^/torch $t /" >> "$out/all.txt"
            fi
        done
    done
    echo "gpt2 benchmark: one training step (forward, loss, backward, AdamW update) of GPT-2 ${NABLA_BENCH_GPT2_MODEL:-124M},"
    echo "B=4, T=64; medians of $rounds rounds alternating nabla and PyTorch (range of the rounds), each round's figure"
    echo "the median of $steps timed steps; $(nproc) cores; PyTorch's BLAS: $blas_note; its better thread layout"
    echo "GFLOP/s: 6 N B T (N: parameters but wpe) + 12 L B T^2 C per step over the median time; rss: peak RSS per process"
    echo "$peaks" | awk '{ printf "FMA peak (bench/fma_peak, %s): %s GFLOP/s at %s thread(s)\n", $3, $7, $5 }'
    echo "$peaks" | awk '{ print "peak", $5, $7 }' >> "$out/all.txt"
    awk '
        function med(k,   n, i, j, t, v) { n = split(vals[k], v, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
                                         lo[k] = v[1]; hi[k] = v[n]; return v[int((n + 1) / 2)] }
        function ad(x) { return x < 0 ? -x : x }
        $1 == "peak" { peak[$2] = $3; next }
        { t = $2; c = $4; k = t " " c; vals[k] = vals[k] " " $10; vals[k " rss"] = vals[k " rss"] " " $20; gf = $18
          if (!(c in seen)) { seen[c] = 1; names[++nc] = c }; if (!(t in tseen)) { tseen[t] = 1; ts[++nt] = t }
          runs[++nr] = c " " t " " $6 " " $7 " " $8; if ($1 == "torch" && !have_ref) { have_ref = 1; ref[1] = $6; ref[2] = $7; ref[3] = $8 } }
        END {
            worst = 0; bad = 0
            for (i = 1; i <= nr; i++) { split(runs[i], p, " "); for (j = 1; j <= 3; j++) { d = ad(p[2 + j] - ref[j]); if (d > worst) worst = d; if (have_ref && d > 1e-4) { bad = 1; printf "LOSSES DISAGREE: %s at %s thread(s): %s %s %s, PyTorch %s %s %s\n", p[1], p[2], p[3], p[4], p[5], ref[1], ref[2], ref[3] } } }
            if (have_ref) printf "first three losses (PyTorch): %s %s %s; every run within %.2g of them\n", ref[1], ref[2], ref[3], worst
            printf "%-12s %7s %24s %24s %7s %9s %7s %9s %9s\n", "case", "threads", "nabla ms (range)", "torch ms (range)", "ratio", "GFLOP/s", "% peak", "rss MB", "torch rss"
            for (i = 1; i <= nc; i++) for (m = 1; m <= nt; m++) {
                c = names[i]; t = ts[m]; k = t " " c; if (c == "gpt2_torch" || !(k in vals)) continue
                a = med(k); s = "-"; ratio = "-"; tr = "-"; tk = t " gpt2_torch"
                if (tk in vals) { b = med(tk); s = sprintf("%.0f (%.0f-%.0f)", b, lo[tk], hi[tk]); ratio = sprintf("%.2f", b / a); tr = sprintf("%.0f", med(tk " rss")) }
                g = gf / (a / 1000)
                printf "%-12s %7s %24s %24s %7s %9.1f %6.0f%% %9.0f %9s\n", c, t, sprintf("%.0f (%.0f-%.0f)", a, lo[k], hi[k]), s, ratio, g, 100 * g / peak[t], med(k " rss"), tr
            }
            exit bad
        }' "$out/all.txt"
    exit $?
fi
# train and lstm: rounds alternating nabla and PyTorch, at one thread and at
# all threads, each a process of its own; per case and thread count the
# median over the rounds and its range, and for train the GFLOP/s of the step
# beside the FMA peak that bench/fma_peak measures. PyTorch at several
# threads keeps, each round, the better of its two thread layouts: BLAS
# threads under one intra-op thread, or one BLAS thread under intra-op
# threads (both at once oversubscribe the cores). nn.LSTM's one step stands
# beside both of nabla's (eager, static).
if [ "$which" = train ] || [ "$which" = lstm ]; then
    rounds_setup
    for r in $(seq "$rounds"); do
        for t in $tlist; do
            OMP_NUM_THREADS=$t ./build-bench/bench/$target "$scale" | sed "s/^/nabla $t /" >> "$out/all.txt"
            if [ $have_torch = 1 ]; then
                OPENBLAS_NUM_THREADS=$t "$python" "$torch_script" "$scale" 1 > "$out/torch_a.txt"
                cp "$out/torch_a.txt" "$out/torch_b.txt"
                [ "$t" -gt 1 ] && OPENBLAS_NUM_THREADS=1 "$python" "$torch_script" "$scale" "$t" > "$out/torch_b.txt"
                best_of "$out/torch_a.txt" "$out/torch_b.txt" | sed "s/^/torch $t /" |
                    awk '$4 == "lstm" { a = $0; b = $0; sub(/ lstm /, " lstm_eager ", a); sub(/ lstm /, " lstm_static ", b)
                                        print a; print b; next } { print }' >> "$out/all.txt"
            fi
        done
    done
    peaks_after=$(./build-bench/bench/fma_peak $tlist)
    echo "$which benchmark: one training step; medians of $rounds rounds alternating nabla and PyTorch"
    echo "(each round's figure a median of its timings); $(nproc) cores; PyTorch's BLAS: $blas_note"
    echo "FMA peak (bench/fma_peak), GFLOP/s before: $(echo "$peaks" | awk '{ printf "%s thread(s) %s  ", $5, $7 }')"
    echo "                                    after: $(echo "$peaks_after" | awk '{ printf "%s thread(s) %s  ", $5, $7 }')"
    echo "ratio = PyTorch / nabla (above 1: nabla is faster); GFLOP/s of nabla's step and its share of the peak"
    printf "%s\n%s\n" "$peaks" "$peaks_after" | awk '{ print "peak", $5, $7 }' > "$out/peaks.txt"
    awk '
        function med(k,   n, i, j, t, v) { n = split(vals[k], v, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
                                         lo = v[1]; hi = v[n]; return v[int((n + 1) / 2)] }
        $1 == "peak" { if (!($2 in peak) || $3 > peak[$2]) peak[$2] = $3; next }
        { side = $1; t = $2; c = $4; if (side == "nabla" && !(c in seen)) { seen[c] = 1; names[++nc] = c }
          if (!(t in tseen)) { tseen[t] = 1; ts[++nt] = t }
          vals[side " " t " " c] = vals[side " " t " " c] " " $6; if ($9 == "gflop") gf[c] = $10 }
        END {
            printf "%-14s %7s %24s %24s %7s %9s %6s\n", "case", "threads", "nabla ms (range)", "torch ms (range)", "ratio", "GFLOP/s", "peak"
            for (i = 1; i <= nc; i++) for (k = 1; k <= nt; k++) {
                c = names[i]; t = ts[k]; a = "nabla " t " " c; b = "torch " t " " c
                if (!(a in vals)) continue
                ma = med(a); la = lo; ha = hi; s = ""; r = "-"
                if (b in vals) { mb = med(b); s = sprintf("%.4g (%.4g-%.4g)", mb, lo, hi); r = sprintf("%.2f", mb / ma) }
                g = "-"; p = "-"
                if (c in gf) { g = sprintf("%.1f", gf[c] / (ma / 1000)); if (t in peak) p = sprintf("%.0f%%", 100 * g / peak[t]) }
                printf "%-14s %7s %24s %24s %7s %9s %6s\n", c, t, sprintf("%.4g (%.4g-%.4g)", ma, la, ha), s, r, g, p
            }
        }' "$out/peaks.txt" "$out/all.txt"
    exit 0
fi
have_torch=0
if "$python" -c 'import torch' 2>/dev/null; then have_torch=1; fi
# Per case of a file of "case NAME VALUE" lines from several rounds: its
# median and range, as "case NAME MEDIAN LOW HIGH", in the order of the cases.
summarize() {
    awk '!seen[$2]++ { print $2 }' "$1" | while read -r name; do
        awk -v n="$name" '$2 == n { print $3 }' "$1" | sort -g |
            awk -v n="$name" '{ v[NR] = $1 } END { print "case", n, v[int((NR + 1) / 2)], v[1], v[NR] }'
    done
}
rounds=1
if [ "$which" = transforms ]; then
    OMP_NUM_THREADS=$threads ./build-bench/bench/bench_transforms > "$out/nabla.txt"
else
    # The eager figures swing by half from one run to the next on a shared
    # host: rounds alternate the sides (A B A B ...) so that drift hits both,
    # and the table gives each side's median round and the range.
    rounds=${NABLA_BENCH_ROUNDS:-5}
    : > "$out/nabla_rounds.txt"
    : > "$out/torch_rounds.txt"
    for ((r = 0; r < rounds; r++)); do
        OMP_NUM_THREADS=1 ./build-bench/bench/bench_eager >> "$out/nabla_rounds.txt"
        if [ $have_torch = 1 ]; then "$python" "$torch_script" "${torch_args[@]}" >> "$out/torch_rounds.txt"; fi
    done
    summarize "$out/nabla_rounds.txt" > "$out/nabla.txt"
    if [ $have_torch = 1 ]; then summarize "$out/torch_rounds.txt" > "$out/torch.txt"; fi
fi
if [ $have_torch = 1 ]; then
    if [ "$which" = transforms ]; then
        OPENBLAS_NUM_THREADS=$threads "$python" "$torch_script" 1 > "$out/torch_a.txt"
        OPENBLAS_NUM_THREADS=1 "$python" "$torch_script" "$threads" > "$out/torch_b.txt"
        # Per case, the fastest of torch.autograd.functional and functorch,
        # each in its better thread layout; the table names which won.
        awk '{ if (!($2 in best) || $3 < best[$2]) { best[$2] = $3; who[$2] = ($1 == "fcase" ? "functorch" : "autograd") } }
             END { for (k in best) print "case", k, best[k], who[k] }' \
            "$out/torch_a.txt" "$out/torch_b.txt" > "$out/torch.txt"
    fi
else
    echo "bench: PyTorch is not installed (apt-get install python3-torch); nabla's figures only" >&2
fi
if [ "$rounds" -gt 1 ]; then
    echo "$which benchmark, medians of 7 within a run; the median run of $rounds, alternating the sides, (lowest-highest)"
    echo "$(nproc) cores; PyTorch's BLAS: $blas_note"
    printf '%-30s %26s %26s %7s\n' case nabla torch ratio
    while read -r _ name value lo hi; do
        nv=$(printf '%.4g (%.4g-%.4g)' "$value" "$lo" "$hi")
        if [ $have_torch = 1 ]; then
            read -r tv tlo thi < <(awk -v n="$name" '$2 == n { print $3, $4, $5 }' "$out/torch.txt")
            printf '%-30s %26s %26s %7.2f\n' "$name" "$nv" "$(printf '%.4g (%.4g-%.4g)' "$tv" "$tlo" "$thi")" \
                "$(awk -v a="$tv" -v b="$value" 'BEGIN { print a / b }')"
        else
            printf '%-30s %26s %26s %7s\n' "$name" "$nv" - -
        fi
    done < "$out/nabla.txt"
    exit 0
fi
echo "$which benchmark, medians of 7; $(nproc) cores; PyTorch's BLAS: $blas_note"
case "$which" in
    transforms) echo "(PyTorch: the faster of its two thread layouts, per case)" ;;
esac
printf '%-34s %12s %12s %8s\n' case nabla torch ratio
while read -r _ name value _; do
    if [ $have_torch = 1 ]; then
        tv=$(awk -v n="$name" '$2 == n { print $3 }' "$out/torch.txt")
        who=""
        [ "$which" = transforms ] && who=$(awk -v n="$name" '$2 == n { print $4 }' "$out/torch.txt")
        printf '%-34s %12.4f %12.4f %8.2f %s\n' "$name" "$value" "$tv" "$(awk -v a="$tv" -v b="$value" 'BEGIN { print a / b }')" "$who"
    else
        printf '%-34s %12.4f %12s %8s\n' "$name" "$value" - -
    fi
done < "$out/nabla.txt"
