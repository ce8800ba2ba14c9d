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
#
# A first pass reads every #include "..." in src/ and include/: a file's layer
# is its folder under src/, a public header's the one docs/design.md's
# "Header layers" line gives it, and an include of a higher layer fails, as
#   src/ops/foo.h:5: includes nabla/vmap.h (transforms), but ops sits below transforms
# (a header the map leaves out fails too). The pass checks itself first on a
# planted upward include.
set -euo pipefail
build=$1
src=$2
command -v nm >/dev/null || { echo "nm is not installed (binutils)"; exit 1; }

# Prints every upward include under $1 (a tree with docs/design.md).
upward_includes() {
    local root=$1 order map
    order=$(sed -n 's/^Layer order[^`]*`\([^`]*\)`.*/\1/p' "$root/docs/design.md" | head -1 | tr -d ' ')
    map=$(sed -n 's/^Header layers[^`]*`\([^`]*\)`.*/\1/p' "$root/docs/design.md" | head -1)
    [ -n "$map" ] || { echo "docs/design.md has no 'Header layers' line"; return 0; }
    (cd "$root" && find src include -name '*.[ch]' 2>/dev/null | sort |
        xargs -r grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' || true) |
    awk -v root="$root" -v order="$order" -v map="$map" '
    BEGIN {
        n = split(order, ls, "<"); for (i = 1; i <= n; i++) rank[ls[i]] = i
        m = split(map, groups, ";")
        for (i = 1; i <= m; i++) {
            split(groups[i], kv, ":"); l = kv[1]; gsub(/ /, "", l)
            k = split(kv[2], hs, " "); for (j = 1; j <= k; j++) header_layer["nabla/" hs[j]] = l
        }
    }
    function normalise(p,   a, k, i, o, out) {
        k = split(p, a, "/"); o = 0
        for (i = 1; i <= k; i++) { if (a[i] == "..") o--; else if (a[i] != ".") out[++o] = a[i] }
        p = out[1]; for (i = 2; i <= o; i++) p = p "/" out[i]
        return p
    }
    function layer_of(path,   a) {
        if (path ~ /^include\//) { sub(/^include\//, "", path); return (path in header_layer) ? header_layer[path] : "?" }
        split(path, a, "/"); return a[2]
    }
    {
        file = $0; sub(/:.*/, "", file)
        rest = substr($0, length(file) + 2); line = rest; sub(/:.*/, "", line)
        inc = rest; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
        dir = file; sub(/\/[^\/]*$/, "", dir)
        # Resolved as the compiler does: beside the file, then src/ (-I src).
        if (inc ~ /^nabla\//) target = "include/" inc
        else {
            target = normalise(dir "/" inc)
            if (system("test -f \"" root "/" target "\"") != 0) target = "src/" inc
        }
        from = layer_of(file); to = layer_of(target)
        if (to == "?") { print file ":" line ": includes " inc ", a header in no layer of docs/design.md"; next }
        if (from == "?" || !(from in rank) || !(to in rank)) next
        if (rank[to] > rank[from]) print file ":" line ": includes " inc " (" to "), but " from " sits below " to
    }'
}

# The pass must catch an include planted upward, with file, line and layers.
plant=$(mktemp -d); trap 'rm -rf "$plant"' EXIT
mkdir -p "$plant/docs" "$plant/src/core"
cp "$src/docs/design.md" "$plant/docs/"
printf '#include <stdio.h>\n#include "nabla/vmap.h"\n' > "$plant/src/core/planted.c"
caught=$(upward_includes "$plant")
want='src/core/planted.c:2: includes nabla/vmap.h (transforms), but core sits below transforms'
[ "$caught" = "$want" ] || { echo "include pass self-check: planted upward include not reported as"; echo "  $want"; echo "got:"; echo "$caught"; echo "0 passed, 1 failed"; exit 1; }

found=$(upward_includes "$src" | sed '/^$/d')
[ -z "$found" ] || echo "$found"
echo "includes: $(echo -n "$found" | grep -c '^') upward"
[ -z "$found" ] || { echo "0 passed, 1 failed"; exit 1; }

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
