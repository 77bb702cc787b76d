"""A fine-tuning run again into its folder, the saved model's step, evaluate's folder, a failed
job's leftovers and the truncation line (GlueE2E_rerun).

Usage: rerun_checks.py TUPE CKPT VOCAB WORKDIR BAD_GLUE
  1. `tupe finetune` on RTE (3 epochs, the best epoch reported) into WORKDIR/out: the saved
     model is models/RTE/step_<N> with N = selected_epoch x steps_per_epoch (results.json), and
     its trainer_state.json says step N; the console's truncation line gives the dev rows cut to
     max length 32, counted here with Hugging Face's BertTokenizer (longest-first: a pair is cut
     when its word pieces exceed 32 - 3).
  2. The same command again is refused in one line, exit 1, results.json untouched.
  3. With --overwrite (another seed): one model folder, one TensorBoard run, new results.
  4. `tupe evaluate --model out/models/RTE` writes models/RTE/evaluation/step_<N>/ and names
     the step folder; out/submission/RTE.tsv is untouched; evaluate into out itself is refused.
  5. A job that fails on its first task (a bad train row) leaves nothing in its folder.
  6. A selection split the second task cannot have (too few of WNLI's rows) is refused before
     the first task trains, in one line naming the task and the key, and makes no folder.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

GLUE = os.path.join(os.environ["TUPE_SHARED_DATA"], "glue")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        sys.exit(1)


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def dev_rows_cut(vocab, max_length):
    """RTE dev pairs longer than max_length - 3 word pieces (the [CLS] A [SEP] B [SEP] layout)."""
    import csv
    from transformers import BertTokenizer
    tok = BertTokenizer(vocab, do_lower_case=True)
    with open(os.path.join(GLUE, "RTE", "dev.tsv"), encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    cut = sum(1 for r in rows if len(tok.tokenize(r["sentence1"])) + len(tok.tokenize(r["sentence2"])) > max_length - 3)
    return cut, len(rows)


def main(tupe, ckpt, vocab, work, bad_glue):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    out = os.path.join(work, "out")
    base = [tupe, "finetune", "--finetune.checkpoint", ckpt, "--tokenizer.vocab", vocab, "--finetune.tasks", "RTE",
            "--finetune.data_dir", GLUE, "--finetune.train_rows", "96", "--finetune.epochs", "3",
            "--finetune.batch_size", "16", "--finetune.learning_rates", "3e-3", "--finetune.max_length", "32",
            "--finetune.threads", "1", "--finetune.select_epoch", "best", "--finetune.output_dir", out]
    # 1. the saved model's step, the truncation line
    rc, log = run(base + ["--finetune.seeds", "2"])
    check(rc == 0, "the first fine-tuning ran")
    res = json.load(open(os.path.join(out, "results.json")))
    r = res["tasks"][0]["runs"][0]
    n = r["selected_epoch"] * r["steps_per_epoch"]
    check(r["selected_epoch"] < len(r["epochs"]),
          f"the best epoch ({r['selected_epoch']}) is not the last ({len(r['epochs'])}): the step naming is tested")
    steps = sorted(os.listdir(os.path.join(out, "models", "RTE")))
    check(steps == [f"step_{n:08d}"], f"the saved model is named by the step it holds: {steps} == step_{n:08d}")
    state = json.load(open(os.path.join(out, "models", "RTE", steps[0], "trainer_state.json")))
    check(state["step"] == n, f"its trainer_state.json says step {state['step']} == {n}")
    cut, rows = dev_rows_cut(vocab, 32)
    m = re.search(r"cut to max length 32: ([^\n]*)", log)
    check(m is not None and f"{cut} of {rows} dev" in m.group(1),
          f"the console says {cut} of {rows} dev rows are cut (HF's tokenizer): {m.group(0) if m else log[-2000:]}")
    # 2. a rerun into the same folder is refused, nothing touched
    before = {f: sha(os.path.join(out, f)) for f in ("results.json", "results.md", "effective_config.ini")}
    rc, log = run(base + ["--finetune.seeds", "3"])
    errors = [line for line in log.splitlines() if "error" in line]
    check(rc != 0 and len(errors) == 1 and "holds a previous fine-tuning" in errors[0] and "--overwrite" in errors[0],
          f"a rerun is refused in one line: {errors}")
    check(all(sha(os.path.join(out, f)) == h for f, h in before.items()), "its folder is untouched")
    # 3. --overwrite replaces it whole
    rc, log = run(base + ["--finetune.seeds", "3", "--overwrite"])
    check(rc == 0, "the rerun with --overwrite ran")
    res3 = json.load(open(os.path.join(out, "results.json")))
    r3 = res3["tasks"][0]["runs"][0]
    check(r3["seed"] == 3 and sha(os.path.join(out, "results.json")) != before["results.json"], "results.json is the new run's")
    n3 = r3["selected_epoch"] * r3["steps_per_epoch"]
    steps = sorted(os.listdir(os.path.join(out, "models", "RTE")))
    check(steps == [f"step_{n3:08d}"], f"one model folder, the new run's: {steps}")
    tb = os.path.join(out, "tensorboard", "RTE")
    if os.path.isdir(tb):
        check(sorted(os.listdir(tb)) == ["lr0.003_seed3"], f"one TensorBoard run, the new one: {sorted(os.listdir(tb))}")
    # 4. evaluate writes next to the model and names it
    sub = sha(os.path.join(out, "submission", "RTE.tsv"))
    model = os.path.join(out, "models", "RTE")
    ev = [tupe, "evaluate", "--model", model, "--finetune.data_dir", GLUE, "--finetune.threads", "1"]
    rc, log = run(ev)
    step_dir = os.path.join(model, f"step_{n3:08d}")
    check(rc == 0 and f"evaluating {step_dir}" in log, f"evaluate names the step folder it scores ({step_dir})")
    report = os.path.join(model, "evaluation", f"step_{n3:08d}", "evaluation_RTE.json")
    check(os.path.isfile(report) and json.load(open(report))["model"] == step_dir, f"its report is next to the model: {report}")
    check(os.path.isfile(os.path.join(model, "evaluation", f"step_{n3:08d}", "submission", "RTE.tsv")), "so is its submission")
    check(sha(os.path.join(out, "submission", "RTE.tsv")) == sub, "finetune's submission/RTE.tsv is untouched")
    rc, log = run(ev + ["--finetune.output_dir", out])
    check(rc != 0 and "holds a fine-tuning's results" in log, "evaluate into the fine-tuning's own folder is refused")
    check(sha(os.path.join(out, "submission", "RTE.tsv")) == sub, "and it stays untouched")
    # 5. a failed job leaves nothing behind
    failed = os.path.join(work, "failed")
    rc, log = run([tupe, "finetune", "--finetune.checkpoint", ckpt, "--tokenizer.vocab", vocab, "--finetune.tasks", "WNLI",
                   "--finetune.data_dir", bad_glue, "--finetune.epochs", "1", "--finetune.threads", "1",
                   "--finetune.output_dir", failed])
    check(rc != 0 and "unknown label" in log, "the bad-row job failed")
    left = sorted(os.listdir(failed)) if os.path.isdir(failed) else []
    check(left == [], f"and left nothing in its folder: {left}")
    # 6. a selection split one task cannot have is refused before any task trains
    early = os.path.join(work, "early")
    args = base[:base.index("--finetune.output_dir")] + ["--finetune.output_dir", early]
    args[args.index("--finetune.tasks") + 1] = "RTE,WNLI"
    args[args.index("--finetune.train_rows") + 1] = "1000"
    rc, log = run(args + ["--finetune.selection_fraction", "0.0007"])
    errors = [line for line in log.splitlines() if "error" in line]
    check(rc != 0 and len(errors) == 1 and "WNLI: finetune.selection_fraction 0.0007 of 635 train rows leaves 0 for "
          "selection" in errors[0] and "RTE lr" not in log and not os.path.exists(early),
          f"a selection split WNLI cannot have is refused before RTE trains, no folder made: {errors}")
    print("all checks passed")


if __name__ == "__main__":
    main(*sys.argv[1:6])
