#!/usr/bin/env bash
# Runs every fuzzer of fuzz/ for SECONDS over its seed corpus (`make fuzz`
# builds them and calls this). Usage: fuzz/run.sh BUILD_DIR [SECONDS] [NAME...]
# Seeds are written afresh to BUILD_DIR/seeds/<name> by fuzz_seeds; what a
# fuzzer finds new goes to BUILD_DIR/corpus/<name> (kept between runs), and a
# crashing, leaking or hanging input to BUILD_DIR/artifacts/<name>/. Exits
# non-zero when any fuzzer found something.
# With --check, only says whether clang can link a libFuzzer harness.
set -uo pipefail

if [ "${1:-}" = "--check" ]; then
    command -v clang >/dev/null 2>&1 || exit 1
    dir=$(mktemp -d) || exit 1
    printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' >"$dir/h.c"
    clang -fsanitize=fuzzer,address,undefined "$dir/h.c" -o "$dir/h" >/dev/null 2>&1
    rc=$?
    rm -rf "$dir"
    exit $rc
fi

build=${1:?usage: fuzz/run.sh BUILD_DIR [SECONDS] [NAME...]}
seconds=${2:-30}
shift $(( $# >= 2 ? 2 : 1 ))
names=("$@")
if [ ${#names[@]} = 0 ]; then
    for f in "$build"/fuzz/fuzz_*; do
        n=$(basename "$f")
        [ "$n" = fuzz_seeds ] || names+=("${n#fuzz_}")
    done
fi

rm -rf "$build/seeds"
"$build/fuzz/fuzz_seeds" "$build/seeds" || { echo "fuzz: writing the seed corpora failed"; exit 1; }

passed=0 failed=0 found=()
for n in "${names[@]}"; do
    mkdir -p "$build/corpus/$n" "$build/artifacts/$n"
    log="$build/artifacts/$n/log.txt"
    # -timeout: an input that takes this long is a hang, a finding like a crash.
    # Leaks are detected (ASan's LeakSanitizer) and fail the run too.
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$build/fuzz/fuzz_$n" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/artifacts/$n/" "$build/corpus/$n" "$build/seeds/$n" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    if [ $rc = 0 ]; then
        echo "fuzz: $n: ok, ${execs:-?} runs in ${seconds}s, corpus $(ls "$build/corpus/$n" | wc -l) files"
        passed=$((passed + 1))
    else
        echo "fuzz: $n: FAILED (exit $rc); the log is $log:"
        grep -E 'ERROR|SUMMARY|check failed|Test unit written' "$log" | head -20 | sed 's/^/    /'
        failed=$((failed + 1))
        found+=("$n")
    fi
done
echo "$passed passed, $failed failed${found:+ (${found[*]})}"
[ $failed = 0 ]
