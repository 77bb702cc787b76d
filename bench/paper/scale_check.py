"""The checks of a scale file (plan.py's Scale), made before any job runs, so that a bad value
stops the harness at once with one line naming the file, the line, the key and the cause,
instead of hours later inside a `tupe` job that names a generated file.

  PaperSection    the [paper] section's values, typed and range-checked (every key known)
  check_with_tupe each row's [model] and tupe sections, read by `tupe info` as a job will
  settings_differ what a finished job recorded (its effective_config.ini) against what the
                  scale file asks now: results of other settings are never taken as done
"""
import configparser
import difflib
import math
import os
import re
import subprocess
import tempfile

GLUE_TASKS = ("CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI")
ENCODINGS = ("bert-absolute", "bert-relative", "tupe-absolute", "tupe-relative", "bert-absolute-untied", "rope", "alibi",
             "none")
ROW_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # a folder name: no '/', no '..', no spaces
SLURM_TIME = re.compile(r"^(\d+-\d{1,2}(:\d{2}(:\d{2})?)?|\d+(:\d{2}(:\d{2})?)?)$")  # sbatch --time forms
# Every [paper] key: its kind (docs in bench/paper/mini.ini; lr_grid's in mini-grid.ini and docs/paper.md).
# row.<NAME> and train_rows.<TASK> besides.
KEYS = {
    "seeds": "seeds", "all_seeds_rows": "rows", "steps": "positive", "warmup_steps": "count",
    "eval_every": "positive", "mid_fraction": "fraction", "curve_rows": "rows", "curve_fractions": "fractions",
    "tasks": "tasks", "corpus": "corpus", "threads": "positive", "store": "text", "vocab": "text", "glue": "text",
    "train_shards": "text", "validation_shards": "text", "protocol_chosen": "bool",
    "pilot_learning_rates": "rates", "pilot_seeds": "seeds", "pilot_epochs": "positive",
    "lr_grid": "lr_grid", "lr_grid_fraction": "grid_fraction",
    "slurm_pretrain_nodes": "positive", "slurm_pretrain_tasks_per_node": "positive", "slurm_gpus_per_node": "count",
    "slurm_launcher": "launcher", "slurm_pretrain_time": "time", "slurm_finetune_time": "time",
}
SLURM_KEYS = tuple(k for k in KEYS if k.startswith("slurm_") and k != "slurm_launcher")


def lr_name(lr):
    """An LR as it names a folder and is passed to tupe: 0.0003, 0.001 (6 significant digits)."""
    return f"{lr:g}"


class ScaleError(Exception):
    """One line: what is wrong, naming the file, the line and the key."""


def _line_of(text, section, key):
    """The 1-based line of `key` in `[section]` of the INI text, or 0."""
    current = None
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith("[") and s.endswith("]"):
            current = s[1:-1].strip()
        elif current == section and re.split(r"\s*[=:]", s, maxsplit=1)[0].strip() == key:
            return i
    return 0


class PaperSection:
    """[paper] of the scale file at `path` (its text `text`), every value checked on reading.
    Raises ScaleError for an unknown key, a value of the wrong kind or out of range."""

    def __init__(self, path, text, values):
        self.path, self.text, self.raw = path, text, dict(values)
        for key in self.raw:
            if key.startswith("row.") or key.startswith("train_rows."):
                continue
            if key not in KEYS:
                near = difflib.get_close_matches(key, list(KEYS), n=1)
                self.error(key, "unknown key" + (f" (did you mean {near[0]}?)" if near else ""))

    def where(self, key):
        line = _line_of(self.text, "paper", key)
        return f"{self.path}:{line}" if line else self.path

    def error(self, key, cause):
        value = self.raw.get(key)
        shown = f" = {value}" if value is not None else ""
        raise ScaleError(f"{self.where(key)}: [paper] {key}{shown}: {cause}")

    def has(self, key):
        return key in self.raw

    def require(self, key):
        if key not in self.raw:
            raise ScaleError(f"{self.path}: [paper] {key} missing")
        return self.raw[key]

    def _int(self, key, word, lowest):
        word = word.strip()
        if not re.fullmatch(r"[+-]?\d+", word):
            self.error(key, f"'{word}' is not an integer")
        v = int(word)
        if v < lowest:
            self.error(key, f"{v} must be at least {lowest}")
        return v

    def _float(self, key, word):
        try:
            v = float(word)
        except ValueError:
            self.error(key, f"'{word.strip()}' is not a number")
        if not math.isfinite(v):
            self.error(key, f"'{word.strip()}' is not a finite number")
        return v

    def _list(self, key):
        words = [w.strip() for w in self.require(key).split(",")]
        if words == [""]:
            self.error(key, "empty: give a comma-separated list")
        if "" in words:
            self.error(key, "an empty item in the list")
        if len(set(words)) != len(words):
            self.error(key, "an item is given twice")
        return words

    def positive(self, key):
        return self._int(key, self.require(key), 1)

    def count(self, key):
        return self._int(key, self.require(key), 0)

    def seeds(self, key):
        return [self._int(key, w, 0) for w in self._list(key)]

    def names(self, key):
        return self._list(key) if self.raw.get(key, "").strip() else []

    def fraction(self, key):
        v = self._float(key, self.require(key))
        if not 0 < v < 1:
            self.error(key, "must be between 0 and 1 (a fraction of the steps, the last step excluded)")
        return v

    def fractions(self, key):
        out = [self._float(key, w) for w in self._list(key)]
        for v in out:
            if not 0 < v <= 1:
                self.error(key, f"{v:g} must be in (0, 1] (fractions of the steps)")
        return out

    def rates(self, key):
        out = [self._float(key, w) for w in self._list(key)]
        if any(v <= 0 for v in out):
            self.error(key, "every learning rate must be positive")
        return out

    def lr_grid(self, key):
        """The pre-training LR grid, ascending ([] when the key is absent or empty: no grid).
        Each LR positive, none given twice (1e-3 and 0.001 are one LR), at least two."""
        if not self.raw.get(key, "").strip():
            return []
        out = self.rates(key)
        names = [lr_name(v) for v in out]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice:
            self.error(key, f"the learning rate {twice} is given twice")
        if len(out) < 2:
            self.error(key, "one learning rate is no grid: give two or more (or leave it empty: every row at "
                            "[optimizer] lr)")
        return sorted(out)

    def grid_fraction(self, key):
        v = self._float(key, self.require(key))
        if not 0 < v <= 1:
            self.error(key, "must be in (0, 1] (the share of the steps each grid run trains)")
        return v

    def tasks(self, key):
        out = self._list(key)
        for t in out:
            if t not in GLUE_TASKS:
                folded = {g.lower().replace("-", ""): g for g in GLUE_TASKS}
                near = ([folded[t.lower().replace("-", "")]] if t.lower().replace("-", "") in folded
                        else difflib.get_close_matches(t, GLUE_TASKS, n=1, cutoff=0.3))
                self.error(key, f"unknown task {t}" + (f" (did you mean {near[0]}?)" if near else "")
                           + f"; one of {', '.join(GLUE_TASKS)}")
        return out

    def boolean(self, key, default):
        word = self.raw.get(key, default).strip().lower()
        if word not in ("true", "false"):
            self.error(key, "must be true or false")
        return word == "true"

    def check_all(self):
        """Every present key read once by its kind (the ones the harness reads later are read
        again where used; this catches the rest, e.g. the Slurm keys of a local run)."""
        for key, kind in KEYS.items():
            if key not in self.raw:
                continue
            value = self.raw[key].strip()
            if kind in ("positive", "count", "seeds", "fraction", "fractions", "rates", "tasks", "lr_grid",
                        "grid_fraction"):
                getattr(self, kind)(key)
            elif kind == "bool":
                self.boolean(key, "true")
            elif kind == "corpus" and value not in ("", "mixed-english", "wikitext-2-test"):
                self.error(key, "must be mixed-english or wikitext-2-test (or absent: train_shards and validation_shards)")
            elif kind == "launcher" and value not in ("srun", "mpirun"):
                self.error(key, "must be srun or mpirun")
            elif kind == "time" and not SLURM_TIME.match(value):
                self.error(key, "not a Slurm time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)")
        for key in self.raw:
            if key.startswith("train_rows."):
                self._int(key, self.raw[key], 1)

    def check_row(self, name, encoding):
        """row.<name>: a folder name, and (None for a ^mid row) an encoding tupe knows; raises ScaleError."""
        key = f"row.{name}"
        if not ROW_NAME.match(name):
            self.error(key, "a row name is a folder name: letters, digits, '_', '.', '-', not starting with '.' or '-'")
        if encoding is not None and encoding not in ENCODINGS:
            self.error(key, f"unknown position_encoding {encoding}; one of {', '.join(ENCODINGS)}")


def check_with_tupe(tupe, run_config_text, scale_path, rows):
    """`tupe info` reads the run config (the scale file less [paper], `run_config_text`) once
    per distinct (position_encoding, untie_cls) of `rows`, as each pre-training will: a bad
    [model] or tupe section fails here, the error naming the scale file. Raises ScaleError."""
    if not (os.path.isfile(tupe) and os.access(tupe, os.X_OK)):
        raise ScaleError(f"{tupe}: no tupe executable there (build it: bash launch/build.sh, or set TUPE_BIN)")
    with tempfile.TemporaryDirectory(prefix="paper-check-") as tmp:
        run_config = os.path.join(tmp, "run.ini")
        with open(run_config, "w") as f:
            f.write(run_config_text)
        _tupe_info(tupe, run_config, scale_path, rows)


def _tupe_info(tupe, run_config, scale_path, rows):
    seen = set()
    for row in rows:
        key = (row.position_encoding, row.untie_cls, row.overrides)
        if row.mid_of or key in seen:
            continue
        seen.add(key)
        p = subprocess.run([tupe, "info", "--config", run_config, "--model.position_encoding", row.position_encoding,
                            "--model.untie_cls", row.untie_cls, *row.override_args("model")], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            lines = [x for x in p.stderr.strip().splitlines() if x.strip()] or [f"exit {p.returncode}"]
            cause = lines[-1].replace("tupe info: error: ", "").replace(run_config, "the scale file")
            raise ScaleError(f"{scale_path}: row.{row.name} ({row.position_encoding}, untie_cls {row.untie_cls}), "
                             f"as tupe reads it: {cause}")


# Settings that may differ between the run that finished a job and this one: where files are
# (another machine, another work folder) and how many threads ran it.
# Nor are settings that change no result: when checkpoints are written, logging, extra outputs.
PLACE_KEYS = {"checkpoint.dir", "data.train_shards", "data.validation_shards", "tokenizer.vocab",
              "finetune.checkpoint", "finetune.data_dir", "finetune.output_dir", "train.threads",
              "finetune.threads", "data.num_threads", "checkpoint.every_steps", "checkpoint.keep_last",
              "checkpoint.keep_every", "train.log_every", "finetune.tensorboard", "finetune.save_model",
              "finetune.predict_test", "finetune.overwrite",
              # where a pre-training stops, not what any step computes: an LR grid run
              # (train.max_steps = lr_grid_fraction x steps) is continued to the end in its folder
              "train.max_steps"}


def _normal(value):
    """A value as compared: a list of numbers (1e-3 = 0.001, true = 1) or of words."""
    out = []
    for w in str(value).split(","):
        w = w.strip()
        lw = w.lower()
        if lw in ("true", "false"):
            out.append(1.0 if lw == "true" else 0.0)
            continue
        try:
            out.append(float(w))
        except ValueError:
            out.append(w)
    return out


def expected_settings(run_config_sections, command, sections):
    """{'section.key': value} a job runs with: the run config's `sections` (a ConfigParser
    of the scale file), then the command's --section.key VALUE options."""
    want = {}
    for sec in sections:
        if sec in run_config_sections:
            for k, v in run_config_sections[sec].items():
                want[f"{sec}.{k}"] = v
    for i, word in enumerate(command[:-1]):
        if word.startswith("--") and "." in word and word[2:].split(".")[0] in sections:
            want[word[2:]] = command[i + 1]
    return want


# Keys tupe gained after results were stored, with the value a file written before them ran
# with: such a file lacking the key is compared as if it recorded this value.
ADDED_KEYS = {"finetune.selection_fraction": "0"}


def settings_differ(effective_ini, want):
    """The settings of `want` ({'section.key': value}) that `effective_ini` (a finished job's
    effective_config.ini) records otherwise: ["section.key: recorded R, now N", ...]. Places
    and thread counts are not compared; a key the file lacks is not either, but for the keys
    of ADDED_KEYS, whose absence means the value they stand for. [] when no file."""
    if not os.path.exists(effective_ini):
        return []
    cp = configparser.ConfigParser(interpolation=None, strict=False)
    cp.optionxform = str
    cp.read(effective_ini, encoding="utf-8")
    out = []
    for name, value in want.items():
        if name in PLACE_KEYS:
            continue
        sec, key = name.split(".", 1)
        if cp.has_option(sec, key):
            recorded = cp.get(sec, key)
        elif name in ADDED_KEYS:
            recorded = ADDED_KEYS[name]
        else:
            continue
        if _normal(recorded) != _normal(value):
            out.append(f"{name}: recorded {recorded}, now {value}")
    return out
