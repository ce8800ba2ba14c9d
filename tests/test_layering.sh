#!/usr/bin/env bash
# The layers of src/ only point down: no object of a lower layer refers to a
# symbol defined in a higher one. The order is read from docs/design.md (its
# "Layer order" line), so the document and the tree cannot drift apart.
#
#   tests/test_layering.sh BUILD_DIR SOURCE_DIR
#
# Reads every object file of the library and of the nabla tool with `nm`,
# maps each defined symbol to the layer (the folder under src/) of its
# object, and prints every reference that goes up, as
#   src/ops/foo.c -> nb_bar (src/program/baz.c): ops sits below program
set -euo pipefail
build=$1
src=$2
command -v nm >/dev/null || { echo "nm is not installed (binutils)"; exit 1; }

order=$(sed -n 's/^Layer order[^`]*`\([^`]*\)`.*/\1/p' "$src/docs/design.md" | head -1 | tr -d ' ')
[ -n "$order" ] || { echo "docs/design.md has no 'Layer order' line"; exit 1; }
IFS='<' read -r -a layers <<< "$order"

objs=$(find "$build/CMakeFiles/nabla_obj.dir/src" "$build/CMakeFiles/nabla_cli.dir/src" -name '*.o' 2>/dev/null | sort)
[ -n "$objs" ] || { echo "no object files under $build/CMakeFiles (build first)"; exit 1; }

# One line per symbol: D|U layer object symbol.
table=$(for o in $objs; do
    rel=${o#*/src/}
    layer=${rel%%/*}
    file=src/${rel%.o}
    nm -P "$o" | awk -v l="$layer" -v f="$file" '
        $2 == "U" || $2 == "w" { print "U", l, f, $1; next }
        $2 ~ /^[TDRBCVW]$/     { print "D", l, f, $1 }'
done)

echo "$table" | awk -v order="${layers[*]}" '
    BEGIN { n = split(order, ls, " "); for (i = 1; i <= n; i++) rank[ls[i]] = i }
    $1 == "D" { where[$4] = $2; file[$4] = $3; next }
    { uses[++u] = $0 }
    END {
        bad = 0
        for (i = 1; i <= u; i++) {
            split(uses[i], f, " ")
            if (!(f[2] in rank)) { if (!(f[2] in told)) { print "src/" f[2] "/ is in no layer of docs/design.md"; told[f[2]] = 1; bad++ } continue }
            if (!(f[4] in where)) continue
            d = where[f[4]]
            if ((d in rank) && rank[d] > rank[f[2]]) {
                print f[3] " -> " f[4] " (" file[f[4]] "): " f[2] " sits below " d
                bad++
            }
        }
        printf "layering: %d layers, %d upward references\n", n, bad
        if (bad) { print "0 passed, 1 failed"; exit 1 }
        print "1 passed, 0 failed"
    }'
