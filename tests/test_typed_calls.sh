#!/usr/bin/env bash
# nabla/ops.h's promise: every registered op (`nabla ops`) has a typed call
# nb_<op> declared in it, or is one of those its opening comment names as
# emitted by other calls (the *_grad ops, and the ops listed there). An op
# registered without either fails here, and so does a name in that list
# that is no registered op.
#
#   tests/test_typed_calls.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$build/nabla" ops | awk 'NF > 3 && $2 ~ /^vjp:/ {print $1}' | sort -u > "$tmp/ops"
[ -s "$tmp/ops" ] || { echo "nabla ops listed no op"; exit 1; }
# The typed calls, as test_abi.sh reads them: through the preprocessor, so
# the ones nabla/elementwise_ops.h makes count too.
${CC:-cc} -E -P -DNB_API=NB_EXPORT_MARK -I"$src/include" "$src/include/nabla/ops.h" | tr '\n' ' ' |
    grep -o 'NB_EXPORT_MARK[^(;]*(' | sed -E 's/.*[^A-Za-z0-9_]nb_([A-Za-z0-9_]*) *\($/\1/' | sort -u > "$tmp/typed"
# nb_constant emits assign_value (the name says what it gives).
echo assign_value >> "$tmp/typed"
sort -u "$tmp/typed" -o "$tmp/typed"
# The ops the opening comment's paragraph names, in parentheses.
awk '/registered ops/,/test_typed_calls.sh/' "$src/include/nabla/ops.h" | sed 's/^ *\* *//' | tr '\n' ' ' |
    { grep -o '([a-z0-9_, ]*)' || true; } | tr -d '()' | tr ', ' '\n\n' | { grep -v '^$' || true; } | sort -u > "$tmp/listed"
[ -s "$tmp/listed" ] || { echo "found no list of ops in nabla/ops.h's opening comment"; exit 1; }
comm -12 "$tmp/listed" "$tmp/ops" > "$tmp/elsewhere"
grep '_grad$' "$tmp/ops" >> "$tmp/elsewhere" || true
sort -u "$tmp/typed" "$tmp/elsewhere" -o "$tmp/covered"
missing=$(comm -23 "$tmp/ops" "$tmp/covered")
# Every name in the list must be a registered op: a stale list fails too.
stale=$(comm -23 "$tmp/listed" "$tmp/ops" | tr '\n' ' ')
bad=0
[ -z "$missing" ] || { echo "registered ops with no typed call in nabla/ops.h and not in its list:"; echo "$missing" | sed 's/^/  /'; bad=1; }
[ -z "$stale" ] || { echo "nabla/ops.h lists ops that are not registered: $stale"; bad=1; }
echo "typed calls: $(wc -l < "$tmp/ops") ops, $(comm -12 "$tmp/ops" "$tmp/typed" | wc -l) with a typed call," \
     "$(comm -23 "$tmp/ops" "$tmp/typed" | wc -l) emitted by other calls"
if [ $bad = 1 ]; then echo "0 passed, 1 failed"; exit 1; fi
echo "1 passed, 0 failed"
