#!/usr/bin/env bash
# Corpus-scale data benchmark (run by hand, not a test; figures go to bench/RESULTS.md).
#   bash bench/corpus_scale.sh [WORK_DIR]     (default /tmp/tupe-corpus-scale; about 5 GB of disk)
# Needs a built tree (bash launch/build.sh) and mpirun. Environment: BUILD (default build),
# CORPUS_TOKENS (default 1000000000), PP_COPIES (default "80 320": copies of WikiText-2's
# test split preprocessed, 103 and 413 MB), STEPS (default 200). ../shared/data holds the
# raw WikiText-2 test split only: it is "WikiText-2" below.
#
#  1. WikiText-2 preprocessed with configs/tiny.ini's settings: the baseline corpus.
#  2. The large corpus: its training samples repeated to CORPUS_TOKENS (bench/make_corpus.cpp),
#     16 unfiltered shards written by the project's shard writer.
#  3. For each corpus, a 2-rank tiny-model pre-training of STEPS steps under mpirun, each rank
#     under /usr/bin/time: peak RSS per rank, and the time from launch to the first step line.
#  4. Loader sequences/s on one core (loader_bench --threads 0, seq 128, dynamic masking), from
#     the large corpus on demand and from WikiText-2 on demand and in memory.
#  5. Preprocessing with 2 ranks of WikiText-2 repeated PP_COPIES times: tokens/s per
#     rank and peak RSS per rank (the same for every input size when memory is bounded).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-/tmp/tupe-corpus-scale}"
build="${BUILD:-$here/build}"
tupe="$build/cli/tupe"
shared="$here/../shared/data"
tokens="${CORPUS_TOKENS:-1000000000}"
steps="${STEPS:-200}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
mpirun=(mpirun --oversubscribe -np 2)
py="${TUPE_PYTHON:-python3}"
mkdir -p "$work"
cd "$work"
results="$work/results.md"
: > "$results"
say() { echo "$*" | tee -a "$results"; }

# 1. Baseline corpus.
if [ ! -f wiki/train-00000-of-00002.h5 ]; then
  "$tupe" preprocess --config "$here/configs/tiny.ini" --quiet --overwrite --output wiki \
    --tokenizer.vocab "$shared/vocab/bert-base-uncased-vocab.txt" \
    --input "$shared/text/wikitext-2/wiki.test.raw"
fi
# 2. Large corpus.
if [ ! -f large/.done-$tokens ]; then
  rm -rf large
  "$build/data_pipeline/make_corpus" --from wiki --out large --tokens "$tokens" --shards 16
  touch "large/.done-$tokens"
fi
say "# corpus_scale $(date -u +%FT%TZ) on $(nproc) cores"
say "large corpus: $(du -sh large | cut -f1) in $(ls large/*.h5 | wc -l) shards ($tokens tokens requested)"

# 3. Pre-training runs: peak RSS per rank and time to the first step.
# Prints "<seconds to first step> <rss rank a KB> <rss rank b KB>".
pretrain_run() {
  local name="$1" shards="$2"
  rm -rf "run-$name"
  "$py" - "$name" "$shards" "$tupe" "$here/configs/tiny.ini" "$shared" "$steps" "${mpirun[@]}" <<'PY'
import re, subprocess, sys, time
name, shards, tupe, cfg, shared, steps, *mpirun = sys.argv[1:]
cmd = mpirun + ["/usr/bin/time", "-f", "peak_rss_kb %M", tupe, "pretrain", "--config", cfg,
               "--tokenizer.vocab", f"{shared}/vocab/bert-base-uncased-vocab.txt",
               "--data.train_shards", shards, "--data.validation_shards", "wiki",
               "--checkpoint.dir", f"run-{name}/checkpoints", "--optimizer.total_steps", steps,
               "--train.log_every", "1"]
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
first = None
rss = []
log = open(f"pretrain-{name}.log", "w")
for line in p.stdout:
    log.write(line)
    if first is None and line.startswith("step 1/"):
        first = time.monotonic() - t0
    m = re.match(r"peak_rss_kb (\d+)", line)
    if m:
        rss.append(int(m.group(1)))
if p.wait() != 0 or first is None or len(rss) != 2:
    sys.exit(f"pretrain on {name} failed (see {name} log pretrain-{name}.log)")
print(f"{first:.2f} {rss[0]} {rss[1]}")
PY
}
read -r first_wiki rss_wiki_a rss_wiki_b < <(pretrain_run wiki wiki)
read -r first_large rss_large_a rss_large_b < <(pretrain_run large large)
say "pretrain $steps steps, 2 ranks, tiny TUPE-R: WikiText-2 peak RSS per rank $((rss_wiki_a / 1024)) / $((rss_wiki_b / 1024)) MiB, first step after ${first_wiki} s"
say "pretrain $steps steps, 2 ranks, tiny TUPE-R: large corpus peak RSS per rank $((rss_large_a / 1024)) / $((rss_large_b / 1024)) MiB, first step after ${first_large} s"
max_large=$(( rss_large_a > rss_large_b ? rss_large_a : rss_large_b ))
max_wiki=$(( rss_wiki_a > rss_wiki_b ? rss_wiki_a : rss_wiki_b ))
say "peak RSS per rank, large minus WikiText-2: $(( (max_large - max_wiki) / 1024 )) MiB (target <= 128); time to first step on the large corpus: ${first_large} s (target <= 5)"

# 4. Loader throughput, one core.
for spec in "large:" "wiki:" "wiki:--in-memory"; do
  src="${spec%%:*}"; flag="${spec#*:}"
  out=$("$build/data_pipeline/loader_bench" --shards "$src" --threads 0 --steps 200 --batch 256 $flag)
  say "loader_bench $src $flag: $(echo "$out" | grep -E '^open' | head -1); $(echo "$out" | grep -E 'sequences/s' | sed 's/  */ /g')"
done

# 5. Preprocessing throughput and memory, 2 ranks.
for copies in ${PP_COPIES:-80 320}; do
  text="text-x$copies.txt"
  if [ ! -f "$text" ]; then
    for _ in $(seq "$copies"); do cat "$shared/text/wikitext-2/wiki.test.raw"; done > "$text"
  fi
  rm -rf "pp-x$copies"
  log="preprocess-x$copies.log"
  t0=$(date +%s.%N)
  "${mpirun[@]}" /usr/bin/time -f "peak_rss_kb %M" "$tupe" preprocess --config "$here/configs/tiny.ini" \
    --tokenizer.vocab "$shared/vocab/bert-base-uncased-vocab.txt" --input "$text" --output "pp-x$copies" \
    --preprocess.num_shards 8 --preprocess.num_validation_shards 2 --preprocess.piece_bytes 1048576 > "$log" 2>&1
  t1=$(date +%s.%N)
  "$py" - "$log" "$t0" "$t1" "$(stat -c %s "$text")" <<'PY' | tee -a "$results"
import re, sys
log, t0, t1, size = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
text = open(log).read()
train = re.search(r"wrote \d+ train sequences \((\d+) tokens\)", text)
valid = re.search(r"\d+ validation sequences \((\d+) tokens\)", text)
inner = float(re.search(r" in ([0-9.]+) s\n", text).group(1))
rss = [int(x) for x in re.findall(r"peak_rss_kb (\d+)", text)]
tokens = int(train.group(1)) + (int(valid.group(1)) if valid else 0)
wall = t1 - t0
print(f"preprocess {size / 1e6:.0f} MB of text, 2 ranks: {tokens / 1e6:.1f} M tokens; {tokens / inner / 2 / 1e6:.2f} M tokens/s per rank "
      f"(tokenise+write phase {inner:.1f} s), {tokens / wall / 2 / 1e6:.2f} M tokens/s per rank end to end ({wall:.1f} s); "
      f"peak RSS per rank {max(rss) / 1024:.0f} MiB")
PY
done
echo "results: $results"
