#!/usr/bin/env bash
# The shared library exports exactly the functions that the public headers
# declare with NB_API: nothing internal leaks (every export is nb_-prefixed
# and declared), and nothing declared is missing; and the headers mention no
# nb_ name they do not declare. The declarations are read
# through the preprocessor, so the ones a list makes (nabla/ops.h from
# nabla/elementwise_ops.h) count too.
#
#   tests/test_abi.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
lib=$build/libnabla.so
[ -f "$lib" ] || { echo "no $lib (build first)"; exit 1; }
command -v nm >/dev/null || { echo "nm is not installed (binutils)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# (Names starting with a dot are the compiler's, as clang's OpenMP lock
# .gomp_critical_user_.reduction.var.)
nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^_\(init\|fini\)$' | grep -v '^\.' | sort -u > "$tmp/exported"
# Each NB_API becomes a marker; the name is the identifier just before the
# first '(' after it.
${CC:-cc} -E -P -DNB_API=NB_EXPORT_MARK -I"$src/include" "$src/include/nabla/nabla.h" | tr '\n' ' ' |
    grep -o 'NB_EXPORT_MARK[^(;]*(' | sed -E 's/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*) *\($/\1/' |
    sort -u > "$tmp/declared"

# A prototype in a public header without NB_API would be neither exported
# nor counted above: look for one.
unmarked=$(grep -nE '^[A-Za-z_][A-Za-z0-9_ *]*[ *]nb_[a-z0-9_]+ *\(' "$src"/include/nabla/*.h |
           grep -vE '^[^:]*:[0-9]+:(static|typedef|NB_API|extern) ' || true)

# The headers are the documentation: every nb_ name they mention, in a
# comment too, must be something they declare (a function, type, enum or
# macro), so that no comment points at a function that is gone.
${CC:-cc} -E -P -I"$src/include" "$src/include/nabla/nabla.h" | grep -o '\bnb_[A-Za-z0-9_]*' > "$tmp/known"
grep -ho '#define [Nn][Bb]_[A-Za-z0-9_]*' "$src"/include/nabla/*.h | awk '{print $2}' >> "$tmp/known"
sort -u "$tmp/known" -o "$tmp/known"
grep -ho '\bnb_[a-z0-9_]*[a-z0-9]\b' "$src"/include/nabla/*.h | sort -u > "$tmp/mentioned"
dangling=$(comm -23 "$tmp/mentioned" "$tmp/known")

extra=$(comm -23 "$tmp/exported" "$tmp/declared")
missing=$(comm -13 "$tmp/exported" "$tmp/declared")
unprefixed=$(grep -v '^nb_' "$tmp/declared" || true)
bad=0
[ -z "$dangling" ] || { echo "names the headers mention but do not declare:"; echo "$dangling" | sed 's/^/  /'; bad=1; }
[ -z "$unmarked" ] || { echo "public prototypes without NB_API:"; echo "$unmarked" | sed 's/^/  /'; bad=1; }
[ -z "$extra" ] || { echo "exported but declared in no public header:"; echo "$extra" | sed 's/^/  /'; bad=1; }
[ -z "$missing" ] || { echo "declared NB_API but not exported:"; echo "$missing" | sed 's/^/  /'; bad=1; }
[ -z "$unprefixed" ] || { echo "public functions without the nb_ prefix:"; echo "$unprefixed" | sed 's/^/  /'; bad=1; }
echo "abi: $(wc -l < "$tmp/exported") exported, $(wc -l < "$tmp/declared") declared"
if [ $bad = 1 ]; then echo "0 passed, 1 failed"; exit 1; fi
echo "1 passed, 0 failed"
