#!/usr/bin/env bash
# examples/char_gpt end to end on a tiny corpus this test writes, as a static
# program, eagerly, and with the head tied to the token embedding: a few training steps of a small GPT, the validation
# loss lines (finite, below a uniform guess), a checkpoint saved with
# --checkpoint, and --sample-only --checkpoint writing a sample of the
# requested length, made of the corpus's characters and equal to the one
# written after training; and the errors: a missing checkpoint file,
# --sample-only without --checkpoint, a prime outside the vocabulary.
set -euo pipefail
build=$1
gpt=$build/examples/char_gpt
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq 1 80); do echo "the quick brown fox jumps over the lazy dog $i times."; done > "$out/corpus.txt"
small=(--layers 2 --embed 16 --heads 2 --block 16 --batch 4 --lr 0.005 --warmup 5)
for mode in static eager tied; do
    flag=""
    [ $mode = eager ] && flag=--eager
    [ $mode = tied ] && flag=--tied
    "$gpt" $flag --data "$out/corpus.txt" --steps 40 --eval-every 20 "${small[@]}" --sample 60 --prime "the " \
        --checkpoint "$out/$mode.safetensors" > "$out/log.txt"
    grep -q '^step 20: validation loss [0-9.]* nats/char$' "$out/log.txt" \
        || { cat "$out/log.txt"; echo "$mode: no validation step"; exit 1; }
    grep -q '^step 40/40: train loss [0-9.]* | [0-9]* ms/step, [0-9]* s$' "$out/log.txt" \
        || { cat "$out/log.txt"; echo "$mode: no progress line"; exit 1; }
    loss=$(sed -n 's/^validation loss: \([0-9.]*\) nats\/char.*after 40 steps.*/\1/p' "$out/log.txt")
    [ -n "$loss" ] || { cat "$out/log.txt"; echo "$mode: no final validation loss"; exit 1; }
    # Finite and below a uniform guess among its 39 characters (log 39 = 3.66 nats).
    awk -v l="$loss" 'BEGIN { exit !(l > 0 && l < 3.3) }' || { echo "$mode: validation loss $loss"; exit 1; }
    grep -q "^saved the model to $out/$mode.safetensors$" "$out/log.txt" \
        || { cat "$out/log.txt"; echo "$mode: no checkpoint line"; exit 1; }
    [ -s "$out/$mode.safetensors" ] || { echo "$mode: no checkpoint file"; exit 1; }
    ls "$out" | grep -q '\.tmp\.' && { echo "$mode: a temporary file was left"; exit 1; }
    trained=$(sed -n '/^sample (temperature 0.8):$/,$p' "$out/log.txt" | tail -n +2)

    # The saved model alone: its shape and vocabulary come from the file.
    "$gpt" --checkpoint "$out/$mode.safetensors" --sample-only --sample 60 --prime "the " > "$out/sample.txt"
    tied=""
    [ $mode = tied ] && tied=", tied"
    grep -q "^$out/$mode.safetensors: 2 layers, embedding 16, 2 heads, block 16$tied, 39 characters$" "$out/sample.txt" \
        || { cat "$out/sample.txt"; echo "$mode: no model line"; exit 1; }
    sample=$(sed -n '/^sample (temperature 0.8):$/,$p' "$out/sample.txt" | tail -n +2)
    case "$sample" in "the "*) ;; *) echo "$mode: the sample does not start with the prime: $sample"; exit 1 ;; esac
    printf '%s' "$sample" | tr -d '\n' | grep -q '^[a-z0-9 .]*$' \
        || { echo "$mode: odd characters in: $sample"; exit 1; }
    # The prime, 60 characters (newlines among them) and a newline.
    n=$(sed -n '/^sample (temperature 0.8):$/,$p' "$out/sample.txt" | tail -n +2 | wc -c)
    [ "$n" -eq 65 ] || { echo "$mode: sample of $n bytes: $sample"; exit 1; }
    [ "$sample" = "$trained" ] || { printf '%s: the loaded model samples\n%s\nnot\n%s\n' $mode "$sample" "$trained"; exit 1; }
    # Top-k sampling: the likeliest character only, the same whatever the seed.
    a=$("$gpt" --checkpoint "$out/$mode.safetensors" --sample-only --sample 30 --prime "the " --top-k 1 --seed 1)
    b=$("$gpt" --checkpoint "$out/$mode.safetensors" --sample-only --sample 30 --prime "the " --top-k 1 --seed 2)
    [ "$a" = "$b" ] || { echo "$mode: --top-k 1 depends on the seed"; exit 1; }
done

# Errors: clear messages and a nonzero exit.
source "$(dirname "$0")/expect_fail.bash"
expect_fail "char_gpt: --checkpoint: safetensors '$out/none.safetensors': cannot open: No such file or directory" \
    "$gpt" --checkpoint "$out/none.safetensors" --sample-only
expect_fail "--sample-only needs --checkpoint FILE" "$gpt" --sample-only
expect_fail "char_gpt: --prime: text encode: byte 84 ('T') at position 0 is not in the vocabulary" \
    "$gpt" --checkpoint "$out/static.safetensors" --sample-only --prime "THE"
expect_fail "char_gpt: --prime: text encode: byte 84 ('T') at position 0 is not in the vocabulary" \
    "$gpt" --data "$out/corpus.txt" --steps 1 "${small[@]}" --prime "THE"
expect_fail "char_gpt: --checkpoint: cannot write $out/no/m.safetensors: directory $out/no: No such file or directory" \
    "$gpt" --data "$out/corpus.txt" --steps 1 "${small[@]}" --checkpoint "$out/no/m.safetensors"
expect_fail "--heads 3 must divide --embed 16" "$gpt" --data "$out/corpus.txt" --embed 16 --heads 3
echo "1 passed, 0 failed"
