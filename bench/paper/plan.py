"""The jobs of one Table 1 run (paper.py, report.py): a scale file read, its rows laid out as
pre-trainings and fine-tunings, each job with its command, its folder and how it knows it is done.

Layout under WORK:
  configs/run.ini                      the scale file less [paper] (what every tupe job reads)
  shards/{train,validation}            the corpus (corpus = mixed-english), unless given
  pretrain/<RUN>-seed<S>/checkpoints   one pre-training per (row, seed); step_<N> kept at every
                                       fraction the report needs (checkpoint.keep_every)
  glue/<RUN>-seed<S>/step<N>/<TASK>    one `tupe finetune` per (pre-training, step, task); a
                                       ^mid row and a Figure 5c point share their folder
  grid/<ROW>-lr<LR>.{json,ini}         [paper] lr_grid: each grid run's validation loss at its
                                       end (and its effective config); the run itself is
                                       pretrain/<ROW>-lr<LR>-seed<first seed>
RUN is the row's name, or with an LR grid <ROW>-lr<LR> at the row's chosen LR: the table's first
seed then continues the grid run at that LR in its own folder, to the last step.
  pilot/<TASK>                         BERT-A (first seed) under the pilot's wider grid
  logs/, slurm/                        the jobs' output
"""
import configparser
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable, List, Optional

from scale_check import PaperSection, ScaleError, check_with_tupe, expected_settings, lr_name, settings_differ

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PAPER_KEYS_REQUIRED = ("seeds", "steps", "warmup_steps", "eval_every", "mid_fraction", "tasks", "threads")


def fail(msg):
    sys.exit(f"paper: {msg}")


# Per-row settings a row may change beside its encoding ("row.X = ENC UNTIE section.key=value
# ..."): any [model] key (`tupe info` reads them with the row) and the pre-training's peak LR,
# optimizer.lr (a positive number): a pre-LN baseline, a row's own LR. The harness's own keys
# are not among them: they are the same for every row by design.
ROW_SECTIONS = ("model", "optimizer")
ROW_OPTIMIZER_KEYS = ("optimizer.lr",)
HARNESS_KEYS = {"model.position_encoding", "model.untie_cls", "optimizer.total_steps", "optimizer.warmup_steps"}


@dataclass
class Row:
    name: str
    position_encoding: str = ""
    untie_cls: str = "false"
    mid_of: str = ""  # a ^mid row: the row whose pre-training it fine-tunes at mid_fraction
    overrides: tuple = ()  # ((section.key, value), ...): this row's own settings, in the order given

    def override_args(self, section=None):
        """The overrides (of `section` only, if given) as `tupe pretrain` / `tupe info` options:
        ["--model.layer_norm", "pre", ...]."""
        return [w for key, value in self.overrides if section in (None, key.split(".")[0])
                for w in (f"--{key}", value)]

    @property
    def pretrained_row(self):
        return self.mid_of or self.name


@dataclass
class Job:
    name: str
    kind: str  # pretrain | pilot | glue | report
    command: List[str]
    describe: str
    log_file: str
    done_file: str = ""        # exists when the job is done ("" = never done: the report)
    scratch: str = ""          # written first, renamed to `final` on success
    final: str = ""
    depends: List[str] = field(default_factory=list)
    array: Optional[List["Job"]] = None  # slurm: one job array of these
    list_file: str = ""                  # slurm: the array's command lines
    run_dir: str = ""                    # a pre-training: WORK/pretrain/<ROW>-seed<S>
    needed_by: List["Job"] = field(default_factory=list)  # a pre-training: the fine-tunings of its checkpoints
    check: Optional[Callable[[], bool]] = None  # a grid run: done when its validation loss at its end is known

    def done(self) -> bool:
        """A fine-tuning: its results.json exists. A pre-training: its last checkpoint exists, or
        its record (complete.json, from the store) does and every fine-tuning of it is done. A
        grid run: its record, or its validation loss at its last step in its metrics."""
        if self.check:
            return self.check()
        if not self.done_file:
            return False
        if os.path.exists(self.done_file):
            return True
        return (self.kind == "pretrain" and os.path.exists(os.path.join(self.run_dir, "complete.json"))
                and all(j.done() for j in self.needed_by))

    def finish(self):
        if self.scratch:
            shutil.rmtree(self.final, ignore_errors=True)
            os.rename(self.scratch, self.final)

    def shell_command(self):
        """One shell line doing what run_local does (slurm's job.sbatch runs it)."""
        line = shlex.join(self.command)
        if self.scratch:
            line = (f"rm -rf {shlex.quote(self.scratch)} && {line} && rm -rf {shlex.quote(self.final)} && "
                    f"mv {shlex.quote(self.scratch)} {shlex.quote(self.final)}")
        return ["bash", "-c", line]


class Scale:
    """A scale file (bench/paper/<scale>.ini): [paper] for the harness, the rest for tupe."""

    def __init__(self, path, work):
        self.path = os.path.abspath(path)
        self.name = os.path.splitext(os.path.basename(path))[0]
        if work is not None and not work.strip():
            fail("--work '': empty (name the run's folder, or leave --work out for runs/paper-<scale>)")
        self.work = os.path.abspath(work or os.path.join(REPO, "runs", f"paper-{self.name}"))
        self.tupe = os.path.abspath(os.environ.get("TUPE_BIN", os.path.join(REPO, "build", "cli", "tupe")))
        self.data = os.path.abspath(os.environ.get("TUPE_SHARED_DATA", os.path.join(REPO, "..", "shared", "data")))
        cp = configparser.ConfigParser(interpolation=None, strict=True)
        cp.optionxform = str
        try:
            with open(self.path, encoding="utf-8-sig") as f:
                self.text = f.read()
            cp.read_string(self.text, source=self.path)
        except UnicodeDecodeError as e:
            line = e.object[:e.start].count(b"\n") + 1
            fail(f"{self.path}:{line}: not UTF-8 text (byte {e.start})")
        except (OSError, configparser.Error) as e:
            fail(f"{self.path}: {' '.join(str(e).split())}")
        if "paper" not in cp:
            fail(f"{self.path}: no [paper] section")
        self.paper = dict(cp["paper"])
        self.sections = cp
        try:
            self._read_paper(PaperSection(self.path, self.text, self.paper))
        except ScaleError as e:
            fail(str(e))

    def _read_paper(self, p: PaperSection):
        """The [paper] values, each checked (scale_check.py); raises ScaleError."""
        for k in PAPER_KEYS_REQUIRED:
            p.require(k)
        p.check_all()
        self.rows = self._rows(p)
        self.seeds = p.seeds("seeds")
        self.steps = p.positive("steps")
        if p.count("warmup_steps") > self.steps:
            p.error("warmup_steps", f"more than the {self.steps} steps")
        if p.positive("eval_every") > self.steps:
            p.error("eval_every", f"more than the {self.steps} steps: no validation loss for Figure 5a")
        self.tasks = p.tasks("tasks")
        self.threads = p.positive("threads")
        self.protocol_chosen = p.boolean("protocol_chosen", "true")
        self.keep_every = self._keep_every()
        self._read_grid(p)
        self.mid_step = self.step_at(p.fraction("mid_fraction"), p, "mid_fraction")
        self.all_seeds_rows = p.names("all_seeds_rows")
        self.curve_rows = p.names("curve_rows")
        self.curve_steps = [self.step_at(f, p, "curve_fractions")
                            for f in (p.fractions("curve_fractions") if p.has("curve_fractions") else [1.0])]
        for key in ("all_seeds_rows", "curve_rows"):
            for r in p.names(key):
                if r not in self.rows:
                    p.error(key, f"names row {r}, which no row.{r} defines")
                if self.rows[r].mid_of:
                    p.error(key, f"{r} is a ^mid row (a fine-tuning of {self.rows[r].mid_of}); name a pre-trained row")
        if p.has("pilot_learning_rates"):
            p.rates("pilot_learning_rates")
        for key in [k for k in self.paper if k.startswith("train_rows.")]:
            if key[len("train_rows."):] not in self.tasks:
                p.error(key, f"{key[len('train_rows.'):]} is not among tasks = {self.paper['tasks']}")
        self.run_config = os.path.join(self.work, "configs", "run.ini")
        # The results store (store.py): [paper] store, a folder relative to the scale file.
        store = self.paper.get("store", "")
        self.store = os.path.join(os.path.dirname(self.path), store) if store else ""
        corpus = self.paper.get("corpus", "")
        if corpus in ("mixed-english", "wikitext-2-test"):
            self.train_shards = os.path.join(self.work, "shards", "train")
            self.validation_shards = os.path.join(self.work, "shards", "validation")
        else:
            for k in ("train_shards", "validation_shards"):
                if k not in self.paper:
                    raise ScaleError(f"{self.path}: [paper] {k} missing (or corpus = mixed-english)")
            base = os.path.dirname(self.path)
            self.train_shards = os.path.join(base, os.path.expanduser(self.paper["train_shards"]))
            self.validation_shards = os.path.join(base, os.path.expanduser(self.paper["validation_shards"]))
        self.vocab = os.path.join(self.data, self.paper.get("vocab", "vocab/bert-base-uncased-vocab.txt"))
        self.glue_dir = os.path.join(self.data, self.paper.get("glue", "glue"))

    def _read_grid(self, p: PaperSection):
        """[paper] lr_grid and lr_grid_fraction (docs/paper.md, "The pre-training LR grid")."""
        self.lr_grid = p.lr_grid("lr_grid")
        fraction = p.grid_fraction("lr_grid_fraction") if p.has("lr_grid_fraction") else 0.5
        self.grid_step = round(fraction * self.steps)
        if self.lr_grid and self.grid_step <= 0:
            p.error("lr_grid_fraction", f"{fraction:g} of {self.steps} steps is step 0: the grid would train nothing")
        if self.lr_grid:
            for r in self.rows.values():
                own = next((v for k, v in r.overrides if k == "optimizer.lr"), None)
                if own is not None:
                    p.error(f"row.{r.name}", f"'optimizer.lr={own}': a row's own LR and [paper] lr_grid exclude each "
                                             "other (the grid chooses every row's LR); drop one")
        self.best_lr, self.grid_losses = {}, {}

    # The LR grid: each pre-trained row at each LR of lr_grid, seed seeds[0], to grid_step.
    def grid_dir(self, row, lr):
        return os.path.join(self.work, "pretrain", f"{row}-lr{lr_name(lr)}-seed{self.seeds[0]}")

    def grid_record(self, row, lr):
        return os.path.join(self.work, "grid", f"{row}-lr{lr_name(lr)}.json")

    def grid_result(self, row, lr):
        """The validation loss of the grid run (row, lr) at grid_step: its record (written when the
        run ended, or taken from the store), else its metrics' evaluation at that step (a run
        Slurm ran, or one continued since); None while neither holds it."""
        record = self.grid_record(row, lr)
        if os.path.exists(record):
            rec = json.load(open(record))
            if rec.get("step") == self.grid_step:  # else made under another lr_grid_fraction: the metrics may hold it
                return rec["validation_loss"]
        metrics = os.path.join(self.grid_dir(row, lr), "checkpoints", "metrics", "rank_0.jsonl")
        loss = None
        if os.path.exists(metrics):
            for line in open(metrics):
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a record cut short by a crash
                if rec.get("step") == self.grid_step and isinstance(rec.get("validation_loss"), (int, float)):
                    loss = rec["validation_loss"]
        return loss

    def resolve_grid(self):
        """Each pre-trained row whose grid is done gets its LR: the lowest validation loss at
        grid_step, ties to the smaller LR (best_lr; grid_losses holds every loss known)."""
        self.best_lr, self.grid_losses = {}, {}
        if not self.lr_grid:
            return
        for r in self.rows.values():
            if r.mid_of:
                continue
            losses = {lr: self.grid_result(r.name, lr) for lr in self.lr_grid}
            self.grid_losses[r.name] = losses
            if all(v is not None for v in losses.values()):
                self.best_lr[r.name] = min(self.lr_grid, key=lambda lr: (losses[lr], lr))

    def ready(self, row):
        """The table's jobs of `row` (a pre-trained row's name) can be planned: no grid, or its grid is done."""
        return not self.lr_grid or row in self.best_lr

    def waiting_rows(self):
        """The pre-trained rows whose table jobs wait for their grid."""
        return [r.name for r in self.rows.values() if not r.mid_of and not self.ready(r.name)]

    def run_name(self, row):
        """The folder name of `row`'s table pre-trainings (a pre-trained row's name)."""
        if not self.lr_grid:
            return row
        if row not in self.best_lr:
            raise KeyError(f"{row}: its LR grid is not done")
        return f"{row}-lr{lr_name(self.best_lr[row])}"

    def _keep_every(self):
        word = self.sections.get("checkpoint", "keep_every", fallback="0").strip() or "0"
        if not word.lstrip("+").isdigit():
            raise ScaleError(f"{self.path}: [checkpoint] keep_every = {word}: not a whole number of steps")
        return int(word)

    def _rows(self, p: PaperSection):
        rows = {}
        for key, value in self.paper.items():
            if not key.startswith("row."):
                continue
            name, words = key[4:], value.split()
            if len(words) == 2 and words[1] == "mid":
                p.check_row(name, None)
                rows[name] = Row(name, mid_of=words[0])
            elif len(words) >= 2 and words[1] in ("true", "false"):
                p.check_row(name, words[0])
                rows[name] = Row(name, words[0], words[1], overrides=self._row_overrides(p, key, words[2:]))
            else:
                p.error(key, "expected '<position_encoding> <untie_cls> [section.key=value ...]' or '<ROW> mid'")
        for r in rows.values():
            if r.mid_of and (r.mid_of not in rows or rows[r.mid_of].mid_of):
                p.error(f"row.{r.name}", f"{r.mid_of} is no pre-trained row")
        if not rows:
            raise ScaleError(f"{self.path}: [paper] defines no row.<NAME>")
        return rows

    @staticmethod
    def _row_overrides(p: PaperSection, key, words):
        """A row's `section.key=value` words: sections of ROW_SECTIONS, no harness key, each key
        once (their values are read by `tupe info` with the row). Raises ScaleError naming `key`."""
        out = []
        for w in words:
            setting, eq, value = w.partition("=")
            section = setting.split(".")[0]
            if not eq or not value or "." not in setting or section not in ROW_SECTIONS:
                p.error(key, f"'{w}': a row's own setting is section.key=value, of the sections "
                             f"{', '.join(ROW_SECTIONS)}")
            if setting in HARNESS_KEYS:
                p.error(key, f"'{w}': {setting} is the harness's, the same for every row")
            if section == "optimizer" and setting not in ROW_OPTIMIZER_KEYS:
                p.error(key, f"'{w}': of the optimizer, a row sets only {', '.join(ROW_OPTIMIZER_KEYS)}")
            if setting == "optimizer.lr":
                try:
                    lr = float(value)
                except ValueError:
                    lr = float("nan")
                if not (math.isfinite(lr) and lr > 0):
                    p.error(key, f"'{w}': the LR must be a positive number")
            if any(setting == k for k, _ in out):
                p.error(key, f"'{w}': {setting} is given twice")
            out.append((setting, value))
        return tuple(out)

    def step_at(self, fraction, p: PaperSection, key):
        """The checkpoint step at `fraction` of the steps: past step 0, and the last step or one
        that checkpoint.keep_every keeps. Raises ScaleError naming `key`."""
        step = round(fraction * self.steps)
        if step <= 0:
            p.error(key, f"{fraction:g} of {self.steps} steps is step {step}: no checkpoint there")
        keep = self.keep_every
        if step != self.steps and (keep <= 0 or step % keep != 0):
            p.error(key, f"step {step} ({fraction:g} of {self.steps}) is not kept: set [checkpoint] keep_every "
                         f"to a divisor of it")
        return step

    def seeds_of(self, row):
        return self.seeds if row in self.all_seeds_rows else self.seeds[:1]

    def run_dir(self, row, seed):
        return os.path.join(self.work, "pretrain", f"{self.run_name(row)}-seed{seed}")

    def checkpoint(self, row, seed, step):
        return os.path.join(self.run_dir(row, seed), "checkpoints", f"step_{step:08d}")

    def glue_out(self, row, seed, step, task):
        return os.path.join(self.work, "glue", f"{self.run_name(row)}-seed{seed}", f"step{step}", task)

    def run_config_text(self):
        """The scale file's text without its [paper] section: what every tupe job reads."""
        keep, out = True, []
        for line in self.text.splitlines(keepends=True):
            s = line.strip()
            if s.startswith("[") and s.endswith("]"):
                keep = s != "[paper]"
            if keep:
                out.append(line)
        return "# written by bench/paper/paper.py from " + self.path + " (less [paper])\n" + "".join(out)

    def check_rows_with_tupe(self):
        """Each row's model and tupe sections as `tupe info` reads them (scale_check.py); exits
        with one line naming the scale file."""
        try:
            check_with_tupe(self.tupe, self.run_config_text(), self.path, list(self.rows.values()))
        except ScaleError as e:
            fail(str(e))

    def write_run_config(self):
        """WORK/configs/run.ini: the scale file's text without its [paper] section."""
        os.makedirs(os.path.dirname(self.run_config), exist_ok=True)
        text = self.run_config_text()
        if not os.path.exists(self.run_config) or open(self.run_config).read() != text:
            with open(self.run_config + ".tmp", "w") as f:
                f.write(text)
            os.replace(self.run_config + ".tmp", self.run_config)

    def make_corpus(self):
        """The shards of corpus = mixed-english (bench/mixed_english_shards.sh) or
        wikitext-2-test (WikiText-2's test split, 5% to validation), once."""
        corpus = self.paper.get("corpus")
        out = os.path.join(self.work, "shards")
        if corpus == "mixed-english":
            subprocess.check_call(["bash", os.path.join(REPO, "bench", "mixed_english_shards.sh"), self.tupe, out],
                                  stdout=subprocess.DEVNULL)
        elif corpus == "wikitext-2-test":
            for split in ("train", "validation"):
                if os.path.exists(os.path.join(out, split, "effective_config.ini")):
                    continue
                mode = ["--preprocess.validation_ratio", "0"] if split == "train" else ["--preprocess.split", "validation"]
                subprocess.check_call([self.tupe, "preprocess", "--quiet", "--tokenizer.vocab", self.vocab,
                                       "--preprocess.documents", "line", "--preprocess.max_seq_len",
                                       self.sections.get("model", "max_positions", fallback="128"), *mode,
                                       "--input", os.path.join(self.data, "text", "wikitext-2", "wiki.test.raw"),
                                       "--output", os.path.join(out, split), "--overwrite"], stdout=subprocess.DEVNULL)


def load_scale(scale, work=None, rows=None):
    """The scale file `scale` (a name, e.g. mini: bench/paper/mini.ini; or a path); `rows`
    (comma-separated) keeps those rows only (a ^mid row brings its pre-trained row)."""
    named = os.path.join(HERE, f"{scale}.ini")
    path = named if os.sep not in scale and not scale.endswith(".ini") and os.path.isfile(named) else scale
    if not os.path.isfile(path):
        fail(f"{path}: no such scale file")
    s = Scale(path, work)
    s.rows_arg = rows or ""
    # The pilot's row: BERT-A, else the first pre-trained row of the whole file.
    s.pilot_row = "BERT-A" if "BERT-A" in s.rows else next(r.name for r in s.rows.values() if not r.mid_of)
    if rows is not None:
        wanted = [r.strip() for r in rows.split(",") if r.strip()]
        if not wanted:
            fail(f"--rows '{rows}': names no row (rows: {', '.join(s.rows)})")
        for r in wanted:
            if r not in s.rows:
                fail(f"--rows {rows}: {path} has no row {r} (rows: {', '.join(s.rows)})")
        keep = set(wanted) | {s.rows[r].mid_of for r in wanted if s.rows[r].mid_of}
        s.rows = {n: r for n, r in s.rows.items() if n in keep}
        s.all_seeds_rows = [r for r in s.all_seeds_rows if r in keep]
        s.curve_rows = [r for r in s.curve_rows if r in keep]
    s.resolve_grid()
    return s


def check_done_settings(s: Scale, jobs):
    """Results made with other settings than the scale file asks now are never taken for its
    own: a pre-training's folder (finished or not: a resume would mix them) or a finished
    fine-tuning (of `jobs`, leaves) whose effective_config.ini records other values
    (scale_check.settings_differ: the steps, the row's encoding, the GLUE protocol, ...)
    exits with one line naming its folder and the settings."""
    tupe_sections = [sec for sec in s.sections.sections() if sec not in ("paper", "finetune")]
    for job in jobs:
        if job.kind == "grid" and os.path.exists(grid_ini(job)) and job.done():  # its record: its folder may be gone
            folder = job.done_file
            recorded = grid_ini(job)
            want = expected_settings(s.sections, job.command, tupe_sections)
        elif job.kind in ("pretrain", "grid"):
            folder = job.run_dir
            recorded = os.path.join(job.run_dir, "checkpoints", "effective_config.ini")
            want = expected_settings(s.sections, job.command, tupe_sections)
        elif job.kind in ("glue", "pilot") and job.done():
            folder = job.final
            recorded = os.path.join(job.final, "effective_config.ini")
            want = expected_settings(s.sections, job.command, ["finetune"])
        else:
            continue
        differ = settings_differ(recorded, want)
        if differ:
            fail(f"{folder}: made with other settings than {s.path} asks now ({'; '.join(differ[:3])}"
                 f"{'; ...' if len(differ) > 3 else ''}): give a new --work (and --store), or remove that folder "
                 "(and its copy in the store) to run it again")


def pretrain_command(s: Scale, row: Row, seed: int, run_dir: str, lr=None):
    """`tupe pretrain` of `row` into `run_dir`: the full schedule (steps, warm-up); at `lr` if given."""
    return [s.tupe, "pretrain", "--config", s.run_config, "--resume", "auto",
            "--model.position_encoding", row.position_encoding, "--model.untie_cls", row.untie_cls,
            "--data.train_shards", s.train_shards, "--data.validation_shards", s.validation_shards,
            "--optimizer.total_steps", str(s.steps), "--optimizer.warmup_steps", s.paper["warmup_steps"],
            "--train.eval_every", s.paper["eval_every"], "--train.seed", str(seed), "--data.seed", str(seed),
            "--train.threads", str(s.threads), "--tokenizer.vocab", s.vocab,
            "--checkpoint.dir", os.path.join(run_dir, "checkpoints"), *row.override_args(),
            *(["--optimizer.lr", lr_name(lr)] if lr is not None else [])]


def pretrain_job(s: Scale, row: Row, seed: int) -> Job:
    """One table pre-training: at the row's chosen LR when there is a grid (the first seed's
    folder is then the grid run's at that LR, continued to the last step)."""
    d = s.run_dir(row.name, seed)
    run = s.run_name(row.name)
    lr = s.best_lr[row.name] if s.lr_grid else None
    at = f" at LR {lr_name(lr)}" if lr is not None else ""
    return Job(f"pretrain-{run}-seed{seed}", "pretrain", pretrain_command(s, row, seed, d, lr),
               f"pre-train {row.name} seed {seed}{at} ({s.steps} steps)",
               os.path.join(s.work, "logs", f"pretrain-{run}-seed{seed}.log"),
               done_file=s.checkpoint(row.name, seed, s.steps), run_dir=d)


def grid_job(s: Scale, row: Row, lr: float) -> Job:
    """One grid run: `row` at `lr`, the first seed, the full schedule stopped at grid_step
    (train.max_steps); done once its validation loss there is known."""
    d, seed = s.grid_dir(row.name, lr), s.seeds[0]
    name = f"grid-{row.name}-lr{lr_name(lr)}"
    return Job(name, "grid", pretrain_command(s, row, seed, d, lr) + ["--train.max_steps", str(s.grid_step)],
               f"LR grid: pre-train {row.name} seed {seed} at LR {lr_name(lr)} to step {s.grid_step} of {s.steps}",
               os.path.join(s.work, "logs", name + ".log"), done_file=s.grid_record(row.name, lr), run_dir=d,
               check=lambda: s.grid_result(row.name, lr) is not None)


def grid_ini(job: Job):
    """A grid run's record's effective config, beside its record (WORK/grid/<ROW>-lr<LR>.ini)."""
    return job.done_file[:-len(".json")] + ".ini"


def write_grid_record(s: Scale, job: Job):
    """WORK/grid/<ROW>-lr<LR>.json once the grid run's validation loss at grid_step is known
    (its metrics), with its effective config beside it: what the store keeps of a grid run.
    False while the loss is not known."""
    row, lr = next((r, lr) for r in s.rows for lr in s.lr_grid if s.grid_record(r, lr) == job.done_file)
    loss = s.grid_result(row, lr)
    if loss is None:
        return False
    os.makedirs(os.path.dirname(job.done_file), exist_ok=True)
    cfg = os.path.join(job.run_dir, "checkpoints", "effective_config.ini")
    if os.path.exists(cfg):
        shutil.copyfile(cfg, grid_ini(job) + ".tmp")
        os.replace(grid_ini(job) + ".tmp", grid_ini(job))
    with open(job.done_file + ".tmp", "w") as f:
        json.dump({"row": row, "lr": lr, "seed": s.seeds[0], "step": s.grid_step, "steps": s.steps,
                   "validation_loss": loss}, f)
    os.replace(job.done_file + ".tmp", job.done_file)
    return True


def finetune_job(s: Scale, kind, run_row, seed, step, task, out, model_name, extra=()) -> Job:
    cmd = [s.tupe, "finetune", "--config", s.run_config, "--finetune.checkpoint", s.checkpoint(run_row, seed, step),
           "--finetune.tasks", task, "--finetune.data_dir", s.glue_dir, "--tokenizer.vocab", s.vocab,
           "--finetune.output_dir", out + ".tmp", "--finetune.model_name", model_name,
           "--finetune.threads", str(s.threads)]
    cap = s.paper.get(f"train_rows.{task}")
    if cap:
        cmd += ["--finetune.train_rows", cap]
    cmd += list(extra)
    name = f"{kind}-{s.run_name(run_row)}-seed{seed}-step{step}-{task}"
    return Job(name, kind, cmd, f"fine-tune {run_row} seed {seed} step {step} on {task}",
               os.path.join(s.work, "logs", name + ".log"), done_file=os.path.join(out, "results.json"),
               scratch=out + ".tmp", final=out)


def glue_points(s: Scale):
    """(pre-trained row, seed, step) -> fine-tuned on every task: each row's seeds at the end
    (a ^mid row: its pre-training's seeds at mid_fraction), the curve rows' first seed at
    every curve fraction. Deduplicated, in that order; rows waiting for their grid left out."""
    points = []
    for row in s.rows.values():
        if not s.ready(row.pretrained_row):
            continue
        step = s.mid_step if row.mid_of else s.steps
        for seed in s.seeds_of(row.pretrained_row):
            points.append((row.pretrained_row, seed, step))
    for r in s.curve_rows:
        if not s.ready(r):
            continue
        for step in s.curve_steps:
            points.append((r, s.seeds[0], step))
    seen, out = set(), []
    for p in points:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def plan_jobs(s: Scale) -> List[Job]:
    """Every job, in the local launcher's order of preference: with an LR grid, the grid runs
    of the rows still waiting for theirs (each row's LRs together, the pilot row first); then
    for the rows whose LR is known (all of them without a grid): the pilot row's first
    pre-training and the pilot; then the rows pre-trained with every seed (seed by seed), then
    the other rows; each pre-training followed by its fine-tunings (slurm: one job array each,
    after it), so that its checkpoints are needed for as short a time as can be; the report.
    A row's table jobs are planned only once its grid is done: plan again after the grid."""
    pretrained = [r for r in s.rows.values() if not r.mid_of]
    pilot_row = s.pilot_row if s.pilot_row in s.rows else pretrained[0].name
    waiting = s.waiting_rows()
    firsts = [pilot_row] + s.all_seeds_rows + [r.name for r in pretrained]
    grid = [grid_job(s, s.rows[r], lr) for r in dict.fromkeys(firsts) if r in waiting for lr in s.lr_grid]
    pretrained = [r for r in pretrained if r.name not in waiting]
    if not pretrained:
        return grid + [report_job(s, [])]
    if pilot_row in waiting:
        pilot_row = pretrained[0].name
    order = [(s.rows[pilot_row], s.seeds[0])]
    order += [(s.rows[r], seed) for seed in s.seeds for r in s.all_seeds_rows if r not in waiting]
    order += [(r, seed) for r in pretrained for seed in s.seeds_of(r.name)]
    order = list(dict.fromkeys((r.name, seed) for r, seed in order))
    pre = {(r, seed): pretrain_job(s, s.rows[r], seed) for r, seed in order}
    first = pre[(pilot_row, s.seeds[0])]
    jobs = grid + [first]
    # The pilot is the pilot row's (BERT-A's); --rows without it plans none.
    has_pilot = bool(s.paper.get("pilot_learning_rates")) and pilot_row == s.pilot_row
    if has_pilot:
        extra = ["--finetune.learning_rates", s.paper["pilot_learning_rates"], "--finetune.seeds",
                 s.paper.get("pilot_seeds", "1"), "--finetune.epochs", s.paper.get("pilot_epochs", "3")]
        pilots = [finetune_job(s, "pilot", pilot_row, s.seeds[0], s.steps, t, os.path.join(s.work, "pilot", t),
                               pilot_row, extra) for t in s.tasks]
        first.needed_by += pilots
        jobs.append(Job("pilot", "pilot", [], f"the pilot: {pilot_row} under the wider grid",
                        os.path.join(s.work, "logs", "pilot.log"), depends=[first.name], array=pilots,
                        list_file=os.path.join(s.work, "slurm", "pilot.list")))
    by_run = {}
    for run_row, seed, step in glue_points(s):
        for t in s.tasks:
            by_run.setdefault((run_row, seed), []).append(
                finetune_job(s, "glue", run_row, seed, step, t, s.glue_out(run_row, seed, step, t), run_row))
    glue_names = []
    for key, p in pre.items():
        if p is not first:
            jobs.append(p)
        members = by_run.get(key, [])
        if not members:
            continue
        p.needed_by += members
        name = f"glue-{s.run_name(key[0])}-seed{key[1]}"
        glue_names.append(name)
        jobs.append(Job(name, "glue", [], f"fine-tune {key[0]} seed {key[1]}", os.path.join(s.work, "logs", name + ".log"),
                        depends=[p.name] + (["pilot"] if has_pilot else []),
                        array=members, list_file=os.path.join(s.work, "slurm", name + ".list")))
    jobs.append(report_job(s, glue_names))
    return jobs


def report_job(s: Scale, depends) -> Job:
    py = os.environ.get("TUPE_PYTHON", sys.executable)
    rows = ["--rows", s.rows_arg] if s.rows_arg else []
    return Job("report", "report", [py, os.path.join(HERE, "report.py"), "--scale", s.path, "--work", s.work] + rows,
               "the report", os.path.join(s.work, "logs", "report.log"), depends=depends,
               list_file=os.path.join(s.work, "slurm", "report.list"))


def leaves(jobs: List[Job]):
    """[(job, names of the jobs it waits for)]: job arrays opened into their members, each
    waiting for what its array waits for (a pre-training, every member of the pilot)."""
    members = {j.name: [m.name for m in j.array] if j.array else [j.name] for j in jobs}
    out = []
    for j in jobs:
        deps = [n for d in j.depends for n in members.get(d, [d])]
        if j.kind == "report":  # after every job before it
            deps = [n for o in jobs if o is not j for n in members[o.name]]
        for m in j.array or [j]:
            out.append((m, deps))
    return out
