#!/usr/bin/env bash
# The tree follows .clang-format: every C file of src/, include/, tests/,
# examples/, bench/ and fuzz/ is as clang-format 19 writes it (a macro's body
# is left as written: SkipMacroDefinitionBody). A file that does not fails the
# check, naming the command that formats it. Skipped, saying so, without
# clang-format 19 (other versions format otherwise); scripts/deps.sh --test
# installs it.
#
#   tests/test_format.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
src=${2:-$(dirname "$0")/..}
cd "$src"
cf=$(command -v clang-format-19 || command -v clang-format || true)
if [ -z "$cf" ] || ! "$cf" --version | grep -q 'version 19\.'; then
    echo "skipped: clang-format 19 is not installed (Debian 12's clang-format-19 package)"
    exit 0
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files 'src/*.[ch]' 'include/*.h' 'tests/*.[ch]' 'examples/*.[ch]' 'bench/*.[ch]' 'fuzz/*.[ch]')
else
    files=$(find src include tests examples bench fuzz -name '*.[ch]' | sort)
fi
bad=0
for f in $files; do
    if ! "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "$f does not follow .clang-format ($(basename "$cf") -i $f)"
        bad=$((bad + 1))
    fi
done
total=$(echo "$files" | wc -w)
echo "format: $((total - bad)) of $total files follow .clang-format ($("$cf" --version | grep -o 'version [0-9.]*'))"
[ $bad = 0 ]
