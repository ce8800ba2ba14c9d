#!/usr/bin/env bash
# Every C block of README.md is a complete program that compiles and runs.
#
#   tests/test_readme.sh BUILD_DIR SOURCE_DIR
#
# Each block fenced as ```c is compiled as a consumer of this build would
# compile it (the source tree's public headers, BUILD_DIR/libnabla.a and the
# private libraries nabla.pc lists; see tests/test_install.sh), with
# -Wall -Wextra -Werror, and run in a folder of its own; it must exit 0. A
# word after the language says what else a block needs:
#   ```c onnx   a build with ONNX (NABLA_ONNX_PROTO in CMakeCache.txt), else skipped;
#   ```c mpi    run by `mpirun -np 2` (compiled with mpicc when there is one),
#               skipped where mpirun or nabla's MPI support is missing.
# A failure names the block by the line of README.md its code starts on.
set -uo pipefail
build=$1
src=$2
readme=$src/README.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -f "$build/libnabla.a" ] && [ -f "$build/nabla.pc" ] || { echo "no libnabla.a or nabla.pc in $build (build first)"; exit 1; }
# The consumers use nabla's own compiler (a library built with clang wants clang's runtime).
cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
cc=${cc:-cc}
read -r -a libs <<< "$(sed -n 's/^Libs.private: //p' "$build/nabla.pc")"
have_onnx=0
grep -q '^NABLA_ONNX_PROTO:FILEPATH=/' "$build/CMakeCache.txt" && have_onnx=1
have_mpi=0
command -v mpirun >/dev/null && "$build/nabla" --version 2>/dev/null | grep -q '^features:.* mpi' && have_mpi=1

# Each block into $tmp/<line>.c, where <line> is its first line of code (a
# #line directive makes the compiler's messages point into README.md);
# $tmp/list gets "<line> <kind>" per block (kind: plain, onnx, mpi, ...).
awk -v dir="$tmp" '
    !inb && /^```c( |$)/ { inb = 1; start = NR + 1; f = dir "/" start ".c"; printf "#line %d \"README.md\"\n", start > f
                           print start, ($2 == "" ? "plain" : $2) > (dir "/list"); next }
    inb && /^```/ { inb = 0; close(f); next }
    inb { print > f }
' "$readme"
[ -s "$tmp/list" ] || { echo "README.md has no \`\`\`c block"; exit 1; }

pass=0 fail=0 skip=0
while read -r line kind; do
    name="README.md:$line"
    case $kind in
        plain) ;;
        onnx) if [ $have_onnx = 0 ]; then echo "skipped $name: this build has no ONNX (libonnx-dev)"; skip=$((skip + 1)); continue; fi ;;
        mpi) if [ $have_mpi = 0 ]; then echo "skipped $name: no mpirun, or this build has no MPI"; skip=$((skip + 1)); continue; fi ;;
        *) echo "FAIL $name: unknown block kind '$kind' (c, c onnx or c mpi)"; fail=$((fail + 1)); continue ;;
    esac
    dir=$tmp/run$line
    mkdir -p "$dir"
    compiler=$cc
    [ "$kind" = mpi ] && command -v mpicc >/dev/null && compiler=mpicc
    if ! "$compiler" -std=c11 -Wall -Wextra -Wno-unused-parameter -Werror -I"$src/include" "$tmp/$line.c" \
        -o "$dir/prog" "$build/libnabla.a" "${libs[@]}" -lm >"$dir/log" 2>&1; then
        echo "FAIL $name: does not compile"; cat "$dir/log"; fail=$((fail + 1)); continue
    fi
    rc=0
    if [ "$kind" = mpi ]; then
        (cd "$dir" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
            timeout 120 mpirun --oversubscribe --mca btl self,vader -np 2 ./prog) >"$dir/log" 2>&1 || rc=$?
    else
        (cd "$dir" && timeout 120 ./prog) >"$dir/log" 2>&1 || rc=$?
    fi
    if [ $rc -ne 0 ]; then
        echo "FAIL $name: exit status $rc"; cat "$dir/log"; fail=$((fail + 1)); continue
    fi
    echo "ok   $name ($kind): $(head -c 200 "$dir/log" | head -1)"
    pass=$((pass + 1))
done < "$tmp/list"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
