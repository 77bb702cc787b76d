"""Report of the time-to-quality benchmark (bench/time_to_quality.sh): per round (one seed),
the seconds of training that Hugging Face's BERT-A (hf_train.py) and tupe's TUPE-R take to
reach the validation loss HF BERT-A ends at, and their ratio HF / tupe.

Target: HF's validation loss at its final step, per seed (round r's target is that round's
HF run, so each round compares one pair of runs made back to back). A side reaches it at its
first evaluation step with a loss at or under the target (HF: normally its final step).
Seconds of training: the training loop's wall-clock up to that step, without evaluation,
checkpoint writes and start-up, on both sides:
- HF: "train_s" of its validation record at that step (metrics.jsonl);
- tupe: the sum of step_time_s x steps over the log windows up to that step
  (checkpoints/metrics/rank_0.jsonl; the trainer keeps validation and checkpoint saves out
  of its windows, and the script logs at every evaluation step, so the windows end there).
tupe's losses are its exported checkpoints scored by score_exports.py (eval.jsonl), HF's are
scored in its loop: one piece of code (mlm_data.masked_lm_loss) on one validation set.

Writes WORK/report.md and prints it.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import by_step, records  # noqa: E402


def tupe_train_seconds(metrics_path: str) -> dict:
    """{step: seconds of training up to the end of that step's log window}."""
    windows = by_step(records(metrics_path), "step_time_s")
    out, total, prev = {}, 0.0, 0
    for step in sorted(windows):
        total += windows[step] * (step - prev)
        out[step], prev = total, step
    return out


def first_at_or_under(losses: dict, target: float):
    """The first step whose loss is at or under `target`, or None."""
    return next((s for s in sorted(losses) if losses[s] <= target), None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--seeds", required=True, help="the rounds' seeds, in order")
    ap.add_argument("--steps", type=int, required=True, help="each run's last step")
    ap.add_argument("--threads", type=int, required=True)
    a = ap.parse_args()
    rows, ratios, pending = [], [], []
    for r, seed in enumerate(a.seeds.split(), start=1):
        hf_recs = records(f"{a.work}/hf-seed{seed}/metrics.jsonl")
        hf_loss, hf_time = by_step(hf_recs, "validation_loss"), by_step(hf_recs, "train_s")
        tupe_loss = by_step(records(f"{a.work}/tupe-seed{seed}/eval.jsonl"), "validation_loss")
        tupe_time = tupe_train_seconds(f"{a.work}/tupe-seed{seed}/checkpoints/metrics/rank_0.jsonl")
        if a.steps not in hf_loss or a.steps not in tupe_loss or a.steps not in hf_time:
            pending.append(seed)
            continue
        target = hf_loss[a.steps]
        hs = first_at_or_under(hf_loss, target)
        ts = first_at_or_under(tupe_loss, target)
        h = hf_time[hs]
        hf_per_step, tupe_per_step = hf_time[a.steps] / a.steps, tupe_time[a.steps] / a.steps
        if ts is None:
            ratio = f"< {h / tupe_time[a.steps]:.2f} (not reached)"
            tupe_cell = f"not reached in {a.steps} steps (> {tupe_time[a.steps]:.1f} s)"
        else:
            ratios.append(h / tupe_time[ts])
            ratio = f"**{ratios[-1]:.2f}**"
            tupe_cell = f"{tupe_time[ts]:.1f} s at step {ts} ({tupe_loss[ts]:.4f})"
        rows.append(f"| {r} | {seed} | {target:.4f} | {h:.1f} s at step {hs} | {tupe_cell} | {ratio} | "
                    f"{tupe_loss[a.steps]:.4f} | {hf_per_step:.3f} / {tupe_per_step:.3f} |")
    lines = [f"Time to quality, {a.steps} steps per run, {a.threads} thread(s) each: seconds of training for HF "
             "BERT-A (BertForMaskedLM, hf_train.py) and tupe TUPE-R to reach HF BERT-A's validation loss at its final "
             "step (per round, that round's HF run). Training seconds exclude evaluation, checkpoint writes and "
             "start-up on both sides; a side's time is at its first evaluation step at or under the target.",
             "",
             "| round | seed | target (HF final loss) | HF | tupe TUPE-R (loss) | HF / tupe | tupe final loss | "
             "s/step HF / tupe |",
             "|---|---|---|---|---|---|---|---|"] + rows + [""]
    if ratios:
        lines.append(f"HF / tupe over {len(ratios)} round(s) where tupe reached the target: median "
                     f"**{statistics.median(ratios):.2f}**, min {min(ratios):.2f}, max {max(ratios):.2f}.")
    if len(ratios) < len(rows):
        lines.append(f"{len(rows) - len(ratios)} round(s) where tupe did not reach the target: their ratio is a bound.")
    if pending:
        lines.append(f"Not finished yet (no final evaluation on both sides): seed(s) {', '.join(pending)}.")
    with open(f"{a.work}/report.md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
