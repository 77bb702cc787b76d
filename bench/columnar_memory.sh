#!/usr/bin/env bash
# Peak memory of `tupe preprocess` on Parquet against the file's size: mixed-english train.txt's
# documents (blank-line separated; one row each, beside an "id" column) written 1, 4, 16 and 32
# times over into one Parquet file with row groups of ROWS rows (pyarrow, snappy), each
# preprocessed by one process under /usr/bin/time -v: its maximum resident set (which counts
# LibTorch's and the other libraries' pages too; files are read with pread, so the page cache
# is not in it), against the same command on a one-line text file ("start"), and the largest
# corpus as plain text for comparison (what the shard writer keeps per sequence grows with the
# output, whatever the input format). Memory bounded by a row group means the peak stays flat
# while the file grows 32-fold, and the largest file is bigger than the peak. Then the largest
# file again under a limit the run may not exceed: `ulimit -v` (address space) at the peak
# address space of the 1x run plus 256 MiB (the 1x run's own VmPeak, read from /proc while it
# runs), which the 32x run must pass under.
# Usage: bench/columnar_memory.sh [BUILD_DIR] [ROWS]   (default build, 1000 rows per row group)
# Environment: TUPE_SHARED_DATA (default ../shared/data), TUPE_PYTHON (with pyarrow),
# TUPE_BENCH_COPIES (default "1 4 16 32"), TUPE_BENCH_DIR (work folder, default a new temporary one).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
rows="${2:-1000}"
data="${TUPE_SHARED_DATA:-$here/../shared/data}"
py="${TUPE_PYTHON:-python3}"
work="${TUPE_BENCH_DIR:-$(mktemp -d)}"
[ -n "${TUPE_BENCH_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
vocab="$data/vocab/bert-base-uncased-vocab.txt"
read -r -a copies <<< "${TUPE_BENCH_COPIES:-1 4 16 32}"
"$py" - "$data/text/mixed-english/train.txt" "$work" "$rows" "${copies[@]}" <<'EOF'
import sys
import pyarrow as pa
import pyarrow.parquet as pq
src, work, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
docs, cur = [], []
for line in open(src, encoding="utf-8").read().split("\n"):
    if line.strip():
        cur.append(line)
    elif cur:
        docs.append("\n".join(cur)); cur = []
if cur:
    docs.append("\n".join(cur))
for k in map(int, sys.argv[4:]):
    path = f"{work}/me-x{k}.parquet"
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    with pq.ParquetWriter(path, schema) as w:  # one copy at a time: the writer's memory stays small
        for c in range(k):
            w.write_table(pa.table({"id": range(c * len(docs), (c + 1) * len(docs)), "text": docs}, schema),
                          row_group_size=rows)
    if k == int(sys.argv[-1]):  # the largest, as plain text too
        with open(f"{work}/me-x{k}.txt", "w", encoding="utf-8") as f:
            for c in range(k):
                f.write("\n\n".join(docs) + "\n\n")
    md = pq.ParquetFile(path).metadata
    text_mb = k * sum(len(d.encode()) for d in docs) / 1e6
    print(f"{path}: {md.num_rows} rows, {md.num_row_groups} row groups, {text_mb:.0f} MB of text")
EOF
printf 'a short line of text to measure the start-up\n' > "$work/start.txt"
run_tupe() {  # input [limit_kb]
  rm -rf "$work/out"
  bash -c 'if [ -n "$2" ]; then ulimit -v "$2"; fi; exec "${@:3}"' _ "$1" "${2:-}" /usr/bin/time -v \
    "$build/cli/tupe" preprocess --quiet --input "$1" --output "$work/out" --tokenizer.vocab "$vocab" \
    --preprocess.validation_ratio 0 --preprocess.num_shards 4
}
measure() {  # input -> "max_rss_kb cpu_s tokens"
  run_tupe "$1" > "$work/log" 2> "$work/time" || { cat "$work/log" "$work/time"; exit 1; }
  local rss user sys tok
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time")
  user=$(sed -n 's/.*User time (seconds): //p' "$work/time")
  sys=$(sed -n 's/.*System time (seconds): //p' "$work/time")
  tok=$(grep '^wrote' "$work/log" | sed -E 's/.*\(([0-9]+) tokens\).*/\1/')
  echo "$rss $(echo "$user + $sys" | bc -l) $tok"
}
read -r rss0 cpu0 _ <<< "$(measure "$work/start.txt")"
echo
echo "| input | file (MB) | row groups | tokens | CPU s | max RSS (MB) | RSS - start-up (MB) |"
echo "|---|---|---|---|---|---|---|"
printf '| one line of text (start-up) | 0 | - | - | %.2f | %.0f | 0 |\n' "$cpu0" "$(echo "$rss0 / 1024" | bc -l)"
for k in "${copies[@]}"; do
  f="$work/me-x$k.parquet"
  read -r rss cpu tok <<< "$(measure "$f")"
  groups=$("$py" -c "import pyarrow.parquet as pq, sys; print(pq.ParquetFile(sys.argv[1]).metadata.num_row_groups)" "$f")
  printf '| train.txt x %d, Parquet | %.0f | %d | %d | %.2f | %.0f | %.0f |\n' "$k" \
    "$(echo "$(stat -c %s "$f") / 1000000" | bc -l)" "$groups" "$tok" "$cpu" "$(echo "$rss / 1024" | bc -l)" \
    "$(echo "($rss - $rss0) / 1024" | bc -l)"
done
last="${copies[-1]}"
read -r rss cpu tok <<< "$(measure "$work/me-x$last.txt")"
printf '| train.txt x %d, plain text | %.0f | - | %d | %.2f | %.0f | %.0f |\n' "$last" \
  "$(echo "$(stat -c %s "$work/me-x$last.txt") / 1000000" | bc -l)" "$tok" "$cpu" "$(echo "$rss / 1024" | bc -l)" \
  "$(echo "($rss - $rss0) / 1024" | bc -l)"

# The limit: the 1x run's peak address space (VmPeak, polled from /proc until it exits) + 256 MiB.
rm -rf "$work/out"
"$build/cli/tupe" preprocess --quiet --input "$work/me-x${copies[0]}.parquet" --output "$work/out" \
  --tokenizer.vocab "$vocab" --preprocess.validation_ratio 0 --preprocess.num_shards 4 > "$work/log" 2>&1 &
pid=$!
vmpeak=0
while kill -0 "$pid" 2> /dev/null; do
  v=$(sed -n 's/^VmPeak:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status" 2> /dev/null || true)
  [ -n "$v" ] && [ "$v" -gt "$vmpeak" ] && vmpeak=$v
  sleep 0.05
done
wait "$pid"
limit=$((vmpeak + 256 * 1024))
echo
if run_tupe "$work/me-x$last.parquet" "$limit" > "$work/log" 2> "$work/time"; then
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time")
  printf 'under ulimit -v %d kB (the 1x run'"'"'s VmPeak %d kB + 256 MiB): train.txt x %d, Parquet (%.0f MB): passed, max RSS %.0f MB; %s\n' \
    "$limit" "$vmpeak" "$last" "$(echo "$(stat -c %s "$work/me-x$last.parquet") / 1000000" | bc -l)" \
    "$(echo "$rss / 1024" | bc -l)" "$(grep '^wrote' "$work/log")"
else
  echo "FAIL: train.txt x $last, Parquet, under ulimit -v $limit kB (VmPeak of 1x $vmpeak kB + 256 MiB):"
  tail -n 3 "$work/log" "$work/time"
  exit 1
fi
