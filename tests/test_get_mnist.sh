#!/usr/bin/env bash
# shellcheck disable=SC2016 # the stand-in curl's code is meant literally
# scripts/get-mnist.sh without a network: a stand-in curl first fails (as
# with no network), then serves wrong bytes, then (when the build's data
# folder, CMake's NABLA_DATA_DIR, holds MNIST) the real files. The script
# must stop cleanly, delete what does not match its checksums, and keep what
# does.
set -uo pipefail
build=$1
src=$2
script=$src/scripts/get-mnist.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
check() { # check NAME COMMAND...: passes when the command succeeds
    local name=$1
    shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL $name"; fi
}
mkdir -p "$tmp/bin"
stub() { # the stand-in curl runs this body; $url and $file are its arguments
    printf '#!/usr/bin/env bash\nfile="" url=""\nwhile [ $# -gt 0 ]; do case $1 in -o) file=$2; shift 2;; -*) shift;; *) url=$1; shift;; esac; done\n%s\n' "$1" >"$tmp/bin/curl"
    chmod +x "$tmp/bin/curl"
}
run() { PATH="$tmp/bin:$PATH" bash "$script" "$@" >"$tmp/log" 2>&1; }

check "bash -n" bash -n "$script"
run; check "usage without DIR" test $? -eq 2
check "usage text" grep -q "usage: .* DIR \[mnist|fashion-mnist\]" "$tmp/log"
run "$tmp/d" cifar; check "unknown data set refused" test $? -eq 2
check "unknown data set named" grep -q "unknown data set 'cifar'" "$tmp/log"

stub 'echo "curl: (6) Could not resolve host" >&2; exit 6'
run "$tmp/d"; check "no network: fails" test $? -eq 1
check "no network: says so" grep -q "could not download https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz (no network" "$tmp/log"
check "no network: leaves nothing" test -z "$(ls -A "$tmp/d/mnist")"

stub 'echo "not the data" >"$file"'
run "$tmp/d" fashion-mnist; check "bad checksum: fails" test $? -eq 1
check "bad checksum: says so" grep -q "has sha256 .*, expected 3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84: deleted it" "$tmp/log"
check "bad checksum: file deleted" test -z "$(ls -A "$tmp/d/fashion-mnist")"

shared=$(sed -n 's/^NABLA_DATA_DIR:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)/mnist
if [ -f "$shared/train-images-idx3-ubyte.gz" ]; then
    stub "cp \"$shared/\$(basename \"\$url\")\" \"\$file\""
    echo "stale" >"$tmp/d/mnist/t10k-labels-idx1-ubyte.gz" # a wrong file already there
    run "$tmp/d"; check "real files: succeeds" test $? -eq 0
    check "real files: wrong one replaced" grep -q "t10k-labels-idx1-ubyte.gz has the wrong checksum" "$tmp/log"
    for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
        check "real files: $f" cmp -s "$shared/$f" "$tmp/d/mnist/$f"
    done
    stub 'exit 6'
    run "$tmp/d"; check "second run: nothing to download" test $? -eq 0
    check "second run: says so" grep -q "train-images-idx3-ubyte.gz is there already (checksum ok)" "$tmp/log"
else
    echo "(no MNIST files in the build's data folder: skipping the download of good files)"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
