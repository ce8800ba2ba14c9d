# Sourced by the example tests: expect_fail MESSAGE COMMAND... runs the
# command, which must fail and print MESSAGE (a fixed string) on stdout or
# stderr; it uses the caller's $out folder for the output. (Named .bash, not
# .sh, so that CMake does not take it for a test.)
expect_fail() {
    local msg=$1
    shift
    if "$@" > "$out/err.txt" 2>&1; then
        echo "did not fail: $*"; exit 1
    fi
    grep -qF -- "$msg" "$out/err.txt" || { cat "$out/err.txt"; echo "wanted: $msg"; exit 1; }
    echo "ok   $*: $msg"
}
