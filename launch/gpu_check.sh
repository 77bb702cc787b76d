#!/usr/bin/env bash
# GPU checks and benchmarks, for a GPU host that brings its own PyTorch and no network
# (../shared/DEVICE.md): unpack the carried Debian packages (.debs/, from
# launch/fetch_gpu_debs.sh) into a private prefix, build against the host's torch, then run:
#   1. the model and dist unit tests that need no MPI peers;
#   2. a short bf16 pre-training of a small TUPE-R on the GPU (NCCL, world size 1);
#   3. the NCCL all-reduce benchmark (algbw / busbw);
#   4. pre-training throughput, TUPE-R vs BERT-A (tokens/s and MFU);
#   5. the four variants interleaved step by step at BERT-Base size, bf16
#      (variant_step_bench: the TUPE-R / BERT-A step-time ratio without run-to-run noise);
# and print a short table. Full logs go to $OUT (or ./gpu-logs).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$here/gpu-logs}"
mkdir -p "$out"
cd "$here"
prefix=/tmp/tupe-prefix
mkdir -p "$prefix"
for f in .debs/*.deb; do dpkg -x "$f" "$prefix"; done
export PATH="$prefix/usr/bin:$PATH" OPAL_PREFIX="$prefix/usr"
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$prefix/usr/lib/x86_64-linux-gnu/openmpi/lib:$prefix/usr/lib/x86_64-linux-gnu/hdf5/serial:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
torch_prefix="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
echo "host torch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)')" | tee "$out/env.txt"
nvidia-smi -L | tee -a "$out/env.txt"

build=/tmp/tupe-build
cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr" -DTUPE_PYTHON=python3 \
  -DMPI_C_COMPILER="$prefix/usr/bin/mpicc" -DMPI_CXX_COMPILER="$prefix/usr/bin/mpicxx" \
  -DHDF5_ROOT="$prefix/usr" -DHDF5_INCLUDE_DIRS="$prefix/usr/include/hdf5/serial" \
  -DBOOST_ROOT="$prefix/usr" > "$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
grep "tupe:" "$out/configure.log"
cmake --build "$build" -j "$(nproc)" > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
tupe="$build/cli/tupe"

(cd "$build" && ctest -R "AttentionLogits|RelativeBuckets|ParameterCounts|Model\." --output-on-failure) > "$out/unit.log" 2>&1
unit=$?

shards=/tmp/tupe-shards
"$tupe" preprocess --config configs/tiny.ini --input ../shared/data/text/wikitext-2/wiki.test.raw \
  --tokenizer.vocab ../shared/data/vocab/bert-base-uncased-vocab.txt --preprocess.max_seq_len 128 \
  --output "$shards" --overwrite --quiet > "$out/preprocess.log" 2>&1 || { tail "$out/preprocess.log"; exit 1; }

run_pretrain() {  # $1 name, $2 position encoding, $3 untie, $4 steps
  rm -rf "/tmp/ck-$1"  # --resume none refuses a folder that holds checkpoints
  "$tupe" pretrain --config configs/small.ini --resume none --train.device cuda --precision.precision bf16 \
    --model.position_encoding "$2" --model.untie_cls "$3" --data.train_shards "$shards" \
    --data.validation_shards "$shards" --data.global_batch_size 128 --train.micro_batch_size 128 \
    --data.pad_to_max_seq_len true --train.max_steps "$4" --optimizer.total_steps 1000 \
    --train.log_every 10 --train.eval_every "$4" --train.progress false --checkpoint.dir "/tmp/ck-$1" \
    --checkpoint.every_steps 0 > "$out/pretrain-$1.log" 2>&1
}
run_pretrain tupe-r tupe-relative true 200; pre=$?
run_pretrain bert-a bert-absolute false 200
"$build/dist/allreduce_bench" --device cuda > "$out/allreduce.log" 2>&1 || true
"$build/trainer/loop/variant_step_bench" --shards "$shards" --device cuda --precision bf16 --hidden 768 \
  --layers 12 --batch 64 --rounds 30 > "$out/variant_step.log" 2>&1 || true

python3 - "$out" "$unit" "$pre" <<'PY'
import json, sys, os
out, unit, pre = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def tps(name):
    p = f"/tmp/ck-{name}/metrics/rank_0.jsonl"
    if not os.path.exists(p): return None, None, None
    r = [json.loads(l) for l in open(p)]
    t = [x for x in r if "tokens_per_s" in x][2:]
    v = [x["validation_loss"] for x in r if "validation_loss" in x]
    return (sum(x["tokens_per_s"] for x in t) / max(len(t), 1)), (t[-1]["loss"] if t else None), (v[-1] if v else None)
a, r = tps("bert-a"), tps("tupe-r")
rows = [("model/unit tests on GPU build", "pass" if unit == 0 else "FAIL"),
        ("pretrain TUPE-R bf16 200 steps", "ok" if pre == 0 else "FAIL"),
        ("TUPE-R tokens/s", f"{r[0]:.0f}" if r[0] else "-"),
        ("BERT-A tokens/s", f"{a[0]:.0f}" if a[0] else "-"),
        ("step time TUPE-R / BERT-A", f"{a[0] / r[0]:.3f}" if a[0] and r[0] else "-"),
        ("TUPE-R last loss / validation", f"{r[1]} / {r[2]}")]
text = "\n".join(f"{k:34s} {v}" for k, v in rows)
print(text)
open(os.path.join(out, "summary.txt"), "w").write(text + "\n")
PY
grep -E "bytes|busbw|GB/s" "$out/allreduce.log" | tail -8
tail -6 "$out/variant_step.log"
