#!/usr/bin/env bash
# The public headers compile, warning-free, as C11 and as C++11, C++17 and
# C++20, with gcc and with clang: nabla/nabla.h, and every header of
# include/nabla/ on its own (so that each includes what it uses). A C++
# program includes them too, and a later standard's keywords (C++20's
# `requires`, `concept`) are names a C header may not take.
# tests/test_install.sh builds and runs programs against the installed
# headers with the library's own compiler; this is the compile matrix only.
#
#   tests/test_headers.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

c_stds="c11"
cxx_stds="c++11 c++17 c++20"
failed=0 checked=0

# compile COMPILER LANG STD HEADER: one translation unit that includes HEADER.
compile() {
    local cc=$1 lang=$2 std=$3 header=$4 ext=c
    [ "$lang" = c++ ] && ext=cpp
    # (The typedef: ISO C wants a declaration in every translation unit, and
    # nabla/export.h declares nothing.)
    printf '#include "%s"\ntypedef int tu_declares_something;\n' "$header" > "$tmp/tu.$ext"
    checked=$((checked + 1))
    if ! "$cc" -x "$lang" -std="$std" -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$src/include" \
        "$tmp/tu.$ext" 2> "$tmp/err"; then
        echo "FAIL: $cc -std=$std: $header"
        sed 's/^/    /' "$tmp/err" | head -20
        failed=$((failed + 1))
    fi
}

# each COMPILER LANG STDS: every header (nabla/nabla.h, which includes the
# others, among them), in each standard.
each() {
    local cc=$1 lang=$2 stds=$3
    if ! command -v "$cc" >/dev/null; then
        echo "skipped: $cc is not installed"
        return
    fi
    for std in $stds; do
        for h in "$src"/include/nabla/*.h; do
            compile "$cc" "$lang" "$std" "nabla/$(basename "$h")"
        done
    done
}

each gcc c "$c_stds"
each g++ c++ "$cxx_stds"
each clang c "$c_stds"
each clang++ c++ "$cxx_stds"

echo "headers: $checked compiles, $failed failed"
if [ "$failed" -gt 0 ]; then echo "0 passed, 1 failed"; exit 1; fi
echo "1 passed, 0 failed"
