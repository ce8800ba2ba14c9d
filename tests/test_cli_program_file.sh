#!/usr/bin/env bash
# `nabla dot --example --save FILE` writes a program file; `nabla dump FILE`
# prints its main and startup programs; `nabla dot FILE` draws its main
# program as the example drawing, and Graphviz renders it. Bad files give an
# error naming the file, and exit status 1.
set -uo pipefail
build=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
nabla="$build/nabla"
passed=0
failed=0
check() { # description, command...
    local what=$1
    shift
    if "$@"; then passed=$((passed + 1)); else echo "FAIL: $what"; failed=$((failed + 1)); fi
}
contains() { grep -qF -- "$2" "$1" || { echo "  '$2' is missing from $1:"; sed 's/^/    /' "$1" | head -40; return 1; }; }

check "dot --example --save writes the file" "$nabla" dot --example --save "$out/p.nbp" -o "$out/example.dot"
check "the program file exists" test -s "$out/p.nbp"

check "dump succeeds" bash -c "'$nabla' dump '$out/p.nbp' > '$out/dump.txt'"
for want in 'main and startup programs' '== main program ==' '== startup program ==' \
            'images: float32[-1, 784] stop_gradient data' 'fc.w: float32[784, 10] persistable parameter' \
            '0: fc(Input=[images], W=[fc.w], Bias=[fc.b]) -> (Out=[fc_0.tmp_0])' 'mse_loss(' \
            '[backward fc.w -> fc.w@GRAD]' 'uniform_random() -> (Out=[fc.w]) {shape=[784, 10]' '[startup]'; do
    check "dump shows $want" contains "$out/dump.txt" "$want"
done
# The main program comes before the startup one.
check "main before startup" bash -c "[ \$(grep -n '== main' '$out/dump.txt' | cut -d: -f1) -lt \$(grep -n '== startup' '$out/dump.txt' | cut -d: -f1) ]"

check "dot FILE succeeds" bash -c "'$nabla' dot '$out/p.nbp' > '$out/p.dot'"
check "dot FILE draws what dot --example draws" cmp -s "$out/p.dot" "$out/example.dot"
for want in '"b0:images"' 'label="fc"' 'label="mse_loss"' 'label="fc.w@GRAD' 'shape=doublecircle'; do
    check "the drawing has $want" contains "$out/p.dot" "$want"
done
check "dot FILE -o OUT" "$nabla" dot "$out/p.nbp" -o "$out/q.dot"
check "-o wrote the same drawing" cmp -s "$out/q.dot" "$out/p.dot"
if command -v dot >/dev/null; then
    check "graphviz renders it" bash -c "'$nabla' dot '$out/p.nbp' | dot -Tpng -o '$out/p.png'"
    check "it is a PNG" bash -c "[ \"\$(head -c 4 '$out/p.png' | od -An -c | tr -d ' ')\" = '211PNG' ]"
else
    echo "FAIL: graphviz is not installed (make test installs it)"
    failed=$((failed + 1))
fi

# A forward-only example saved, then drawn: no gradient in it.
check "--forward --save" "$nabla" dot --example --forward --save "$out/f.nbp" -o /dev/null
check "forward-only dump" bash -c "'$nabla' dump '$out/f.nbp' > '$out/f.txt'"
check "no gradient in the forward-only program" bash -c "! grep -q '@GRAD' '$out/f.txt'"

# Errors: a damaged file, a missing one, wrong usage.
head -c 100 "$out/p.nbp" > "$out/cut.nbp"
"$nabla" dump "$out/cut.nbp" > /dev/null 2> "$out/err.txt"
check "dump of a damaged file exits 1" test $? -eq 1
check "the error names the file" contains "$out/err.txt" "cut.nbp"
"$nabla" dot "$out/missing.nbp" > /dev/null 2> "$out/err2.txt"
check "dot of a missing file exits 1" test $? -eq 1
check "the error names the missing file" contains "$out/err2.txt" "missing.nbp"
"$nabla" dump > /dev/null 2>&1
check "dump without a file exits 2" test $? -eq 2
"$nabla" dot "$out/p.nbp" --example > /dev/null 2>&1
check "dot with a file and --example exits 2" test $? -eq 2
"$nabla" dot "$out/p.nbp" --save "$out/x.nbp" > /dev/null 2>&1
check "--save without --example exits 2" test $? -eq 2
check "dump --help" bash -c "'$nabla' dump --help | grep -q 'usage: nabla dump FILE'"
check "dot --help mentions --save" bash -c "'$nabla' dot --help | grep -q -- '--save FILE'"
check "nabla --help lists dump" bash -c "'$nabla' --help | grep -q 'dump'"

# `nabla mem` runs one step of the example's training program and prints
# where its memory goes.
check "mem succeeds" bash -c "'$nabla' mem '$out/p.nbp' --batch 32 > '$out/mem.txt'"
for want in 'one step of the main program at batch 32' 'peak of temporaries' 'planned buffers (held)' \
            'one buffer per temporary' 'parameters and state (scope)' 'temporaries of backward ops' 'fc.w@GRAD'; do
    check "mem shows $want" contains "$out/mem.txt" "$want"
done
check "mem refuses a bad batch" bash -c "! '$nabla' mem '$out/p.nbp' --batch 0 2>/dev/null"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
