"""What the Python check scripts of the suite share: one way to run a command and show it, one
way to state a check, one way to expect a one-line refusal.

    import sys, os
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from script_checks import check, one_line_refusal, run

Every check prints "ok   <what>" or "FAIL <what>"; a failed one ends the script with exit 1, so
CTest sees the failure and the log shows which check it was.
"""
import subprocess
import sys
import time


def check(cond, what):
    """Prints the outcome of one check; exits 1 when `cond` is false."""
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        sys.exit(1)


def run(*args, ok=True, env=None, cwd=None, stdin=None, timeout=None):
    """Runs `args` (converted with str), prints the command, its exit status, its seconds and the
    last 3 lines of its output. With ok=True a non-zero exit ends the script (exit 1) showing the
    last 3,000 characters of stdout and stderr. Returns the CompletedProcess (text mode)."""
    t = time.time()
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=cwd,
                       input=stdin, timeout=timeout)
    tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-3:])
    where = f"  (in {cwd})" if cwd else ""
    print(f"$ {' '.join(str(a) for a in args)}{where} -> {p.returncode} ({time.time() - t:.1f} s)\n{tail}",
          flush=True)
    if ok and p.returncode != 0:
        print(f"FAIL command exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}", flush=True)
        sys.exit(1)
    return p


def one_line_refusal(p, *needles):
    """`p` (a CompletedProcess) exited non-zero with exactly one stderr line containing "error",
    and that line contains every one of `needles`."""
    err = [line for line in p.stderr.splitlines() if "error" in line]
    check(p.returncode != 0 and len(err) == 1 and all(n in err[0] for n in needles),
          f"refused in one line containing {needles}: exit {p.returncode}, {err}")
