"""Bad scale files and options of bench/paper/paper.py (Paper_bad_inputs): each is refused
before any job runs, with one line naming the file, its line and key (or the option) and the
cause, exit status non-zero, no Python traceback, and the work folder left unmade.

Each case is bench/paper/toy.ini (or, for the LR grid's, grid-toy.ini) with one line replaced
(or one option given); every run is a --dry-run but the ones about the work folder, which need
a real run to find the folder bad.
Usage: scale_checks.py WORKDIR   (TUPE_BIN, TUPE_SHARED_DATA from CTest)
"""
import os
import re
import shutil
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from script_checks import check  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAPER = os.path.join(SRC, "bench", "paper", "paper.py")
TOY = os.path.join(SRC, "bench", "paper", "toy.ini")
GRID_TOY = os.path.join(SRC, "bench", "paper", "grid-toy.ini")

# (the toy.ini line replaced (its first), its replacement, what the one error line must contain)
CASES = [
    ("steps = 20", "steps = abc", "[paper] steps = abc: 'abc' is not an integer"),
    ("steps = 20", "steps = 0", "[paper] steps = 0: 0 must be at least 1"),
    ("seeds = 1,2", "seeds =", "[paper] seeds = : empty"),
    ("seeds = 1,2", "seeds = 1,,x", "an empty item in the list"),
    ("seeds = 1,2", "seeds = 1,1", "an item is given twice"),
    ("seeds = 1,2", "seeds = -1", "-1 must be at least 0"),
    ("warmup_steps = 2", "warmup_steps = 200", "[paper] warmup_steps = 200: more than the 20 steps"),
    ("eval_every = 10", "eval_every = -1", "[paper] eval_every = -1: -1 must be at least 1"),
    ("mid_fraction = 0.5", "mid_fraction = 2.0", "[paper] mid_fraction = 2.0: must be between 0 and 1"),
    ("mid_fraction = 0.5", "mid_fraction = 0.01", "0.01 of 20 steps is step 0: no checkpoint there"),
    ("mid_fraction = 0.5", "mid_fraction = nan", "'nan' is not a finite number"),
    ("mid_fraction = 0.5", "mid_fracton = 0.5", "[paper] mid_fracton = 0.5: unknown key (did you mean mid_fraction?)"),
    ("curve_fractions = 0.5,1.0", "curve_fractions = 1.5", "1.5 must be in (0, 1]"),
    ("curve_rows = BERT-A,TUPE-R", "curve_rows = TUPE-A-mid", "TUPE-A-mid is a ^mid row"),
    ("all_seeds_rows = BERT-A,TUPE-R", "all_seeds_rows = TUPE-A-mid", "TUPE-A-mid is a ^mid row"),
    ("tasks = WNLI", "tasks =", "[paper] tasks = : empty"),
    ("tasks = WNLI", "tasks = wnli", "unknown task wnli (did you mean WNLI?)"),
    ("tasks = WNLI", "tasks = WNLI,WNLI", "an item is given twice"),
    ("train_rows.WNLI = 64", "train_rows.WNLI = -64", "-64 must be at least 1"),
    ("train_rows.WNLI = 64", "train_rows.RTE = 64", "RTE is not among tasks = WNLI"),
    ("threads = 1", "threads = two", "'two' is not an integer"),
    ("protocol_chosen = true", "protocol_chosen = ture", "[paper] protocol_chosen = ture: must be true or false"),
    ("pilot_learning_rates = 1e-3,3e-3", "pilot_learning_rates = -1,abc", "'abc' is not a number"),
    ("pilot_epochs = 1", "pilot_epochs = -3", "-3 must be at least 1"),
    ("row.BERT-R = bert-relative false", "row.BERT-R = bert-foo false", "unknown position_encoding bert-foo"),
    ("row.BERT-R = bert-relative false", "row.../escape = bert-relative false", "a row name is a folder name"),
    ("row.BERT-A-d = bert-absolute-untied false", "row.BERT-A-d = bert-absolute-untied true",
     "as tupe reads it: model.untie_cls"),
    ("row.BERT-R = bert-relative false", "row.BERT-R = bert-relative false layer_norm=pre",
     "'layer_norm=pre': a row's own setting is section.key=value, of the sections model, optimizer"),
    ("row.BERT-R = bert-relative false", "row.BERT-R = bert-relative false data.seed=3",
     "a row's own setting is section.key=value"),
    ("row.BERT-R = bert-relative false", "row.BERT-R = bert-relative false optimizer.warmup_steps=5",
     "optimizer.warmup_steps is the harness's, the same for every row"),
    ("row.BERT-R = bert-relative false", "row.BERT-R = bert-relative false optimizer.lr=1e-3 optimizer.lr=2e-3",
     "optimizer.lr is given twice"),
    ("row.BERT-R = bert-relative false", "row.BERT-R = bert-relative false optimizer.lr=-1",
     "the LR must be a positive number"),
    ("row.BERT-R = bert-relative false", "row.BERT-R = bert-relative false optimizer.beta2=0.98",
     "of the optimizer, a row sets only optimizer.lr"),
    ("row.BERT-R = bert-relative false", "row.BERT-R = bert-relative false model.layer_norm=sideways",
     "row.BERT-R (bert-relative, untie_cls false), as tupe reads it: "),
    ("num_heads = 2", "num_heads = 3", "row.BERT-A (bert-absolute, untie_cls false), as tupe reads it: "
                                        "model.num_heads: 3 must divide hidden_size 32"),
    ("slurm_gpus_per_node = 0", "slurm_gpus_per_node = -2", "-2 must be at least 0"),
    ("slurm_pretrain_time = 00:10:00", "slurm_pretrain_time = ten minutes", "not a Slurm time"),
    ("slurm_launcher = mpirun", "slurm_launcher = torchrun", "must be srun or mpirun"),
    ("corpus = wikitext-2-test", "corpus = wiki", "must be mixed-english or wikitext-2-test"),
    # The pre-training LR grid (pilot_seeds and pilot_epochs have defaults: their lines are free).
    ("pilot_seeds = 1", "lr_grid = 1e-3, -3e-4", "[paper] lr_grid = 1e-3, -3e-4: every learning rate must be positive"),
    ("pilot_seeds = 1", "lr_grid = 1e-3, 0", "every learning rate must be positive"),
    ("pilot_seeds = 1", "lr_grid = 1e-3, 0.001", "the learning rate 0.001 is given twice"),
    ("pilot_seeds = 1", "lr_grid = 1e-3, 1e-3", "an item is given twice"),
    ("pilot_seeds = 1", "lr_grid = 1e-3", "one learning rate is no grid: give two or more"),
    ("pilot_seeds = 1", "lr_grid = 1e-3, fast", "'fast' is not a number"),
    ("pilot_seeds = 1", "lr_grd = 1e-3, 3e-3", "unknown key (did you mean lr_grid?)"),
    ("pilot_epochs = 1", "lr_grid_fraction = 0", "[paper] lr_grid_fraction = 0: must be in (0, 1]"),
    ("pilot_epochs = 1", "lr_grid_fraction = 1.5", "must be in (0, 1]"),
]
# Cases on grid-toy.ini, whose [paper] has an LR grid.
GRID_CASES = [
    ("row.TUPE-R = tupe-relative true", "row.TUPE-R = tupe-relative true optimizer.lr=3e-4",
     "[paper] row.TUPE-R = tupe-relative true optimizer.lr=3e-4: 'optimizer.lr=3e-4': a row's own LR and "
     "[paper] lr_grid exclude each other"),
    ("lr_grid_fraction = 0.5", "lr_grid_fraction = 0.01", "0.01 of 20 steps is step 0: the grid would train nothing"),
]


def refused(args, want, work, where=None):
    """paper.py `args` exits non-zero with one line containing `want` (and `where`), no traceback,
    and leaves `work` unmade."""
    p = subprocess.run([sys.executable, PAPER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = p.stderr.strip()
    ok = (p.returncode != 0 and err.count("\n") == 0 and want in err and "Traceback" not in err
          and (where is None or where in err) and not os.path.exists(work))
    check(ok, f"{' '.join(args[2:]) or args[1]} -> {err!r}" + ("" if ok else f" (exit {p.returncode}; wanted {want!r})"))


def main(work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    toy = open(TOY).read()
    grid_toy = open(GRID_TOY).read()
    for i, (base, old, new, want) in enumerate([(toy, *c) for c in CASES] + [(grid_toy, *c) for c in GRID_CASES]):
        pattern = re.compile(r"^" + re.escape(old) + r"$", re.M)
        check(pattern.search(base) is not None, f"{'toy' if base is toy else 'grid-toy'}.ini has the line {old!r}")
        text = pattern.sub(new, base, count=1)  # the first: [paper] comes first
        path = os.path.join(work, f"case{i}.ini")
        open(path, "w").write(text)
        line = text.splitlines().index(new) + 1
        # A [paper] value names its line; a [model] one, checked by tupe, names the file.
        where = path if new.startswith("num_heads") or "untied true" in new or "sideways" in new else f"{path}:{line}"
        refused(["--scale", path, "--work", os.path.join(work, f"w{i}"), "--dry-run"], want, os.path.join(work, f"w{i}"),
                where)
    w = os.path.join(work, "w")
    refused(["--scale", "toy", "--work", "", "--dry-run"], "--work '': empty", os.path.join(SRC, "runs", "paper-toy-none"))
    refused(["--scale", "toy", "--work", w, "--rows", ",", "--dry-run"], "--rows ',': names no row", w)
    refused(["--scale", "toy", "--work", w, "--rows", "BERT-X", "--dry-run"], "has no row BERT-X", w)
    refused(["--scale", "toy", "--work", "/proc/no-such/w", "--store", ""], "cannot write there", w)
    afile = os.path.join(work, "a-file")
    open(afile, "w").close()
    refused(["--scale", "toy", "--work", afile, "--store", ""], "a file, not a folder", w)
    bad = os.path.join(work, "latin1.ini")
    open(bad, "wb").write(toy.replace("# Table 1", "# Tabl\xe9 1").encode("latin-1"))
    refused(["--scale", bad, "--work", w, "--dry-run"], "not UTF-8 text", w, bad)
    bom = os.path.join(work, "bom.ini")
    open(bom, "w", encoding="utf-8-sig").write(toy)
    p = subprocess.run([sys.executable, PAPER, "--scale", bom, "--work", w, "--dry-run"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    check(p.returncode == 0 and " pretrain " in p.stdout and not os.path.exists(w),
          f"a scale file with a UTF-8 byte-order mark is read (as tupe reads one): exit {p.returncode} {p.stderr.strip()!r}")
    nopilot = os.path.join(work, "nopilot.ini")
    open(nopilot, "w").write(re.sub(r"^pilot_\w+ = .*\n", "", toy, flags=re.M))
    refused(["--scale", nopilot, "--work", w, "--only", "pilot", "--dry-run"], "has no pilot", w)
    noslurm = os.path.join(work, "noslurm.ini")
    open(noslurm, "w").write(re.sub(r"^slurm_finetune_time = .*\n", "", toy, flags=re.M))
    refused(["--scale", noslurm, "--work", w, "--launcher", "slurm", "--dry-run"],
            "[paper] slurm_finetune_time missing (the Slurm launcher needs it)", w)
    env = dict(os.environ, TUPE_BIN=os.path.join(work, "no-such-tupe"))
    p = subprocess.run([sys.executable, PAPER, "--scale", "toy", "--work", w, "--dry-run"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode != 0 and "no-such-tupe: no tupe executable there" in p.stderr and p.stderr.count("\n") == 1,
          f"TUPE_BIN naming nothing: one line ({p.stderr.strip()!r})")
    p = subprocess.run([sys.executable, PAPER, "--scale", "toy", "--work", w, "--launcher", "slurm", "--dry-run"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == 0 and "sbatch --parsable" in p.stdout and not os.path.exists(w),
          "the Slurm launcher's --dry-run prints the submissions and writes nothing")
    check_row_overrides(work, toy)
    check_added_keys(work)
    print("all checks passed")


def check_row_overrides(work, toy):
    """A row's own settings (a pre-LN baseline at its own LR) reach its pre-training's command
    and no other row's."""
    path = os.path.join(work, "overrides.ini")
    open(path, "w").write(toy.replace("row.BERT-R = bert-relative false\n",
                                      "row.BERT-R = bert-relative false\n"
                                      "row.BERT-A-pre-LN = bert-absolute false model.layer_norm=pre optimizer.lr=3e-4\n"))
    w = os.path.join(work, "w-overrides")
    p = subprocess.run([sys.executable, PAPER, "--scale", path, "--work", w, "--dry-run"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    pretrains = [line for line in p.stdout.splitlines() if " pretrain " in line]
    own = [line for line in pretrains if "/BERT-A-pre-LN-seed1/" in line]
    others = [line for line in pretrains if line not in own]
    check(p.returncode == 0 and len(own) == 1 and own[0].endswith("--model.layer_norm pre --optimizer.lr 3e-4")
          and others and not any("layer_norm" in line or "optimizer.lr" in line for line in others),
          f"row.BERT-A-pre-LN's own settings in its pre-training only (exit {p.returncode}, {len(pretrains)} "
          f"pre-trainings; {p.stderr.strip()[-300:]!r})")


def check_added_keys(work):
    """A result stored before finetune.selection_fraction existed lacks the key: it ran with 0,
    the dev set choosing, so asking for a selection split now must differ from it."""
    sys.path.insert(0, os.path.join(SRC, "bench", "paper"))
    from scale_check import settings_differ
    old = os.path.join(work, "old_effective_config.ini")
    open(old, "w").write("[finetune]\nepochs = 4\nlearning_rates = 1e-4,3e-4\n")
    differ = settings_differ(old, {"finetune.selection_fraction": "0.1", "finetune.epochs": "4"})
    check(differ == ["finetune.selection_fraction: recorded 0, now 0.1"],
          f"a stored result without selection_fraction differs from one asking 0.1: {differ}")
    check(settings_differ(old, {"finetune.selection_fraction": "0", "finetune.epochs": "4"}) == [],
          "... and matches one asking 0 (the dev set choosing, as it did)")


if __name__ == "__main__":
    main(sys.argv[1])
