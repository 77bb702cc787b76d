#!/usr/bin/env bash
# `tupe preprocess` throughput per input format, side by side: the same documents (mixed-english
# train.txt three times over, 106 MB, blank-line documents) as plain text, gzip, zstd, JSON lines, JSON lines gzip
# and JSON lines zstd, Parquet (row groups of 1000 documents) and a datasets save_to_disk folder
# of Arrow files (tests/data/make_format_inputs.py --columnar), each run ROUNDS times in turn
# (interleaved, so a load change hits every format alike); the best CPU time (user + system,
# steadier than wall time on a shared machine; of the whole process) of each, and its
# throughput (tokens per CPU second) as a share of plain text's, from the CPU time less that
# of the same command on a one-line file ("start": loading LibTorch and the vocabulary). The compressed files must write the same
# tokens as their uncompressed file (text and JSON lines differ by a few [CLS]/[SEP]: pieces
# are cut at byte offsets, and a piece ends its last sequence; Parquet and Arrow pieces are
# row groups and record batches, so their tokens differ from the JSON lines' a little too).
# Usage: bench/corpus_formats.sh [BUILD_DIR] [ROUNDS]   (default build, 3)
# Environment: TUPE_SHARED_DATA (default ../shared/data), TUPE_PYTHON (default python3; with
# pyarrow and datasets), TUPE_BENCH_FORMATS (the formats to run, default all: txt txt.gz
# txt.zst jsonl jsonl.gz jsonl.zst parquet arrow), TUPE_BENCH_COPIES (train.txt copies, 3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
rounds="${2:-3}"
data="${TUPE_SHARED_DATA:-$here/../shared/data}"
py="${TUPE_PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
src="$data/text/mixed-english/train.txt"
copies="${TUPE_BENCH_COPIES:-3}"
for ((c = 0; c < copies; ++c)); do cat "$src"; done > "$work/source.txt"
"$py" "$here/tests/data/make_format_inputs.py" "$work/source.txt" "$work" me blank_line --columnar
rm "$work/source.txt"
mv "$work/me-ds" "$work/me.arrow"  # the save_to_disk folder, named as its format
printf 'a short line of text to measure the start-up\n' > "$work/me.start"
read -r -a formats <<< "start ${TUPE_BENCH_FORMATS:-txt txt.gz txt.zst jsonl jsonl.gz jsonl.zst parquet arrow}"
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
echo "one process: mixed-english train.txt x $copies"
echo "start-up (one line of input): best ${best[start]} CPU s"
has() { [[ " ${formats[*]} " == *" $1 "* ]]; }
echo "| input | size (MB) | best of $rounds (CPU s) | less start-up (CPU s) | M tokens per CPU s | throughput / plain text | / .jsonl.zst |"
echo "|---|---|---|---|---|---|---|"
work_s() { echo "${best[$1]} - ${best[start]}" | bc -l; }
for f in "${formats[@]:1}"; do
  same=txt; [[ $f == jsonl* ]] && same=jsonl  # pieces are cut at byte offsets, which differ between the two
  [[ $f == parquet || $f == arrow ]] && same=parquet  # row groups / record batches of 1000 documents alike
  if has "$same" && [ "${tokens[$f]}" != "${tokens[$same]}" ]; then
    echo "FAIL: $f wrote ${tokens[$f]} tokens, .$same ${tokens[$same]}"; exit 1
  fi
  size=$(du -s -B1 "$work/me.$f" | cut -f1)
  ratio() { if has "$1"; then printf '%.0f%%' "$(echo "100 * $(work_s "$1") / $(work_s "$f")" | bc -l)"; else echo -; fi; }
  printf '| .%s | %.1f | %.2f | %.2f | %.2f | %s | %s |\n' "$f" "$(echo "$size / 1000000" | bc -l)" "${best[$f]}" \
    "$(work_s "$f")" "$(echo "${tokens[$f]} / $(work_s "$f") / 1000000" | bc -l)" "$(ratio txt)" "$(ratio jsonl.zst)"
done
