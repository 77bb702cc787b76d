#!/usr/bin/env python3
"""The figures of launch/gpu_check.sh: one short line per step out of that step's output
files, the summary table and the plan check. Standard library only (the GPU host's Python
3.12 and the rehearsal's run it; so does CI's 3.11).

  gpu_figures.py pretrain METRICS.jsonl [--launch-bound]
                                             tokens/s, MFU, last loss, validation loss, and
                                             for fp16 the loss scale and skipped steps;
                                             --launch-bound: a small model, no MFU figure
  gpu_figures.py finetune RESULTS.json       each task's dev score
  gpu_figures.py allreduce LOG               busbw of the largest size, wrong elements; at
                                             world size 1 microseconds per call only
  gpu_figures.py bench LOG                   per SDPA mode: tokens/s, MFU, TUPE-R / BERT-A
  gpu_figures.py ctest LOG                   passed / skipped / failed of a ctest -V run
  gpu_figures.py summary STEPS.tsv --title T [PLAN OPTIONS] [--note TEXT]...
                                             the summary (markdown): the steps, then the plan
  gpu_figures.py plan STEPS.tsv [PLAN OPTIONS]
                                             the plan check alone: prints it, exit 1 unless
                                             it fits
PLAN OPTIONS: --deadline S (570) --reserve S (120) --host-cores N (16) --here-cores N (1)
              --measured-gpu (the GPU steps' own times: a run on the GPU host)

A figures command prints one line and exits 0, or prints "figures: <file>: <cause>" to
stderr and exits 1 when the file lacks what it needs (so a row never silently loses its
numbers). STEPS.tsv (written by gpu_check.sh, one step a line, tab-separated):
  phase  step  status  seconds  kind  cap_s  planned_s  cpu_s  result
where cpu_s is the user + system time of the step's processes and kind says how the step's
time moves to the GPU host: "parallel" (compiles: their CPU time spread over the host's cores
at PARALLEL_EFFICIENCY; without a CPU time, the planned time), "serial" (one process on the
CPU: about the same there; but where its wall time here exceeds both its CPU time and its
planned time, the rest was waiting on a loaded machine, and the larger of those two counts),
"gpu" (runs on the GPU there: a CPU rehearsal's time says nothing; the plan takes its planned
time). With --measured-gpu (a run on the GPU host) every step counts with its own time. A
step that did not run (status planned, skipped) counts with its planned time.

The plan fits when (1) the estimates of all steps plus the reserve (a host's start-up,
counted in full) are within the deadline less the 15 s gpu_check.sh keeps for the last
summary, and (2) the build steps' estimates plus every "figures" step at its full cap plus
the reserve are within the deadline too (the figures come first and must not depend on the
planned GPU times being right). When (1) fails, the last steps the reserve would cut are named.
"""
import json
import re
import sys

PARALLEL_EFFICIENCY = 0.75  # of a Ninja build on many cores (its serial parts: PCH first, links last)
RAN = ("ok", "FAIL", "TIMEOUT", "NO-FIGURES", "STOPPED")  # statuses of a step that ran


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


def pretrain(path, *flags):
    """Mean tokens/s and MFU of the logged windows after the first two (start-up), the last
    training loss and the last validation loss of a rank's metrics file; the last loss scale
    and the skipped steps when the scale is not 1 (fp16) or a step was skipped. With
    --launch-bound (the check's small model, d 256, whose GPU steps are set by kernel
    launches, not FLOPs) the MFU is left out and the tokens/s are labelled so."""
    for f in flags:
        if f != "--launch-bound":
            raise FiguresError(f"pretrain: unknown argument {f}")
    launch_bound = "--launch-bound" in flags
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
    tokens = f"{mean([r['tokens_per_s'] for r in steady]):,.0f} tokens/s"
    parts = [f"launch-bound: {tokens} (small model: no MFU figure)" if launch_bound else tokens]
    mfu = [r["mfu"] for r in steady if isinstance(r.get("mfu"), (int, float)) and r["mfu"] >= 0]
    if mfu and not launch_bound:
        parts.append(f"MFU {100 * mean(mfu):.1f}%")
    parts.append(f"last loss {train[-1]['loss']:.3f} (step {train[-1].get('step', '?')})")
    val = [r for r in records if "validation_loss" in r]
    parts.append(f"validation {val[-1]['validation_loss']:.3f}" if val else "no validation")
    last = train[-1]
    scale, skipped = last.get("loss_scale"), last.get("skipped_steps")
    if (isinstance(scale, (int, float)) and scale != 1) or (isinstance(skipped, (int, float)) and skipped > 0):
        parts.append(f"loss scale {scale:g}, {skipped} skipped step(s)")
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


def size_text(n):
    """Bytes as MiB, or KiB below 1 MiB."""
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def allreduce(path):
    """The largest size's busbw; at world size 1 (no byte moves: allreduce_bench prints "-"
    for the bandwidths) its microseconds per call, labelled as such."""
    text = read_text(path)
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) == 6 and not line.startswith("#"):
            try:
                bw = (None, None) if f[3] == "-" and f[4] == "-" else (float(f[3]), float(f[4]))
                rows.append((int(f[0]), float(f[2]), bw[0], bw[1], int(f[5])))
            except ValueError:
                continue
    m = re.search(r"^# total wrong elements: (\d+)", text, re.M)
    if not rows or m is None:
        raise FiguresError(f"{path}: no size rows or no '# total wrong elements' line")
    size, time_us, algbw, busbw, _ = max(rows)
    head = re.search(r"^# tupe allreduce_bench: backend (\S+), (\d+) ranks", text, re.M)
    who = f"{head.group(1)} x{head.group(2)}: " if head else ""
    if algbw is None:
        return (f"{who}{size_text(size)} {time_us:,.1f} us per call (world size 1: no bytes move, so no "
                f"bandwidth; the data check is trivial); {m.group(1)} wrong")
    return f"{who}{size_text(size)} busbw {busbw:.2f} GB/s (algbw {algbw:.2f}); {m.group(1)} wrong"


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


# ---- The summary and the plan ---------------------------------------------------------------

def read_steps(path):
    steps = []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        f = line.split("\t")
        if len(f) != 9:
            raise FiguresError(f"{path}:{n}: {len(f)} fields, expected 9")
        phase, step, status, seconds, kind, cap, planned, cpu, result = f
        if kind not in ("parallel", "serial", "gpu"):
            raise FiguresError(f"{path}:{n}: kind '{kind}' is not parallel, serial or gpu")
        try:
            steps.append(dict(phase=phase, step=step, status=status, s=float(seconds), kind=kind, cap=float(cap),
                              planned=float(planned), cpu=float(cpu), result=result))
        except ValueError:
            raise FiguresError(f"{path}:{n}: seconds, cap, planned or CPU time is not a number")
    return steps


def plan_options(args):
    """PLAN OPTIONS (see the module text) -> dict, and the arguments left."""
    o = dict(deadline=570.0, reserve=120.0, host_cores=16, here_cores=1, measured_gpu=False)
    names = {"--deadline": ("deadline", float), "--reserve": ("reserve", float),
             "--host-cores": ("host_cores", int), "--here-cores": ("here_cores", int)}
    rest, i = [], 0
    while i < len(args):
        if args[i] == "--measured-gpu":
            o["measured_gpu"] = True
            i += 1
        elif args[i] in names:
            if i + 1 >= len(args):
                raise FiguresError(f"{args[i]}: no value")
            key, conv = names[args[i]]
            try:
                o[key] = conv(args[i + 1])
            except ValueError:
                raise FiguresError(f"{args[i]}: '{args[i + 1]}' is not a number")
            i += 2
        else:
            rest.append(args[i])
            i += 1
    return o, rest


def host_estimate(step, o):
    """Seconds the step should take on the GPU host (see the module text)."""
    if step["status"] not in RAN:
        return step["planned"]
    if step["kind"] == "parallel":
        return step["cpu"] / (o["host_cores"] * PARALLEL_EFFICIENCY) if step["cpu"] > 0 else step["planned"]
    if step["kind"] == "gpu":
        return step["s"] if o["measured_gpu"] else step["planned"]
    if o["measured_gpu"]:
        return step["s"]  # the host's own time
    # A serial step here: its wall time, unless that exceeds both its CPU time and the plan,
    # when the difference is waiting on this (shared) machine: then the larger of the two.
    return min(step["s"], max(step["cpu"], step["planned"]))


def plan(steps, o):
    """(lines, fits): the plan table and its two checks (see the module text)."""
    lines = [f"## Plan: one command, deadline {o['deadline']:.0f} s, {o['reserve']:.0f} s kept in reserve "
             f"({o['host_cores']} host cores, {o['here_cores']} here)", "",
             "Per step: the time here (wall, CPU) and the estimate on the host: a compile's CPU time spread over "
             f"{o['host_cores']} cores at {PARALLEL_EFFICIENCY:.0%} efficiency, CPU steps as here (less waiting on a "
             "loaded machine), GPU steps "
             + ("their own time" if o["measured_gpu"] else "their planned time (a CPU run says nothing of them)")
             + "; a step that did not run, its planned time.", "",
             "| phase | step | kind | s here | CPU s here | est. s on the host | planned s | cap s |",
             "|---|---|---|---|---|---|---|---|"]
    total = figures_at_caps = 0.0
    for s in steps:
        est = host_estimate(s, o)
        total += est
        if s["phase"] == "figures":
            figures_at_caps += s["cap"] if s["kind"] == "gpu" else est
        elif s["phase"] == "build":
            figures_at_caps += est
        lines.append(f"| {s['phase']} | {s['step']} | {s['kind']} | {s['s']:.0f} | {s['cpu']:.0f} | {est:.0f} | "
                     f"{s['planned']:.0f} | {s['cap']:.0f} |")
    usable = o["deadline"] - 15  # gpu_check.sh keeps 15 s for the last summary
    all_in = total + o["reserve"]
    figures_in = figures_at_caps + o["reserve"]
    fits = all_in <= usable and figures_in <= o["deadline"]
    lines += ["",
              f"- every step: estimated {total:.0f} s; {'fits' if total <= usable else 'DOES NOT FIT'} in the "
              f"{usable:.0f} s the {o['deadline']:.0f} s deadline leaves for steps"]
    if all_in <= usable:
        lines.append(f"- every step with the {o['reserve']:.0f} s reserve: {all_in:.0f} s; fits in the "
                     f"{usable:.0f} s")
    else:  # the steps whose estimated end, with the reserve, falls past the deadline
        t, late = o["reserve"], []
        for s in steps:
            t += host_estimate(s, o)
            if t > usable:
                late.append(s["step"])
        lines.append(f"- every step with the {o['reserve']:.0f} s reserve: {all_in:.0f} s, over the "
                     f"{usable:.0f} s by {all_in - usable:.0f} s: these last steps would be cut: {', '.join(late)}")
    lines += [f"- up to the last figure, every GPU figure at its cap: {figures_at_caps:.0f} s + {o['reserve']:.0f} s "
              f"reserve = {figures_in:.0f} s; {'fits' if figures_in <= o['deadline'] else 'DOES NOT FIT'}",
              f"- plan: {'FITS' if fits else 'DOES NOT FIT'} (every step with the reserve within the deadline, "
              "and the figures within it with the reserve and every GPU figure at its cap)"]
    return lines, fits


def summary(args):
    o, rest = plan_options(args)
    if not rest:
        raise FiguresError("summary: no STEPS.tsv")
    steps_path, title, extra = rest[0], "tupe GPU check", []
    i = 1
    while i < len(rest):
        if rest[i] in ("--title", "--note") and i + 1 < len(rest):
            if rest[i] == "--title":
                title = rest[i + 1]
            else:
                extra.append(rest[i + 1])
            i += 2
        else:
            raise FiguresError(f"summary: unknown argument {rest[i]}")
    steps = read_steps(steps_path)
    lines = [f"# {title}", ""] + [f"{e}" for e in extra] + ([""] if extra else [])
    lines += ["| phase | step | status | s | result |", "|---|---|---|---|---|"]
    for s in steps:
        lines.append(f"| {s['phase']} | {s['step']} | {s['status']} | {s['s']:.0f} | {s['result']} |")
    lines += [""] + plan(steps, o)[0]
    return "\n".join(lines) + "\n"


def plan_command(args):
    o, rest = plan_options(args)
    if len(rest) != 1:
        raise FiguresError("plan: expected one STEPS.tsv and plan options")
    lines, fits = plan(read_steps(rest[0]), o)
    print("\n".join(lines))
    return 0 if fits else 1


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    what, rest = argv[1], argv[2:]
    commands = {"finetune": finetune, "allreduce": allreduce, "bench": bench, "ctest": ctest}
    try:
        if what == "summary":
            sys.stdout.write(summary(rest))
        elif what == "plan":
            return plan_command(rest)
        elif what == "pretrain":
            print(pretrain(rest[0], *rest[1:]))
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
