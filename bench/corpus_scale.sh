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
#     the large corpus on demand and from WikiText-2 on demand and in memory; then the large
#     corpus with a cold page cache, with and without the batch's read-ahead hint.
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
  local name="$1" shards="$2" in_memory="${3:-false}"
  rm -rf "run-$name"
  "$py" - "$name" "$work/$shards" "$tupe" "$here" "$work" "$steps" "$in_memory" "${mpirun[@]}" <<'PY'
import re, subprocess, sys, time
name, shards, tupe, repo, work, steps, in_memory, *mpirun = sys.argv[1:]
# From the repository root: configs/tiny.ini names the vocabulary relative to it.
# Each rank's peak RSS goes to its own file (the ranks' stderr lines can interleave).
timed = ["sh", "-c", f'exec /usr/bin/time -f %M -o {work}/rss-{name}-$OMPI_COMM_WORLD_RANK "$@"', "sh"]
cmd = mpirun + timed + [tupe, "pretrain", "--config", "configs/tiny.ini",
               "--data.train_shards", shards, "--data.validation_shards", f"{work}/wiki",
               "--checkpoint.dir", f"{work}/run-{name}/checkpoints", "--optimizer.total_steps", steps,
               "--train.log_every", "1", "--data.load_in_memory", in_memory]
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=repo)
first = None
log = open(f"pretrain-{name}.log", "w")
for line in p.stdout:
    log.write(line)
    if first is None and line.startswith("step 1/"):
        first = time.monotonic() - t0
code = p.wait()
rss = [int(open(f"{work}/rss-{name}-{r}").read().split()[-1]) for r in (0, 1)]
if code != 0 or first is None:
    sys.exit(f"pretrain on {name} failed (see {name} log pretrain-{name}.log)")
print(f"{first:.2f} {rss[0]} {rss[1]}")
PY
}
read -r first_wiki rss_wiki_a rss_wiki_b < <(pretrain_run wiki wiki)
read -r first_large rss_large_a rss_large_b < <(pretrain_run large large)
# The reference: the same run with every shard loaded into memory (the reader before on-demand).
read -r first_mem rss_mem_a rss_mem_b < <(pretrain_run large-in-memory large true)
say "pretrain $steps steps, 2 ranks, tiny TUPE-R: WikiText-2 peak RSS per rank $((rss_wiki_a / 1024)) / $((rss_wiki_b / 1024)) MiB, first step after ${first_wiki} s"
say "pretrain $steps steps, 2 ranks, tiny TUPE-R: large corpus peak RSS per rank $((rss_large_a / 1024)) / $((rss_large_b / 1024)) MiB, first step after ${first_large} s"
max_large=$(( rss_large_a > rss_large_b ? rss_large_a : rss_large_b ))
max_wiki=$(( rss_wiki_a > rss_wiki_b ? rss_wiki_a : rss_wiki_b ))
say "pretrain $steps steps, 2 ranks, tiny TUPE-R: large corpus loaded in memory (data.load_in_memory): peak RSS per rank $((rss_mem_a / 1024)) / $((rss_mem_b / 1024)) MiB, first step after ${first_mem} s"
say "peak RSS per rank, large minus WikiText-2: $(( (max_large - max_wiki) / 1024 )) MiB (target <= 128); time to first step on the large corpus: ${first_large} s (target <= 5)"

# 4. Loader throughput, one core.
for spec in "large:" "wiki:" "wiki:--in-memory"; do
  src="${spec%%:*}"; flag="${spec#*:}"
  out=$("$build/data_pipeline/loader_bench" --shards "$src" --threads 0 --steps 2000 --batch 256 $flag)
  say "loader_bench $src $flag: $(echo "$out" | grep -E '^(open|dataset)' | tr '\n' ';') $(echo "$out" | grep -E 'sequences/s' | sed 's/  */ /g')"
done

# Cold page cache (needs write access to /proc/sys/vm/drop_caches): every sample from the disk,
# with the batch's read-ahead hint and without it.
if sync && echo 3 > /proc/sys/vm/drop_caches 2> /dev/null; then
  for flag in "" "--no-prefetch"; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    out=$("$build/data_pipeline/loader_bench" --shards large --threads 0 --steps 300 --batch 256 $flag)
    say "loader_bench large, cold page cache $flag: $(echo "$out" | grep -E 'sequences/s' | sed 's/  */ /g')"
  done
else
  say "loader_bench cold page cache: skipped (cannot write /proc/sys/vm/drop_caches)"
fi

# 5. Preprocessing throughput and memory, 2 ranks.
for copies in ${PP_COPIES:-80 320}; do
  text="text-x$copies.txt"
  if [ ! -f "$text" ]; then
    for _ in $(seq "$copies"); do cat "$shared/text/wikitext-2/wiki.test.raw"; done > "$text"
  fi
  rm -rf "pp-x$copies"
  log="preprocess-x$copies.log"
  t0=$(date +%s.%N)
  "${mpirun[@]}" sh -c "exec /usr/bin/time -f %M -o $work/rss-pp-x$copies-\$OMPI_COMM_WORLD_RANK \"\$@\"" sh "$tupe" preprocess --config "$here/configs/tiny.ini" \
    --tokenizer.vocab "$shared/vocab/bert-base-uncased-vocab.txt" --input "$text" --output "pp-x$copies" \
    --preprocess.num_shards 8 --preprocess.num_validation_shards 2 --preprocess.piece_bytes 1048576 > "$log" 2>&1
  t1=$(date +%s.%N)
  "$py" - "$log" "$t0" "$t1" "$(stat -c %s "$text")" "$work/rss-pp-x$copies" <<'PY' | tee -a "$results"
import re, sys
log, t0, t1, size, rss_prefix = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
text = open(log).read()
train = re.search(r"wrote \d+ train sequences \((\d+) tokens\)", text)
valid = re.search(r"\d+ validation sequences \((\d+) tokens\)", text)
inner = float(re.search(r" in ([0-9.]+) s\n", text).group(1))
rss = [int(open(f"{rss_prefix}-{r}").read().split()[-1]) for r in (0, 1)]
tokens = int(train.group(1)) + (int(valid.group(1)) if valid else 0)
wall = t1 - t0
print(f"preprocess {size / 1e6:.0f} MB of text, 2 ranks: {tokens / 1e6:.1f} M tokens; {tokens / inner / 2 / 1e6:.2f} M tokens/s per rank "
      f"(tokenise+write phase {inner:.1f} s), {tokens / wall / 2 / 1e6:.2f} M tokens/s per rank end to end ({wall:.1f} s); "
      f"peak RSS per rank {max(rss) / 1024:.0f} MiB")
PY
done
echo "results: $results"
