#!/usr/bin/env bash
# `tupe preprocess` throughput per input format, side by side: the same documents (mixed-english
# train.txt three times over, 106 MB, blank-line documents) as plain text, gzip, zstd, JSON lines, JSON lines gzip
# and JSON lines zstd (tests/data/make_format_inputs.py), each run ROUNDS times in turn
# (interleaved, so a load change hits every format alike); the best CPU time (user + system,
# steadier than wall time on a shared machine; of the whole process) of each, and its
# throughput (tokens per CPU second) as a share of plain text's, from the CPU time less that
# of the same command on a one-line file ("start": loading LibTorch and the vocabulary). The compressed files must write the same
# tokens as their uncompressed file (text and JSON lines differ by a few [CLS]/[SEP]: pieces
# are cut at byte offsets, and a piece ends its last sequence).
# Usage: bench/corpus_formats.sh [BUILD_DIR] [ROUNDS]   (default build, 3)
# Environment: TUPE_SHARED_DATA (default ../shared/data), TUPE_PYTHON (default python3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
rounds="${2:-3}"
data="${TUPE_SHARED_DATA:-$here/../shared/data}"
py="${TUPE_PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
src="$data/text/mixed-english/train.txt"
cat "$src" "$src" "$src" > "$work/source.txt"
"$py" "$here/tests/data/make_format_inputs.py" "$work/source.txt" "$work" me blank_line
rm "$work/source.txt"
printf 'a short line of text to measure the start-up\n' > "$work/me.start"
formats=(start txt txt.gz txt.zst jsonl jsonl.gz jsonl.zst)
declare -A best tokens
for ((r = 1; r <= rounds; ++r)); do
  for f in "${formats[@]}"; do
    out="$work/out-$f"
    TIMEFORMAT='%R %U %S'
    { time "$build/cli/tupe" preprocess --quiet --overwrite --input "$work/me.$f" --output "$out" \
      --tokenizer.vocab "$data/vocab/bert-base-uncased-vocab.txt" --preprocess.validation_ratio 0 > "$work/log" ; } 2> "$work/time"
    read -r wall user sys < "$work/time"
    secs=$(echo "$user + $sys" | bc -l)
    tok=$(grep '^wrote' "$work/log" | sed -E 's/.*\(([0-9]+) tokens\).*/\1/')
    [ -z "${tokens[$f]:-}" ] || [ "${tokens[$f]}" = "$tok" ] || { echo "FAIL: $f wrote $tok tokens, then ${tokens[$f]}"; exit 1; }
    tokens[$f]=$tok
    if [ -z "${best[$f]:-}" ] || [ "$(echo "$secs < ${best[$f]}" | bc -l)" = 1 ]; then best[$f]=$secs; fi
    printf 'round %d %-10s %6.2f s CPU (%s s wall), %s tokens\n' "$r" "$f" "$secs" "$wall" "$tok"
  done
done
echo
echo "one process: mixed-english train.txt x 3"
echo "start-up (one line of input): best ${best[start]} CPU s"
echo "| input | size (MB) | best of $rounds (CPU s) | less start-up (CPU s) | M tokens per CPU s | throughput / plain text |"
echo "|---|---|---|---|---|---|"
work_s() { echo "${best[$1]} - ${best[start]}" | bc -l; }
for f in "${formats[@]:1}"; do
  same=txt; [[ $f == jsonl* ]] && same=jsonl  # pieces are cut at byte offsets, which differ between the two
  [ "${tokens[$f]}" = "${tokens[$same]}" ] || { echo "FAIL: $f wrote ${tokens[$f]} tokens, .$same ${tokens[$same]}"; exit 1; }
  size=$(stat -c %s "$work/me.$f")
  printf '| .%s | %.1f | %.2f | %.2f | %.2f | %.0f%% |\n' "$f" "$(echo "$size / 1000000" | bc -l)" "${best[$f]}" \
    "$(work_s "$f")" "$(echo "${tokens[$f]} / $(work_s "$f") / 1000000" | bc -l)" \
    "$(echo "100 * $(work_s txt) / $(work_s "$f")" | bc -l)"
done
