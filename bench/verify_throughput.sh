#!/usr/bin/env bash
# tupe verify's read rate against `cat` of the same files (run by hand, not a test; the figure
# goes to bench/RESULTS.md "tupe verify throughput").
#   bash bench/verify_throughput.sh [BUILD_DIR] [WORK_DIR]
# BUILD_DIR (default build) holds cli/tupe and data_pipeline/make_corpus. Environment:
# CORPUS_TOKENS (default 300000000: about 600 MB of uint16 token ids), SHARDS (default 8),
# ROUNDS (default 5), NP (default 1: ranks of `mpirun -np NP tupe verify`).
#
#  1. WikiText-2's test split preprocessed with configs/tiny.ini, its samples repeated to
#     CORPUS_TOKENS by make_corpus into SHARDS unfiltered shards (the default format).
#  2. Warm page cache (dropping it needs root on the host, which this machine lacks): one
#     `cat` first to load the pages, then ROUNDS times alternating `cat FILES > /dev/null` and
#     `tupe verify --shards DIR`, each timed by wall clock; the medians and their ratio
#     (verify's rate / cat's rate) are printed. Warm, both read from memory: the ratio is
#     what verify's own work (HDF5 open, the index, CRC-32C and the id range of every sample)
#     costs against copying the bytes, an upper bound of its distance from the disk's rate.
#     Reported twice: the whole process (its start, about 1.7 s, included) and verify's own
#     "verify: read ... in S s" (from the listing of the files to the report).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$here/build}" && pwd)"
work="${2:-/tmp/tupe-verify-throughput}"
tokens="${CORPUS_TOKENS:-300000000}"
shards="${SHARDS:-8}"
rounds="${ROUNDS:-5}"
np="${NP:-1}"
shared="$here/../shared/data"
mkdir -p "$work"
cd "$work"
if [ ! -f large/train-00000-of-$(printf %05d "$shards").h5 ]; then
  rm -rf wiki large
  "$build/cli/tupe" preprocess --quiet --config "$here/configs/tiny.ini" --input "$shared/text/wikitext-2/wiki.test.raw" \
    --output wiki --tokenizer.vocab "$shared/vocab/bert-base-uncased-vocab.txt"
  "$build/data_pipeline/make_corpus" --from wiki --out large --tokens "$tokens" --shards "$shards" >/dev/null
fi
files=(large/*.h5)
bytes=$(cat "${files[@]}" | wc -c)
verify=("$build/cli/tupe" verify --shards large)
if [ "$np" -gt 1 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  verify=(mpirun -np "$np" --oversubscribe --bind-to none "${verify[@]}")
fi
now() { date +%s.%N; }
cat "${files[@]}" >/dev/null  # warm the page cache
cat_s=() verify_s=() inner_s=()
for ((r = 0; r < rounds; ++r)); do
  t0=$(now); cat "${files[@]}" >/dev/null; t1=$(now)
  cat_s+=("$(echo "$t1 - $t0" | bc -l)")
  t0=$(now); "${verify[@]}" >verify.log 2>&1 || { cat verify.log; exit 1; }; t1=$(now)
  verify_s+=("$(echo "$t1 - $t0" | bc -l)")
  # verify's own figure: from the file listing to the report, without the process start
  # (loading LibTorch and MPI_Init: about 1.7 s on the test machine, whatever the corpus).
  inner_s+=("$(sed -n 's/^verify: read .* MB in \([0-9.]*\) s .*/\1/p' verify.log)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
cm=$(median "${cat_s[@]}"); vm=$(median "${verify_s[@]}"); im=$(median "${inner_s[@]}")
echo "files: ${#files[@]} shards, $bytes bytes ($(grep -o '[0-9]* samples' verify.log | head -1))"
echo "cat    s: ${cat_s[*]}  median $cm  ($(echo "$bytes / $cm / 1000000" | bc -l | xargs printf %.0f) MB/s)"
echo "verify s: ${verify_s[*]}  median $vm  ($(echo "$bytes / $vm / 1000000" | bc -l | xargs printf %.0f) MB/s, np $np)"
echo "verify s without the process start: ${inner_s[*]}  median $im  ($(echo "$bytes / $im / 1000000" | bc -l | xargs printf %.0f) MB/s)"
echo "ratio (verify rate / cat rate): $(echo "$cm / $vm" | bc -l | xargs printf %.2f) whole process, $(echo "$cm / $im" | bc -l | xargs printf %.2f) without its start"
