"""The results store of a Table 1 run: the small, finished results of its jobs kept outside the
work folder (for the mini scale, in the repository: bench/paper/results-mini), so that a run
that outlives one machine goes on from them on the next instead of starting again.

What is kept (paths as under WORK; a few kB a job):
  glue/<ROW>-seed<S>/step<N>/<TASK>/{results.json,results.md,effective_config.ini}
  pilot/<TASK>/{results.json,results.md,effective_config.ini}
  pretrain/<ROW>-seed<S>/complete.json            the pre-training reached its last step
  pretrain/<ROW>-seed<S>/checkpoints/{metrics/rank_0.jsonl,effective_config.ini}
                                                  its validation curve (Figure 5a) and config
  grid/<ROW>-lr<LR>.{json,ini}                     an LR grid run's validation loss at its end
                                                  and its effective config (its checkpoints
                                                  are its row's first table pre-training's)
  report/{report.md,report.json,figure5a/...,figure5c/...}
                                                  the newest report and its figures, as drawn
Checkpoints are not kept (megabytes each). A pre-training is therefore taken as done without
its checkpoints only when its record is here and every fine-tuning that reads its checkpoints
is done too; otherwise it is trained again (bitwise the same: fixed seeds and threads).
Every file is written to a temporary name and renamed, so a store is never half-written.
"""
import json
import os
import shutil
import sys

FINETUNE_FILES = ("results.json", "results.md", "effective_config.ini")
PRETRAIN_FILES = (os.path.join("checkpoints", "metrics", "rank_0.jsonl"),
                  os.path.join("checkpoints", "effective_config.ini"), "complete.json")
REPORT_FILES = ("report.md", "report.json", os.path.join("figure5a", "validation.png"),
                os.path.join("figure5a", "compare.md"), os.path.join("figure5a", "compare.csv"),
                os.path.join("figure5c", "glue_curve.png"), os.path.join("figure5c", "glue_curve.md"))


def _copy(src, dst):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst + ".tmp")
    os.replace(dst + ".tmp", dst)


class Store:
    """Copies finished results between WORK and the store folder `root` ("" = no store)."""

    def __init__(self, root, work):
        self.root = os.path.abspath(root) if root else ""
        self.work = work

    def check(self):
        """Makes the store folder; exits with one line where it cannot be written."""
        if not self.root:
            return
        try:
            os.makedirs(self.root, exist_ok=True)
            probe = os.path.join(self.root, ".write-test")
            open(probe, "w").close()
            os.remove(probe)
        except OSError as e:
            sys.exit(f"paper: the results store {self.root}: cannot write there ({e.strerror})")

    def _files(self, job):
        """(path under WORK, path in the store) of what `job` leaves when done."""
        if job.kind in ("glue", "pilot"):
            names = [os.path.join(job.final, f) for f in FINETUNE_FILES]
        elif job.kind == "pretrain":
            names = [os.path.join(job.run_dir, f) for f in PRETRAIN_FILES]
        elif job.kind == "grid":
            names = [job.done_file, job.done_file[:-len(".json")] + ".ini"]
        elif job.kind == "report":  # under report/ in the store, its links kept relative
            return [(os.path.join(self.work, f), os.path.join(self.root, "report", f)) for f in REPORT_FILES]
        else:
            return []
        return [(n, os.path.join(self.root, os.path.relpath(n, self.work))) for n in names]

    def save(self, job):
        """After `job` is done: its results into the store (files it did not write are skipped;
        for the report, a figure it did not draw this time is removed, so the store's report is
        always one report)."""
        if not self.root:
            return
        for here, kept in self._files(job):
            if os.path.exists(here):
                _copy(here, kept)
            elif job.kind == "report" and os.path.exists(kept):
                os.remove(kept)
                if not os.listdir(os.path.dirname(kept)):  # a figure's folder left empty
                    os.rmdir(os.path.dirname(kept))

    def restore(self, leaves):
        """Before a run: fine-tunings and grid runs done in the store are copied into WORK; then a
        pre-training whose record is stored and whose fine-tunings are all done is too."""
        if not self.root or not os.path.isdir(self.root):
            return 0
        restored = 0
        for job in ([j for j in leaves if j.kind in ("glue", "pilot", "grid")] +
                    [j for j in leaves if j.kind == "pretrain"]):
            files = self._files(job)
            if job.done() or not all(os.path.exists(kept) for _, kept in files):
                continue
            if job.kind == "pretrain" and not all(j.done() for j in job.needed_by):
                continue  # its checkpoints are still needed: it is trained again
            for here, kept in files:
                _copy(kept, here)
            restored += 1
        return restored


def write_complete(job, steps):
    """WORK/pretrain/<RUN>/complete.json once the pre-training's last checkpoint exists: the
    step, and the last validation loss of its metrics (rank 0), for the store's record."""
    last = None
    metrics = os.path.join(job.run_dir, "checkpoints", "metrics", "rank_0.jsonl")
    if os.path.exists(metrics):
        for line in open(metrics):
            rec = json.loads(line)
            if "validation_loss" in rec:
                last = rec["validation_loss"]
    path = os.path.join(job.run_dir, "complete.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"steps": steps, "last_validation_loss": last}, f)
    os.replace(path + ".tmp", path)
