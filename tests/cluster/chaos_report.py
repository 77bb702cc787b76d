"""The chaos soak's ledger of checkpoints and its report (chaos.py).

The ledger knows every checkpoint it has seen whole (manifest re-hashed with hashlib,
cluster_lib.verify_manifest). After each attempt: a checkpoint seen whole may only be gone
when retention removed it (`keep_last` newer whole ones exist), and at most one folder that
is not whole (the one being written when the fault came) may be there.
"""
import json
import os
import statistics

from cluster_lib import fail, step_dir, verify_manifest, whole_checkpoints


def temp_entries(root):
    """Paths under `root` whose name marks a temporary (`.tmp-` folders, `*.tmp*` files)."""
    out = []
    for d, dirs, files in os.walk(root):
        out += [os.path.join(d, n) for n in dirs + files if ".tmp" in n]
    return sorted(out)


def check_ledger(st, ckpt, keep_last, after):
    """Checks the checkpoints under `ckpt` against those seen whole before (st["known"]);
    records the new ones. `after`: what just ended, for the messages. Not-whole entries."""
    now = whole_checkpoints(ckpt)
    for s in now:
        verify_manifest(step_dir(ckpt, s))
    for s in st["known"]:
        if s not in now and sum(1 for n in now if n > s) < keep_last:
            fail(f"after {after}: the whole checkpoint step {s} is gone; whole now: {now}")
    partial = [n for n in os.listdir(ckpt) if n.startswith((".tmp-step_", "step_")) and
               not (n.startswith("step_") and int(n[5:]) in now)]
    if len(partial) > 1:
        fail(f"after {after}: more than one checkpoint folder is not whole: {partial}")
    st["known"] = sorted(set(st["known"]) | set(now))
    return partial


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def report(st, path):
    """The fault table, the per-kind figures and the totals as Markdown at `path`; its text."""
    rows = st["records"]
    lines = [f"Chaos soak, seed {st['seed']}, {len(rows)} faults, {st['max_steps']} steps, "
             f"{len(st['attempts'])} attempts, checkpoint every {st['every']} steps, dist.timeout_s "
             f"{st['timeout_s']}, TUPE_MPIRUN_ABORT_GRACE_S {st['grace_s']}", "",
             "| # | kind | target | world | fault at step | job ended after (s) | exit | cause named | last step | "
             "resumed at | steps lost |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ended = "survived" if r.get("survived") else fmt(r.get("detect_s"))
        named = {True: "yes", False: "NO"}.get(r.get("named"), "-")
        lines.append(f"| {r['i']} | {r['kind']} | {r['target']} | {r['world']} | {r['step_at_fault']} | {ended} | "
                     f"{r.get('exit', '-')} | {named} | {r.get('last_step', '-')} | {r.get('resumed_at', '-')} | "
                     f"{r.get('steps_lost', '-')} |")
    lines += ["", "| kind | faults | jobs ended | detect mean (s) | detect max (s) | steps lost (sum) |",
              "|---|---|---|---|---|---|"]
    for kind in sorted({r["kind"] for r in rows}):
        of = [r for r in rows if r["kind"] == kind]
        det = [r["detect_s"] for r in of if r.get("detect_s") is not None]
        lost = sum(r.get("steps_lost") or 0 for r in of)
        lines.append(f"| {kind} | {len(of)} | {len(det)} | {fmt(statistics.mean(det) if det else None)} | "
                     f"{fmt(max(det) if det else None)} | {lost} |")
    det = [r["detect_s"] for r in rows if r.get("detect_s") is not None]
    ups = [a["startup_s"] for a in st["attempts"] if a.get("startup_s") is not None]
    lost = sum(r.get("steps_lost") or 0 for r in rows)
    reached = max([a.get("last_step") or a.get("resumed_at") or 0 for a in st["attempts"]] +
                  [r.get("last_step") or 0 for r in rows] + [0])
    lines += ["", f"Totals: {len(rows)} faults, {len(det)} ended the job, detection mean {fmt(statistics.mean(det) if det else None)} s"
              f" (max {fmt(max(det) if det else None)} s), {lost} steps lost and trained again, "
              f"{sum(a.get('steps_trained', 0) for a in st['attempts'])} steps trained to reach step {reached} "
              f"of {st['max_steps']}; "
              f"wall {fmt(st.get('wall_s'), 0)} s in {st.get('segments', 1)} segment(s); an attempt's start "
              f"(launch to its first step) {fmt(statistics.mean(ups) if ups else None)} s on average."]
    left = [f"{r['i']} {r['kind']}: {', '.join(r['outlived'])}" for r in rows if r.get("outlived")]
    if left:
        lines += ["", "Processes that outlived the job (killed by the recovery): " + "; ".join(left)]
    files = [f"{r['i']} {r['kind']}: {', '.join(r['node_files'])}" for r in rows if r.get("node_files")]
    if files:
        lines += ["", "Files a failed job left on a node's /tmp or /dev/shm (removed as a reboot would): " + "; ".join(files)]
    for key in ("final", "final_replay"):
        if st.get(key):
            lines += ["", "End state " + st[key]]
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return text


def save_state(st, path):
    tmp = path + ".new"
    with open(tmp, "w") as f:
        json.dump(st, f, indent=1)
    os.replace(tmp, path)
