"""train.profile_steps end to end: the commands of docs/profiling.md, run as shown, then what
they wrote.

Usage: trace_checks.py CHECK WORKDIR
  guide     the bash block under "## A trace of a CPU run" of docs/profiling.md (preprocess,
            mpirun -np 2 pretrain with --train.profile_steps, tupe analyze --run), in WORKDIR
            with the checkout's configs and build: one trace per rank and no other; each holds
            exactly the asked steps as "step <N>" ranges, and inside them the named ranges
            (data wait, forward, backward, every all-reduce bucket, gradient sync wait,
            optimizer, validation, checkpoint save) with durations between 0 and their step's;
            each metrics record has the exposed all-reduce figures (and no host-sync figure on
            the CPU); tupe analyze --run prints the window table
  refusals  bad train.profile_steps values are refused in one line naming the key
Environment: TUPE_BIN (the tupe executable), TUPE_SOURCE_DIR, TUPE_SHARED_DATA.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

from pretrain_common import DATA, ENV, SRC, TUPE


def check(ok, what):
    if not ok:
        sys.exit(f"FAILED: {what}")
    print("ok:", what)


def guide_commands():
    """The bash block under "## A trace of a CPU run" of docs/profiling.md, one command a line."""
    text = open(os.path.join(SRC, "docs", "profiling.md"), encoding="utf-8").read()
    section = text[text.index("## A trace of a CPU run"):]
    block = section[section.index("```bash\n") + len("```bash\n"):]
    return [l for l in block[:block.index("```")].splitlines() if l.strip() and not l.startswith("#")]


def run_as_shown(command, work):
    """Runs one documented command in `work`: build/cli/tupe is the build's, configs/ and
    ../shared/data are the checkout's."""
    words = shlex.split(command)
    words = [TUPE if w == "build/cli/tupe" else
             w.replace("../shared/data", DATA, 1) if w.startswith("../shared/data") else
             os.path.join(SRC, w) if w.startswith("configs/") else w for w in words]
    if words[0] == "mpirun":
        words[1:1] = ["--oversubscribe", "--bind-to", "none"]
    p = subprocess.run(words, cwd=work, env=ENV, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        sys.exit(f"FAILED: {command}\nexit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def option(command, key):
    words = shlex.split(command)
    return words[words.index(key) + 1]


def check_trace_file(path, first, last, buckets):
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    steps = {e["name"]: e for e in events if re.fullmatch(r"step \d+", e["name"])}
    want = {f"step {s}" for s in range(first, last + 1)}
    check(set(steps) == want, f"{os.path.basename(path)}: the steps traced are {sorted(steps)}, want {sorted(want)}")
    names = ["data wait", "forward", "backward", "gradient sync wait", "optimizer", "validation", "checkpoint save"]
    names += [f"all-reduce bucket {i}" for i in range(buckets)]
    for s, step in steps.items():
        begin, end = step["ts"], step["ts"] + step["dur"]
        check(0 < step["dur"] < 120e6, f"{s} lasts {step['dur'] / 1e3:.1f} ms")
        inside = [e for e in events if e["name"] in names and begin <= e["ts"] and e["ts"] + e["dur"] <= end + 1]
        found = {e["name"] for e in inside}
        # Validation and the checkpoint come at the first traced step (the guide's eval_every
        # and every_steps); every other range in every step.
        expected = set(names) - ({"validation", "checkpoint save"} if s != f"step {first}" else set())
        check(expected <= found, f"{s}: ranges {sorted(found)} hold {sorted(expected)}")
        for e in inside:
            if not 0 <= e["dur"] <= step["dur"]:
                sys.exit(f"FAILED: {s}: {e['name']} lasts {e['dur']} us, its step {step['dur']} us")
    # Nothing of the named ranges outside the asked steps (the trace starts and stops there).
    outside = [e["name"] for e in events if e["name"] in names and
               not any(st["ts"] <= e["ts"] <= st["ts"] + st["dur"] for st in steps.values())]
    check(not outside, f"{os.path.basename(path)}: no named range outside the asked steps ({outside[:5]})")


def check_guide(work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    commands = guide_commands()
    pretrain = next(c for c in commands if " pretrain " in c)
    first, last = (int(x) for x in option(pretrain, "--train.profile_steps").split(":"))
    outputs = [run_as_shown(c, work) for c in commands]
    ckpt = os.path.join(work, option(pretrain, "--checkpoint.dir"))
    traces = sorted(os.listdir(os.path.join(ckpt, "traces")))
    want = [f"rank{r}-steps{first}-{last}.json" for r in (0, 1)]
    check(traces == want, f"one trace per rank: {traces}")
    # The buckets of the run: the debug line of dist/ddp is not printed; count them from the trace of rank 0.
    rank0 = json.load(open(os.path.join(ckpt, "traces", want[0])))["traceEvents"]
    buckets = len({e["name"] for e in rank0 if e.get("ph") == "X" and e["name"].startswith("all-reduce bucket ")})
    check(buckets >= 1, f"{buckets} all-reduce buckets traced")
    for t in want:
        check_trace_file(os.path.join(ckpt, "traces", t), first, last, buckets)
    for r in (0, 1):
        recs = [json.loads(l) for l in open(os.path.join(ckpt, "metrics", f"rank_{r}.jsonl")) if '"step_time_s"' in l]
        check(len(recs) >= 2, f"rank {r}: {len(recs)} log records")
        for rec in recs:
            check(rec["exposed_allreduce_ms"] >= 0 and 0 <= rec["exposed_allreduce_fraction"] <= 1 and
                  "host_syncs_per_step" not in rec,
                  f"rank {r} step {rec['step']}: exposed all-reduce {rec['exposed_allreduce_ms']:.2f} ms/step "
                  f"({100 * rec['exposed_allreduce_fraction']:.1f}%), no host-sync figure on the CPU")
    analyze = next(o for c, o in zip(commands, outputs) if " analyze " in c)
    check("Where the step time went" in analyze.stdout and "exposed all-reduce" in analyze.stdout,
          "tupe analyze --run prints the window figures")
    print("\n".join(l for l in analyze.stdout.splitlines() if l.startswith("|")))


def check_refusals(work):
    base = [TUPE, "pretrain", "--config", os.path.join(SRC, "configs", "tiny.ini"), "--checkpoint.dir",
            os.path.join(work, "ck")]
    for value, cause in [("5:3", "B (3) is before A (5)"), ("0:2", "steps count from 1"), ("12", "is not A:B"),
                         ("a:3", "A is not a step number"), ("3:", "B is not a step number")]:
        p = subprocess.run(base + ["--train.profile_steps", value], env=ENV, capture_output=True, text=True, timeout=120)
        errors = [l for l in p.stderr.splitlines() if "error" in l]
        check(p.returncode != 0 and len(errors) == 1 and "train.profile_steps" in errors[0] and cause in errors[0],
              f"--train.profile_steps {value} refused in one line naming the key: {errors}")


CHECKS = {"guide": check_guide, "refusals": check_refusals}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in CHECKS:
        sys.exit(__doc__)
    CHECKS[sys.argv[1]](os.path.realpath(sys.argv[2]))
    print(sys.argv[1], "OK")
