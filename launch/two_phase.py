#!/usr/bin/env python3
"""BERT's two-phase pre-training as one command: phase 1 (e.g. 128 tokens, 90% of the steps),
then phase 2 (e.g. 512 tokens) from phase 1's last checkpoint with a fresh optimizer and its own
warm-up and decay (`tupe pretrain --init-from`, docs/warm-start.md "Two phases").

  python3 launch/two_phase.py --phase1 configs/two-phase/toy-phase1.ini \\
      --phase2 configs/two-phase/toy-phase2.ini --corpus ../shared/data/text/wikitext-2/wiki.test.raw

Locally (default) the phases run one after the other, each under `mpirun -np N` (N = --np; no
mpirun for 1); a phase that stopped (a signal, a time limit) stops the chain, and running the
same command again resumes it (`--resume auto`: a finished phase ends at once). With
--launcher slurm each phase is one `sbatch launch/tupe.sbatch` job (TUPE_CONFIG = its preset),
phase 2 with --dependency=afterok on phase 1: it starts only once phase 1 has completed
(a pre-empted phase 1 is re-queued by tupe.sbatch and still holds phase 2 back).

Options:
  --phase1 INI, --phase2 INI  the presets (configs/two-phase/*.ini)
  --corpus FILE               preprocess FILE into each phase's shards first, where they are not
                              there yet (each preset's [preprocess] section; on this machine)
  --work DIR                  put each phase's shards (DIR/shards-1, DIR/shards-2) and checkpoints
                              (DIR/phase1, DIR/phase2) here instead of the presets' folders
  --vocab FILE                the vocabulary (--tokenizer.vocab) of both phases' preprocessing and
                              pre-training, instead of the presets' [tokenizer] vocab
  --np N                      ranks per phase, local launcher (default 1)
  --launcher local|slurm      (default local)
  --sbatch ARG                an sbatch option for both jobs (repeatable), e.g. --sbatch=--nodes=4
  --dry-run                   print the commands, run nothing
  -- ARGS                     more `tupe pretrain` options for both phases
Environment: TUPE_BIN (default build/cli/tupe).
"""
import argparse
import configparser
import os
import shlex
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TUPE = os.environ.get("TUPE_BIN", os.path.join(REPO, "build", "cli", "tupe"))


def fail(msg):
    sys.exit(f"two_phase: error: {msg}")


def ini_path(ini, section, key):
    """A path key of a preset, resolved against the preset's folder (as tupe reads it), or None."""
    cp = configparser.ConfigParser(interpolation=None)
    try:
        with open(ini) as f:
            cp.read_file(f)
    except (OSError, configparser.Error) as e:
        fail(f"{ini}: {e}")
    value = cp.get(section, key, fallback="").strip()
    if not value:
        return None
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(ini)), value))


class Phase:
    def __init__(self, number, ini, work):
        if not os.path.isfile(ini):
            fail(f"--phase{number} {ini}: no such file")
        self.number, self.ini = number, os.path.abspath(ini)
        self.shards = os.path.join(work, f"shards-{number}") if work else ini_path(ini, "data", "train_shards")
        self.checkpoints = os.path.join(work, f"phase{number}") if work else ini_path(ini, "checkpoint", "dir")
        if not self.checkpoints:
            fail(f"{ini}: [checkpoint] dir is not set (or give --work)")

    def overrides(self, work):
        if not work:
            return []
        return ["--data.train_shards", self.shards, "--data.validation_shards", self.shards,
                "--checkpoint.dir", self.checkpoints]


def run(cmd, dry_run):
    print("+ " + shlex.join(cmd), flush=True)
    if dry_run:
        return subprocess.CompletedProcess(cmd, 0, "", "")
    return subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def ranks(np_, cmd):
    if np_ <= 1:
        return cmd
    return ["mpirun", "-np", str(np_), "--bind-to", "none"] + cmd


def preprocess(phase, corpus, np_, vocab, dry_run):
    if not phase.shards:
        fail(f"{phase.ini}: [data] train_shards is not set (or give --work)")
    if os.path.exists(os.path.join(phase.shards, "effective_config.ini")):
        print(f"two_phase: phase {phase.number}'s shards are there: {phase.shards}")
        return
    p = run(ranks(np_, [TUPE, "preprocess", "--config", phase.ini, "--input", corpus, "--output", phase.shards,
                        "--overwrite", "--quiet"] + (["--tokenizer.vocab", vocab] if vocab else [])), dry_run)
    if p.returncode != 0:
        fail(f"preprocessing for phase {phase.number} failed (exit {p.returncode}):\n{p.stdout[-3000:]}")


def pretrain_args(phase, phases, work, extra):
    args = ["--config", phase.ini, "--resume", "auto"] + phase.overrides(work)
    if phase.number == 2:  # from phase 1's run folder: its newest whole checkpoint, the last once it finished
        args += ["--init-from", phases[0].checkpoints]
    return args + extra


def stream(cmd):
    """Runs cmd with its output passed through as it comes; (exit status, whether it printed
    pre-training's finishing line)."""
    print("+ " + shlex.join(cmd), flush=True)
    finished = False
    with subprocess.Popen(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as p:
        for line in p.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            finished |= "pre-training finished at step" in line
    return p.returncode, finished


def run_local(phases, work, np_, extra, dry_run):
    for phase in phases:
        cmd = ranks(np_, [TUPE, "pretrain"] + pretrain_args(phase, phases, work, extra))
        if dry_run:
            run(cmd, dry_run)
            continue
        status, finished = stream(cmd)
        if status != 0:
            fail(f"phase {phase.number} failed (exit {status}); fix the cause and run the same command again "
                 "(it resumes)")
        if not finished:
            fail(f"phase {phase.number} stopped before its last step; run the same command again to resume it")
    print("two_phase: both phases finished; phase 2's checkpoints: " + phases[1].checkpoints)


def run_slurm(phases, work, extra, sbatch_args, dry_run):
    sbatch_script = os.path.join(REPO, "launch", "tupe.sbatch")
    job = None
    for phase in phases:
        cmd = ["sbatch", "--parsable", f"--job-name=two-phase-{phase.number}",
               f"--export=ALL,TUPE_CONFIG={phase.ini},TUPE_BIN={TUPE}"] + sbatch_args
        if job:
            cmd.append(f"--dependency=afterok:{job}")
        # tupe.sbatch runs `pretrain --config $TUPE_CONFIG --resume auto` and appends these.
        cmd += [sbatch_script] + pretrain_args(phase, phases, work, extra)[4:]
        p = run(cmd, dry_run)
        if p.returncode != 0:
            fail(f"sbatch for phase {phase.number} failed (exit {p.returncode}): {' '.join(p.stdout.split())}")
        job = p.stdout.strip().split(";")[0] if not dry_run else str(1000 + phase.number)
        print(f"two_phase: phase {phase.number} is job {job}" + (" (afterok on phase 1)" if phase.number == 2 else ""),
              flush=True)


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser(description="BERT's two-phase pre-training as one command.")
    ap.add_argument("--phase1", required=True)
    ap.add_argument("--phase2", required=True)
    ap.add_argument("--corpus")
    ap.add_argument("--work")
    ap.add_argument("--vocab")
    ap.add_argument("--np", type=int, default=1)
    ap.add_argument("--launcher", choices=("local", "slurm"), default="local")
    ap.add_argument("--sbatch", action="append", default=[])
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args(argv)
    work = os.path.abspath(a.work) if a.work else None
    phases = [Phase(1, a.phase1, work), Phase(2, a.phase2, work)]
    if a.vocab:
        if not os.path.isfile(a.vocab):
            fail(f"--vocab {a.vocab}: no such file")
        a.vocab = os.path.abspath(a.vocab)
        extra = ["--tokenizer.vocab", a.vocab] + extra
    if a.corpus:
        if not os.path.isfile(a.corpus):
            fail(f"--corpus {a.corpus}: no such file")
        for phase in phases:
            preprocess(phase, a.corpus, a.np, a.vocab, a.dry_run)
    if a.launcher == "local":
        run_local(phases, work, a.np, extra, a.dry_run)
    else:
        run_slurm(phases, work, extra, a.sbatch, a.dry_run)


if __name__ == "__main__":
    main()
