#!/usr/bin/env bash
# The quick start in its short mode: it exits 0, prints the GLUE table exactly once, every
# "# effective config:" line has at most 160 characters, and the table's row holds a number
# in the SST column (the 6th cell of the first table's first row of results.md).
# Usage: quickstart_check.sh SOURCE_DIR RUN_DIR (TUPE_RUN_DIR must be RUN_DIR)
set -uo pipefail
src="$1" run="$2"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
bash "$src/launch/quickstart.sh" > "$log" 2>&1
rc=$?
cat "$log"
[ "$rc" = 0 ] || { echo "FAILED: quickstart.sh exited $rc"; exit 1; }
tables="$(grep -c '^# GLUE dev results' "$log")"
[ "$tables" = 1 ] || { echo "FAILED: the GLUE table was printed $tables times"; exit 1; }
long="$(awk '/^# effective config:/ && length($0) > 160' "$log")"
[ -z "$long" ] || { echo "FAILED: effective-config line over 160 characters: $long"; exit 1; }
awk -F'|' '!done && /^[|]---/ { getline; done = 1; v = $7; gsub(/ /, "", v); if (v ~ /^[0-9]+([.][0-9]+)?$/) ok = 1 }
           END { exit !ok }' "$run/glue/results.md" || { echo "FAILED: no SST number in $run/glue/results.md"; exit 1; }
echo "quickstart: ok (table printed once)"
