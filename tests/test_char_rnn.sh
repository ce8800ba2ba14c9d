#!/usr/bin/env bash
# examples/char_rnn end to end on a tiny corpus this test writes, as a static
# program and eagerly: a few training steps of a small LSTM, the validation
# loss line, and a sample
# made of the corpus's characters; and a prime with a character the corpus
# lacks, refused with a message.
set -euo pipefail
build=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq 1 40); do echo "the quick brown fox jumps over the lazy dog $i times."; done > "$out/corpus.txt"
# A short run in each mode (the static program is the default).
for mode in static eager; do
    flag=""
    [ $mode = eager ] && flag=--eager
    "$build/examples/char_rnn" $flag --data "$out/corpus.txt" --steps 60 --eval-every 30 --lr 0.02 --hidden 16 \
        --embed 8 --seq 8 --batch 4 --sample 60 --prime "the " > "$out/log.txt"
    grep -q '^step 30: validation loss [0-9.]* nats/char$' "$out/log.txt" \
        || { cat "$out/log.txt"; echo "$mode: no validation step"; exit 1; }
    loss=$(sed -n 's/^validation loss: \([0-9.]*\) nats\/char.*after 60 steps.*/\1/p' "$out/log.txt")
    [ -n "$loss" ] || { cat "$out/log.txt"; echo "$mode: no final validation loss"; exit 1; }
    # Well below a uniform guess among its 39 characters (log 39 = 3.7 nats).
    awk -v l="$loss" 'BEGIN { exit !(l > 0 && l < 2.8) }' || { echo "$mode: validation loss $loss"; exit 1; }
    sample=$(sed -n '/^sample (temperature 0.8):$/,$p' "$out/log.txt" | tail -n +2)
    case "$sample" in "the "*) ;; *) echo "$mode: the sample does not start with the prime: $sample"; exit 1 ;; esac
    # Every sampled character comes from the corpus.
    printf '%s' "$sample" | tr -d '\n' | grep -q '^[a-z0-9 .]*$' \
        || { echo "$mode: odd characters in: $sample"; exit 1; }
    [ "$(printf '%s' "$sample" | tr -d '\n' | wc -c)" -eq 64 ] || { echo "$mode: sample length: $sample"; exit 1; }
done

if "$build/examples/char_rnn" --data "$out/corpus.txt" --steps 1 --hidden 4 --embed 4 --seq 4 --batch 2 \
    --prime "THE" > "$out/err.txt" 2>&1; then
    echo "a prime outside the vocabulary did not fail"; exit 1
fi
grep -q "char_rnn: --prime: text encode: byte 84 ('T') at position 0 is not in the vocabulary" "$out/err.txt" \
    || { cat "$out/err.txt"; exit 1; }
echo "1 passed, 0 failed"
