#!/usr/bin/env bash
# What verified reads cost (run by hand, not a test; figures go to bench/RESULTS.md): the same
# runs of two builds, alternated, e.g. the build before shard checksums and the one after.
#   bash bench/verify_cost.sh BEFORE_BIN AFTER_BIN [WORK_DIR]
# BEFORE_BIN / AFTER_BIN: folders holding each build's tupe, loader_bench and make_corpus
# (build/cli/tupe, build/data_pipeline/{loader_bench,make_corpus}, copied side by side).
# Environment: CORPUS_TOKENS (default 500000000), ROUNDS (default 7 warm, COLD_ROUNDS 5,
# PP_ROUNDS 5), PP_COPIES (default 60: copies of WikiText-2's test split preprocessed).
# loader_bench prints sequences/s (wall) and sequences per CPU second (the process's CPU
# time): on a shared machine the second is the steadier measure of the work a read costs.
#
#  1. Each build preprocesses WikiText-2 (configs/tiny.ini) and writes its own large corpus
#     from it with make_corpus (16 unfiltered shards; the older build writes its format).
#  2. Warm page cache: loader_bench --threads 0 (one core, seq 128, dynamic masking) over
#     each build's corpus, ROUNDS times alternating before/after; and the after build on the
#     before build's (unverified) corpus, to separate the checksum from everything else.
#  3. Cold: the corpus files' pages dropped before each run (posix_fadvise DONTNEED on each
#     file, so other processes' page cache stays), 300 steps, COLD_ROUNDS times alternating.
#  4. Preprocessing: one rank, PP_COPIES x WikiText-2, tokens/s of the tokenise + write
#     phase and tokens per CPU second of the whole process, PP_ROUNDS times alternating.
# SKIP_LOADER=1 runs 1 and 4 only.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
before="$(cd "$1" && pwd)"; after="$(cd "$2" && pwd)"
work="${3:-/tmp/tupe-verify-cost}"
tokens="${CORPUS_TOKENS:-500000000}"
shared="$here/../shared/data"
mkdir -p "$work"
cd "$work"
results="$work/results.md"
: > "$results"
say() { echo "$*" | tee -a "$results"; }
say "# verify_cost $(date -u +%FT%TZ) on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

for b in before after; do
  bin="$before"; [ "$b" = after ] && bin="$after"
  if [ ! -f "wiki-$b/train-00000-of-00002.h5" ]; then
    "$bin/tupe" preprocess --config "$here/configs/tiny.ini" --quiet --overwrite --output "wiki-$b" \
      --tokenizer.vocab "$shared/vocab/bert-base-uncased-vocab.txt" --input "$shared/text/wikitext-2/wiki.test.raw"
  fi
  if [ ! -f "large-$b/.done-$tokens" ]; then
    rm -rf "large-$b"
    "$bin/make_corpus" --from "wiki-$b" --out "large-$b" --tokens "$tokens" --shards 16 > /dev/null 2>&1
    touch "large-$b/.done-$tokens"
    say "make_corpus $b: $tokens tokens, 16 shards, $(du -sh "large-$b" | cut -f1)"
  fi
done

# "<sequences/s> <sequences per CPU second>" of loader_bench's line.
seqs() { grep -E 'sequences/s' | sed -E 's/.* ([0-9]+) sequences\/s.* ([0-9]+) sequences per CPU second.*/\1 \2/'; }
bench() {  # bench BIN CORPUS STEPS -> "sequences/s sequences-per-CPU-second"
  "$1/loader_bench" --shards "$2" --threads 0 --steps "$3" --batch 256 2> /dev/null | seqs
}
drop() {  # the corpus files' pages out of the page cache
  python3 - "$1" <<'PY'
import os, sys, glob
for p in glob.glob(os.path.join(sys.argv[1], "*.h5")):
    fd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
}

if [ "${SKIP_LOADER:-0}" != 1 ]; then
# 2. Warm: every page of both corpora read once first (2 x 1 GB at the default size).
cat large-before/*.h5 large-after/*.h5 > /dev/null
for r in $(seq "${ROUNDS:-7}"); do
  wb=$(bench "$before" large-before 2000); wa=$(bench "$after" large-after 2000)
  wu=$(bench "$after" large-before 2000)
  say "warm round $r (sequences/s, sequences per CPU second): before $wb; after $wa (verified); after on the before corpus $wu (unverified)"
done

# 3. Cold.
for r in $(seq "${COLD_ROUNDS:-5}"); do
  drop large-before; cb=$(bench "$before" large-before 300)
  drop large-after; ca=$(bench "$after" large-after 300)
  say "cold round $r (sequences/s, sequences per CPU second): before $cb; after $ca (verified)"
done

fi

# 4. Preprocessing.
copies="${PP_COPIES:-60}"
text="text-x$copies.txt"
[ -f "$text" ] || for _ in $(seq "$copies"); do cat "$shared/text/wikitext-2/wiki.test.raw"; done > "$text"
pp() {  # pp BIN -> "<M tokens/s of the tokenise + write phase> <M tokens per CPU second, whole process>"
  local out
  out=$(/usr/bin/time -f "cpu %U %S" "$1/tupe" preprocess --config "$here/configs/tiny.ini" \
    --tokenizer.vocab "$shared/vocab/bert-base-uncased-vocab.txt" --input "$text" --output pp-out --overwrite \
    --preprocess.num_shards 8 --preprocess.piece_bytes 1048576 2>&1)
  python3 - "$out" <<'PY'
import re, sys
t = sys.argv[1]
train = int(re.search(r"wrote \d+ train sequences \((\d+) tokens\)", t).group(1))
valid = re.search(r"\d+ validation sequences \((\d+) tokens\)", t)
tokens = train + (int(valid.group(1)) if valid else 0)
secs = float(re.search(r" in ([0-9.]+) s\n", t).group(1))
user, system = map(float, re.search(r"cpu ([0-9.]+) ([0-9.]+)", t).groups())
print(f"{tokens / secs / 1e6:.2f} {tokens / (user + system) / 1e6:.2f}")
PY
}
for r in $(seq "${PP_ROUNDS:-5}"); do
  pb=$(pp "$before"); pa=$(pp "$after")
  say "preprocess round $r ($copies x WikiText-2, 1 rank; M tokens/s, M tokens per CPU second): before $pb; after $pa"
done
say "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "results: $results"
