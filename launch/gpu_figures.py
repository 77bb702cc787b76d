#!/usr/bin/env python3
"""The figures of launch/gpu_check.sh: one short line per step out of that step's output
files, and the summary table. Standard library only (the GPU host's Python 3.12 and the
rehearsal's run it; so does CI's 3.11).

  gpu_figures.py pretrain METRICS.jsonl      tokens/s, MFU, last loss, validation loss
  gpu_figures.py finetune RESULTS.json       each task's dev score
  gpu_figures.py allreduce LOG               busbw of the largest size, wrong elements
  gpu_figures.py bench LOG                   per SDPA mode: tokens/s, MFU, TUPE-R / BERT-A
  gpu_figures.py ctest LOG                   passed / skipped / failed of a ctest -V run
  gpu_figures.py summary STEPS.tsv --title T [--host-cores N] [--here-cores N]
                                             the summary (markdown) with the device plan

A figures command prints one line and exits 0, or prints "figures: <file>: <cause>" to
stderr and exits 1 when the file lacks what it needs (so a row never silently loses its
numbers). STEPS.tsv (written by gpu_check.sh, one step a line, tab-separated):
  part  step  status  seconds  kind  budget_s  cpu_s  result
where cpu_s is the user + system time of the step's processes and kind says how the step's
time moves to the GPU host: "parallel" (compiles: their CPU time spread over the host's cores
at PARALLEL_EFFICIENCY; without a CPU time, the wall time scaled by the cores), "serial" (one
process on the CPU: about the same there), "gpu" (runs on the GPU there: a CPU rehearsal's
time says nothing; the plan uses its budget).
"""
import json
import math
import re
import sys

LIMIT_S = 600  # the device tool's limit per call
SESSION_S = 900  # a task's device time, start-up, calls and idle time together
STARTUP_S = 180  # allowance for starting the machine (it takes minutes)
PARALLEL_EFFICIENCY = 0.75  # of a Ninja build on many cores (its serial parts: PCH first, links last)


class FiguresError(Exception):
    pass


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as e:
        raise FiguresError(f"{path}: {e.strerror}")


def mean(values):
    return sum(values) / len(values)


def pretrain(path):
    """Mean tokens/s and MFU of the logged windows after the first two (start-up), the last
    training loss and the last validation loss of a rank's metrics file."""
    records = []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise FiguresError(f"{path}:{n}: not JSON ({e.msg})")
    train = [r for r in records if "tokens_per_s" in r and "loss" in r]
    if not train:
        raise FiguresError(f"{path}: no training record (with tokens_per_s and loss)")
    steady = train[2:] if len(train) > 2 else train
    parts = [f"{mean([r['tokens_per_s'] for r in steady]):,.0f} tokens/s"]
    mfu = [r["mfu"] for r in steady if isinstance(r.get("mfu"), (int, float)) and r["mfu"] >= 0]
    if mfu:
        parts.append(f"MFU {100 * mean(mfu):.1f}%")
    parts.append(f"last loss {train[-1]['loss']:.3f} (step {train[-1].get('step', '?')})")
    val = [r for r in records if "validation_loss" in r]
    parts.append(f"validation {val[-1]['validation_loss']:.3f}" if val else "no validation")
    return ", ".join(parts)


def finetune(path):
    try:
        doc = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise FiguresError(f"{path}: not JSON ({e.msg})")
    out = []
    for task in doc.get("tasks", []):
        runs = task.get("runs") or []
        if not runs:
            continue
        scores = [r["score"] for r in runs if isinstance(r.get("score"), (int, float))]
        seconds = sum(r.get("seconds", 0) for r in runs)
        if scores:
            out.append(f"{task.get('task', '?')} {task.get('primary_metric', 'score')} {100 * max(scores):.1f}% "
                       f"({len(runs)} run(s), {task.get('train_rows', '?')} rows, {seconds:.0f} s)")
    if not out:
        raise FiguresError(f"{path}: no task with a scored run")
    return "; ".join(out)


def allreduce(path):
    text = read_text(path)
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) == 6 and not line.startswith("#"):
            try:
                rows.append((int(f[0]), float(f[3]), float(f[4]), int(f[5])))
            except ValueError:
                continue
    m = re.search(r"^# total wrong elements: (\d+)", text, re.M)
    if not rows or m is None:
        raise FiguresError(f"{path}: no size rows or no '# total wrong elements' line")
    size, algbw, busbw, _ = max(rows)
    head = re.search(r"^# tupe allreduce_bench: backend (\S+), (\d+) ranks", text, re.M)
    who = f"{head.group(1)} x{head.group(2)}: " if head else ""
    return f"{who}{size / 2**20:.0f} MiB busbw {busbw:.2f} GB/s (algbw {algbw:.2f}); {m.group(1)} wrong"


BENCH_MODE = re.compile(r"^sdpa (pinned|default): (.*)$")
BENCH_ROW = re.compile(r"^(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)%\s*$")


def bench(path):
    """Per SDPA mode of variant_step_bench: TUPE-R and BERT-A tokens/s and MFU, the median
    per-round step-time ratio TUPE-R / BERT-A, and the kernels they got."""
    modes, current = {}, None
    for line in read_text(path).splitlines():
        m = BENCH_MODE.match(line)
        if m:
            current = m.group(1)
            modes[current] = {"what": m.group(2), "rows": {}}
            continue
        r = BENCH_ROW.match(line)
        if r and current:
            modes[current]["rows"][r.group(1)] = (float(r.group(4)), float(r.group(5)), float(r.group(6)))
    out = []
    for mode, d in modes.items():
        rows = d["rows"]
        if "tupe-relative" not in rows or "bert-absolute" not in rows:
            raise FiguresError(f"{path}: sdpa {mode}: no tupe-relative or bert-absolute row")
        t, b = rows["tupe-relative"], rows["bert-absolute"]
        kernels = re.search(r"\((.*)\)$", d["what"])
        out.append(f"{mode} [{kernels.group(1) if kernels else d['what']}]: TUPE-R/BERT-A {t[0]:.3f}; "
                   f"TUPE-R {t[1]:,.0f} tok/s MFU {t[2]:.1f}%, BERT-A {b[1]:,.0f} tok/s MFU {b[2]:.1f}%")
    if not out:
        raise FiguresError(f"{path}: no 'sdpa pinned' or 'sdpa default' table")
    return "; ".join(out)


def ctest(path):
    text = read_text(path)
    m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", text)
    if m is None:
        raise FiguresError(f"{path}: no ctest result line")
    failed, total = int(m.group(2)), int(m.group(3))
    skipped = len(re.findall(r"\*\*\*Skipped", text))
    return f"{total} tests: {total - failed - skipped} passed, {skipped} skipped, {failed} failed"


# ---- The summary ----------------------------------------------------------------------------

def read_steps(path):
    steps = []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        f = line.split("\t")
        if len(f) != 8:
            raise FiguresError(f"{path}:{n}: {len(f)} fields, expected 8")
        part, step, status, seconds, kind, budget, cpu, result = f
        try:
            steps.append(dict(part=part, step=step, status=status, s=float(seconds), kind=kind,
                              budget=float(budget), cpu=float(cpu), result=result))
        except ValueError:
            raise FiguresError(f"{path}:{n}: seconds or budget is not a number")
    return steps


def host_estimate(step, here_cores, host_cores):
    """Seconds the step should take on the GPU host (see the module text)."""
    if step["kind"] == "parallel":
        if step["cpu"] > 0:
            return step["cpu"] / (host_cores * PARALLEL_EFFICIENCY)
        return step["s"] * here_cores / host_cores
    if step["kind"] == "gpu":
        return step["budget"]
    return step["s"]


def summary(args):
    steps_path, title, here_cores, host_cores, extra = args[0], "tupe GPU check", 1, 16, []
    i = 1
    while i < len(args):
        if args[i] == "--title":
            title = args[i + 1]
        elif args[i] == "--here-cores":
            here_cores = int(args[i + 1])
        elif args[i] == "--host-cores":
            host_cores = int(args[i + 1])
        elif args[i] == "--note":
            extra.append(args[i + 1])
        else:
            raise FiguresError(f"summary: unknown argument {args[i]}")
        i += 2
    steps = read_steps(steps_path)
    lines = [f"# {title}", ""] + [f"{e}" for e in extra] + ([""] if extra else [])
    lines += ["| part | step | status | s | result |", "|---|---|---|---|---|"]
    for s in steps:
        lines.append(f"| {s['part']} | {s['step']} | {s['status']} | {s['s']:.0f} | {s['result']} |")
    lines += ["", f"## Device plan (this run's times; {host_cores} host cores, {here_cores} here)", "",
              "Per step: the wall and CPU time here, and the estimate for the GPU host: a compile's CPU "
              f"time spread over {host_cores} cores at {PARALLEL_EFFICIENCY:.0%} efficiency, CPU steps as "
              "here, GPU steps their budget (the timeout they run under there).", "",
              "| part | step | kind | s here | CPU s here | est. s on the host | budget s |",
              "|---|---|---|---|---|---|---|"]
    totals = {}
    for s in steps:
        est = host_estimate(s, here_cores, host_cores)
        totals.setdefault(s["part"], [0.0, 0.0])
        totals[s["part"]][0] += est
        totals[s["part"]][1] += s["budget"]
        lines.append(f"| {s['part']} | {s['step']} | {s['kind']} | {s['s']:.0f} | {s['cpu']:.0f} | {est:.0f} | "
                     f"{s['budget']:.0f} |")
    lines.append("")
    for part, (est, budget) in totals.items():
        verdict = "fits" if est <= LIMIT_S else "DOES NOT FIT"
        lines.append(f"- call `{part}`: estimated {est:.0f} s on the host (budgets add up to {budget:.0f} s); "
                     f"{verdict} in one {LIMIT_S} s device call")
    if totals:
        total = STARTUP_S + sum(est for est, _ in totals.values())
        verdict = "fits" if total <= SESSION_S else "DOES NOT FIT"
        lines.append(f"- device session: start-up (allow {STARTUP_S} s) + the calls = {total:.0f} s; {verdict} in "
                     f"the {SESSION_S} s of device time a task gets")
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    what, rest = argv[1], argv[2:]
    commands = {"pretrain": pretrain, "finetune": finetune, "allreduce": allreduce, "bench": bench, "ctest": ctest}
    try:
        if what == "summary":
            sys.stdout.write(summary(rest))
        elif what in commands and len(rest) == 1:
            print(commands[what](rest[0]))
        else:
            sys.stderr.write(__doc__)
            return 2
    except FiguresError as e:
        print(f"figures: {e}", file=sys.stderr)
        return 1
    except (KeyError, TypeError, ValueError) as e:
        print(f"figures: {rest[0]}: unexpected content ({type(e).__name__}: {e})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
