"""The cluster tier: `tupe` on simulated nodes (launch/sim_cluster.sh), each node its own
hostname, address, /tmp and node-local scratch, with TCP between nodes and shared memory
within one; faults injected into a running job.

Usage: cluster_checks.py CHECK WORKDIR
  refuses     sim_cluster.sh refuses, in one line (exit 77), where namespaces are not permitted
              (run without CAP_SYS_ADMIN through setpriv)
  preprocess  2 nodes x 1 rank write one shard set into the shared folder, byte-identical to
              1 rank's, with no warning; the shards are the fixture of the checks below
  placement   2 nodes x 2 ranks: local ranks 0,1 on each node, the debug log names host,
              local rank and device per rank; the weights equal 1 rank x the same global batch
  work_stop   node2 frozen past start-up while 2 nodes x 2 ranks preprocess: the heartbeat ends
              the job within its timeout + 30 s naming node2's ranks; the rerun on node1
              takes the folder's lock over and removes the frozen run's temporary shards
  node_kill   every process of node2 killed mid-run: the job ends within 60 s, its last line
              names the lost ranks and host, the newest whole checkpoint is intact, and node1's
              2 ranks resume from it exactly as a 2-rank run from it outside the cluster
  link_down   node2's link pulled mid-collective: the job ends within dist.timeout_s + 30 s
              naming rank, step and collective; pulled and plugged back within the timeout:
              the run completes or ends with that message, never hangs
  power_cut   node2's link down, then its processes killed: peers hear nothing; the job
              ends within 60 s naming node2, its ranks and the collective; the newest whole
              checkpoint is intact
  requeue     3 nodes x 2 ranks -> checkpoint -> 2 nodes x 2 ranks resume == uninterrupted 2 x 2
  storage     a checkpoint on node-local scratch of rank 0's node: another rank 0 finds none
              and says so in one line, and ranks of other nodes cannot read it (one line); a
              checkpoint in the shared folder resumes from another node set
  startup_stop  2 nodes x 2 ranks: node2 frozen (SIGSTOP, its daemon too) while rank 2 is in a
              start-up phase -- MPI start-up, config check, placement, data check and the
              resume choice of pretrain, the options agreement of preprocess, the config check
              of finetune: the job ends within the limit + 30 s, naming the phase and the rank
              that had not arrived, rank 2 on node2 (MPI start-up: the phase only). The six
              after MPI start-up are six jobs at once, frozen together (limit 30 s); MPI
              start-up alone (limit 6 s)
  tmp_state   a state folder under /tmp (where a clone under /tmp puts it): the cluster
              starts and stops; the nodes see that folder as this machine's, and each node's
              other /tmp stays its own
Environment: TUPE_BIN, TUPE_SOURCE_DIR, TUPE_SHARED_DATA.
"""
import filecmp
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from cluster_lib import (ENV, SIM, SKIP, TUPE, DATA, SRC, Cluster, ended_within, fail, last_line, max_rel_diff,
                         pretrain_args, require_namespaces, single_rank, state, step_dir, verify_manifest, wait_for,
                         weights, whole_checkpoints)


def shards_of(work):
    return os.path.join(os.path.dirname(work), "preprocess", "shards")


def check_refuses(work):
    # Where namespaces are refused anyway, that refusal is checked; else without CAP_SYS_ADMIN
    # (root with an empty bounding set), where unshare is refused.
    p = subprocess.run(["bash", SIM, "check"], capture_output=True, text=True)
    drop = [] if p.returncode == SKIP else ["setpriv", "--bounding-set", "-all", "--inh-caps", "-all"]
    p = subprocess.run(drop + ["bash", SIM, "check"], capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    print(f"exit {p.returncode}: {p.stderr.strip()}")
    if p.returncode != SKIP or len(lines) != 1 or "namespaces are not permitted here" not in lines[0]:
        fail(f"expected one line and exit {SKIP}, got exit {p.returncode}:\n{p.stderr}")
    p = subprocess.run(drop + ["bash", SIM, "start", os.path.join(work, "refused")], capture_output=True, text=True)
    if p.returncode != SKIP or len(p.stderr.strip().splitlines()) != 1:
        fail(f"start without namespaces: exit {p.returncode}:\n{p.stderr}")
    print("refuses OK")


def check_preprocess(work):
    require_namespaces()
    out = os.path.join(work, "shards")  # one path for both runs: the run id records it
    args = ["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"),
            "--input", os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"),
            "--tokenizer.vocab", os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt"),
            "--preprocess.num_shards", 4, "--output", out, "--overwrite", "--quiet"]
    single_rank([str(a) for a in args])
    ref = os.path.join(work, "one_rank")
    shutil.rmtree(ref, ignore_errors=True)
    shutil.copytree(out, ref)
    with Cluster(work, "sim", 2) as c:
        p = c.run(*c.mpirun({"node1": 1, "node2": 1}, args))
    warned = [line for line in (p.stdout + p.stderr).splitlines() if "warning" in line.lower()]
    if warned:  # a healthy run: no rank reports another's temporary files
        fail(f"the 2-node preprocess warned on a healthy run: {warned}")
    files = sorted(f for f in os.listdir(ref) if not f.startswith("effective_config"))
    same, differ, missing = filecmp.cmpfiles(ref, out, files, shallow=False)
    if differ or missing or not any(f.endswith(".h5") for f in same):
        fail(f"2 nodes vs 1 rank: differ {differ}, missing {missing}, same {same}")
    print(f"preprocess OK: {len(same)} files byte-identical ({', '.join(same)}) in {p.wall_s:.1f} s")


def check_placement(work):
    require_namespaces()
    shards = shards_of(work)
    ck, one = os.path.join(work, "2x2"), os.path.join(work, "1x8")
    for d in (ck, one):
        shutil.rmtree(d, ignore_errors=True)
    steps = {"train.max_steps": 5, "checkpoint.every_steps": 5}
    with Cluster(work, "sim", 2) as c:
        p = c.run(*c.mpirun({"node1": 2, "node2": 2}, pretrain_args(shards, ck, **steps) +
                            ["--resume", "none", "--log-level", "debug", "--log-ranks", "all"]))
    for r in range(4):
        want = f"[rank {r}] debug: host node{r // 2 + 1}, local rank {r % 2}, device cpu"
        if want not in p.stdout:
            fail(f"no line '{want}' in the debug log:\n{p.stdout[-3000:]}")
    if "placement: node1 ranks 0-1; node2 ranks 2-3 (4 ranks on 2 nodes)" not in p.stdout:
        fail(f"no placement line:\n{p.stdout[-2000:]}")
    single_rank(pretrain_args(shards, one, **steps, **{"train.micro_batch_size": 8}) + ["--resume", "none"])
    d = max_rel_diff(weights(ck, 5), weights(one, 5))
    print(f"2 nodes x 2 ranks x micro-batch 2 vs 1 rank x 8 after 5 steps: max relative difference {d:.3e}")
    if d > 1e-6:
        fail(f"2 x 2 ranks differ from 1 rank by {d:.3e} (> 1e-6)")
    print("placement OK: local ranks 0,1 per node; host, local rank and device logged per rank")


def check_node_kill(work):
    require_namespaces()
    shards = shards_of(work)
    ck = os.path.join(work, "ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    with Cluster(work, "sim", 2) as c:
        job = c.popen(*c.tupe_mpirun(work, ["node1", "node2"], 2,
                                     pretrain_args(shards, ck, **{"train.max_steps": 100000}) + ["--resume", "none"]))
        wait_for(lambda: len(whole_checkpoints(ck)) >= 2, 240, "the second checkpoint", job)
        time.sleep(0.5)  # mid-step
        c.fault("kill", "node2")
        took, out, err = ended_within(job, 120, "node killed")
        line = last_line(err)
        print(f"the job ended {took:.1f} s after the kill (exit {job.returncode}); last line: {line}")
        if took > 60 or job.returncode == 0:
            fail(f"the job took {took:.1f} s to end (target 60 s) or exited 0")
        if "node2" not in line or "ranks 2-3" not in line:
            fail(f"the last line does not name the lost ranks 2-3 and host node2:\n{err[-3000:]}")
        newest = whole_checkpoints(ck)[-1]
        files = verify_manifest(step_dir(ck, newest))
        print(f"newest whole checkpoint step {newest} intact: {', '.join(files)}")
        # node1's two ranks resume from it, 5 steps; the same from a copy outside the cluster.
        twin = os.path.join(work, "ckpt_outside")
        shutil.rmtree(twin, ignore_errors=True)
        os.makedirs(twin)
        shutil.copytree(step_dir(ck, newest), step_dir(twin, newest))
        target = {"train.max_steps": newest + 5}
        p = c.run(*c.mpirun({"node1": 2}, pretrain_args(shards, ck, **target) + ["--resume", "auto"]))
        if f"at step {newest}" not in p.stdout:
            fail(f"the resume did not start at step {newest}:\n{p.stdout[-2000:]}")
    mpi = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", TUPE]
    q = subprocess.run(mpi + pretrain_args(shards, twin, **target) + ["--resume", "auto"], capture_output=True,
                       text=True, env=ENV, timeout=300)
    if q.returncode != 0:
        fail(f"the 2-rank run outside the cluster failed:\n{q.stderr[-2000:]}")
    a, b = weights(ck, newest + 5), weights(twin, newest + 5)
    d = max_rel_diff(a, b)
    print(f"resumed on node1's 2 ranks vs 2 ranks from the same checkpoint: max relative difference {d:.3e}")
    if d != 0.0 or state(ck, newest + 5)["data_position"] != state(twin, newest + 5)["data_position"]:
        fail(f"the resume on the surviving node is not exact ({d:.3e})")
    print("node_kill OK")


def check_power_cut(work):
    """Every process of node2 killed after its link went down (sim_cluster.sh kill --power):
    its peers hear nothing (no connection reset) and the agent that started its daemon sees
    nothing either, as after a power cut. The job ends within 60 s, its last line names
    node2, its ranks and the collective that did not finish; the newest whole checkpoint holds."""
    require_namespaces()
    shards = shards_of(work)
    ck = os.path.join(work, "ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    with Cluster(work, "sim", 2) as c:
        # The survivors wait in a collective until tupe's watchdog (dist.timeout_s) aborts the
        # job; mpirun then waits for node2's daemon and is killed after the abort grace.
        args = pretrain_args(shards, ck, **{"train.max_steps": 100000, "dist.timeout_s": 10}) + ["--resume", "none"]
        host, cmd = c.tupe_mpirun(work, ["node1", "node2"], 2, args)
        job = c.popen(host, ["env", "TUPE_MPIRUN_ABORT_GRACE_S=5"] + cmd)
        wait_for(lambda: len(whole_checkpoints(ck)) >= 1, 240, "the first checkpoint", job)
        time.sleep(0.5)  # mid-step
        c.fault("kill", "node2", "--power")
        took, out, err = ended_within(job, 120, "power cut")
        line = last_line(err)
        print(f"the job ended {took:.1f} s after the power cut (exit {job.returncode}); last line: {line}")
        if took > 60 or job.returncode == 0:
            fail(f"the job took {took:.1f} s to end (target 60 s) or exited 0")
        if "node2" not in line or "ranks 2-3" not in line or "watchdog: rank" not in line:
            fail(f"the last line does not name the lost ranks 2-3, host node2 and the collective:\n{err[-3000:]}")
        newest = whole_checkpoints(ck)[-1]
        files = verify_manifest(step_dir(ck, newest))
        print(f"newest whole checkpoint step {newest} intact: {', '.join(files)}")
    print("power_cut OK")


def check_link_down(work):
    require_namespaces()
    shards = shards_of(work)
    timeout_s = 10
    for case, down_s in (("pulled", None), ("pulled_and_plugged", 3)):
        ck = os.path.join(work, case)
        shutil.rmtree(ck, ignore_errors=True)
        with Cluster(work, "sim", 2) as c:
            args = pretrain_args(shards, ck, **{"train.max_steps": 40 if down_s else 100000,
                                                "dist.timeout_s": timeout_s}) + ["--resume", "none"]
            # (tupe-mpirun's grace after the abort line, for an mpirun waiting on node2: 2 s)
            host, cmd = c.tupe_mpirun(work, ["node1", "node2"], 2, args)
            job = c.popen(host, ["env", "TUPE_MPIRUN_ABORT_GRACE_S=2"] + cmd)
            wait_for(lambda: len(whole_checkpoints(ck)) >= 1, 240, "the first checkpoint", job)
            c.fault("link-down", "node2")
            if down_s:
                time.sleep(down_s)
                c.fault("link-up", "node2")
            took, out, err = ended_within(job, timeout_s + 90, f"link {case}")
            line = last_line(err)
            print(f"{case}: ended {took:.1f} s after the link went down, exit {job.returncode}; last line: {line}")
            named = "watchdog: rank" in line and "at step" in line and "collective '" in line
            if down_s and job.returncode == 0:
                print(f"{case}: completed: {last_line(out)}")
            elif not named:
                fail(f"{case}: the last line does not name rank, step and collective:\n{err[-3000:]}")
            if took > timeout_s + 30:
                fail(f"{case}: the job took {took:.1f} s to end (target dist.timeout_s + 30 = {timeout_s + 30} s)")
    print("link_down OK")


def check_requeue(work):
    require_namespaces()
    shards = shards_of(work)
    ck, ref = os.path.join(work, "requeued"), os.path.join(work, "uninterrupted")
    for d in (ck, ref):
        shutil.rmtree(d, ignore_errors=True)
    batch = {"data.global_batch_size": 12, "checkpoint.every_steps": 10}
    with Cluster(work, "sim", 3) as c:
        c.run(*c.mpirun({"node1": 2, "node2": 2, "node3": 2},
                        pretrain_args(shards, ck, **batch, **{"train.max_steps": 10}) + ["--resume", "none"]))
        micro3 = {"train.micro_batch_size": 3}
        p = c.run(*c.mpirun({"node1": 2, "node2": 2},
                            pretrain_args(shards, ck, **batch, **micro3, **{"train.max_steps": 20}) + ["--resume", "auto"]))
        if "at step 10" not in p.stdout or "saved by 6 ranks, now 4" not in p.stdout:
            fail(f"the 2-node run did not resume the 3-node checkpoint:\n{p.stdout[-2000:]}")
        c.run(*c.mpirun({"node1": 2, "node2": 2},
                        pretrain_args(shards, ref, **batch, **micro3, **{"train.max_steps": 20}) + ["--resume", "none"]))
    d = max_rel_diff(weights(ck, 20), weights(ref, 20))
    pos = (state(ck, 20)["data_position"], state(ref, 20)["data_position"])
    print(f"3x2 -> checkpoint 10 -> 2x2 to 20 vs 2x2 uninterrupted: max relative difference {d:.3e}, data {pos}")
    if d > 1e-6 or pos[0] != pos[1]:
        fail(f"the requeued run differs ({d:.3e} > 1e-6, or data position {pos})")
    print("requeue OK")


def check_storage(work):
    require_namespaces()
    shards = shards_of(work)
    shared = os.path.join(work, "shared_ckpt")
    shutil.rmtree(shared, ignore_errors=True)
    with Cluster(work, "sim", 3) as c:
        local = os.path.join(c.scratch, "ckpt")  # node-local: the same path on every node
        five = {"train.max_steps": 5}
        c.run(*c.mpirun({"node1": 2, "node2": 2}, pretrain_args(shards, local, **five) + ["--resume", "none"]))
        seen = {n: c.run(n, ["ls", local], check=False).stdout.split() for n in ("node1", "node2", "node3")}
        print(f"checkpoints on node-local scratch, as each node sees them: {seen}")
        steps = {n: [d for d in seen[n] if d.startswith("step_")] for n in seen}  # (metrics/ is per rank)
        if steps != {"node1": ["step_00000005"], "node2": [], "node3": []} or os.listdir(c.scratch):
            fail("node-local scratch is not node-local")
        ten = {"train.max_steps": 10}
        # Rank 0 on node2: no checkpoint there; it says so in one line and starts fresh.
        p = c.run(*c.mpirun({"node2": 2, "node3": 2}, pretrain_args(shards, local, **ten) + ["--resume", "auto"]))
        said = [line for line in p.stdout.splitlines() if "no checkpoint under" in line]
        if len(said) != 1 or local not in said[0]:
            fail(f"a resume on other nodes did not say there is no checkpoint:\n{p.stdout[-2000:]}")
        print(f"rank 0 on node2: {said[0]}")
        # Rank 0 on node1 finds step 5, ranks on node3 cannot read it: one line names it.
        p = c.run(*c.mpirun({"node1": 2, "node3": 2}, pretrain_args(shards, local, **ten) + ["--resume", "auto"]),
                  check=False)
        errors = [line for line in p.stderr.splitlines() if line.startswith("tupe pretrain: ")]
        print(f"rank 0 on node1, ranks 2-3 on node3: exit {p.returncode}: {errors}")
        if p.returncode == 0 or len(errors) != 1 or "step_00000005" not in errors[0]:
            fail(f"ranks that cannot read rank 0's checkpoint were not stopped with one line:\n{p.stderr[-3000:]}")
        # The shared folder: written by node1+node2, resumed by node2+node3.
        c.run(*c.mpirun({"node1": 2, "node2": 2}, pretrain_args(shards, shared, **five) + ["--resume", "none"]))
        p = c.run(*c.mpirun({"node2": 2, "node3": 2}, pretrain_args(shards, shared, **ten) + ["--resume", "auto"]))
        if "at step 5" not in p.stdout or whole_checkpoints(shared) != [5, 10]:
            fail(f"the shared checkpoint did not resume on node2+node3:\n{p.stdout[-2000:]}")
    print("storage OK")


BATCH_LIMIT_S = 30  # start-up limit of the six jobs frozen together: more than the spread of their arrivals


def check_startup_stop(work):
    """Rank 2 held in a start-up phase, node2 then frozen (SIGSTOP, its daemon too): the job
    ends within the start-up limit + 30 s with the line naming the phase and rank 2 (node2).
    The six phases after MPI start-up run as six jobs at once on the one cluster, frozen by one
    SIGSTOP (a limit of BATCH_LIMIT_S, so that every job is held before its deadline when the
    jobs reach their phases within that many seconds of each other: a job that ended before
    the freeze fails the check); MPI start-up then alone, with the 6 s limit."""
    require_namespaces()
    shards = shards_of(work)
    vocab = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")

    def args_of(command, case, limit_s):
        out = os.path.join(work, case)
        if command == "pretrain":
            return pretrain_args(shards, os.path.join(out, "ck"), **{"dist.startup_timeout_s": limit_s}) + \
                ["--resume", "auto"]
        if command == "preprocess":  # no [dist] section: the limit is TUPE_STARTUP_TIMEOUT_S
            return ["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"), "--input",
                    os.path.join(DATA, "text", "wikitext-2", "wiki.test.raw"), "--tokenizer.vocab", vocab,
                    "--output", os.path.join(out, "pp-out"), "--quiet"]
        return ["finetune", "--finetune.checkpoint", os.path.join(work, "none"), "--finetune.tasks", "RTE",
                "--finetune.data_dir", os.path.join(DATA, "glue"), "--finetune.output_dir",
                os.path.join(out, "ft-out"), "--tokenizer.vocab", vocab, "--dist.startup_timeout_s", limit_s]

    def start(c, command, phase, limit_s):
        case = f"{command}-{phase}".replace(" ", "_").replace(":", "")
        shutil.rmtree(os.path.join(work, case), ignore_errors=True)
        os.makedirs(os.path.join(work, case))
        marker = os.path.join(work, case, "stalled")
        host, cmd = c.tupe_mpirun(work, ["node1", "node2"], 2, [str(a) for a in args_of(command, case, limit_s)])
        job = c.popen(host, ["env", "TUPE_MPIRUN_ABORT_GRACE_S=2", f"TUPE_STARTUP_TIMEOUT_S={limit_s}",
                             f"TUPE_TEST_STALL=rank=2,phase={phase},seconds=600,marker={marker}"] + cmd)
        return {"command": command, "phase": phase, "case": case, "marker": marker, "job": job, "limit_s": limit_s}

    def check_ended(c, cases):
        for x in cases:
            wait_for(lambda: os.path.exists(x["marker"]), 120, f"rank 2 to stall in {x['phase']}", x["job"])
        ended_before = [x["phase"] for x in cases if x["job"].poll() is not None]
        if ended_before:
            fail(f"jobs ended before node2 was frozen (their limit passed first): {ended_before}")
        c.fault("stop", "node2")
        frozen, took = time.time(), {}
        while len(took) < len(cases) and time.time() - frozen < max(x["limit_s"] for x in cases) + 90:
            for i, x in enumerate(cases):
                if i not in took and x["job"].poll() is not None:
                    took[i] = time.time() - frozen
            time.sleep(0.1)
        for i, x in enumerate(cases):
            job, phase, limit_s = x["job"], x["phase"], x["limit_s"]
            if i not in took:
                job.kill()
                out, err = job.communicate(timeout=30)
                fail(f"{x['command']}, {phase}: still running {limit_s + 90} s after node2 froze (a hang)\n"
                     f"{out[-1500:]}\n{err[-1500:]}")
            out, err = job.communicate()
            took_s, text = took[i], out + err
            named = (("start-up: rank 0: MPI start-up" in text or "start-up: rank 1: MPI start-up" in text)
                     if phase == "MPI start-up" else
                     f"start-up: phase '{phase}' did not finish within {limit_s} s: rank 2 (node2) did not arrive"
                     in text)
            line = next((l for l in text.splitlines() if "start-up:" in l), last_line(err))
            print(f"{x['command']}, {phase}: ended {took_s:.1f} s after node2 froze (exit {job.returncode}): {line}")
            if job.returncode == 0 or not named:
                fail(f"{x['command']}, {phase}: the job did not end naming the phase and rank 2 (node2):\n"
                     f"{text[-3000:]}")
            if took_s > limit_s + 30:
                fail(f"{x['command']}, {phase}: the job took {took_s:.1f} s to end (target {limit_s + 30} s)")
        c.fault("kill", "node2")  # the frozen ranks and daemons (SIGKILL ends stopped processes)

    batch = [("pretrain", "config check"), ("pretrain", "placement"), ("pretrain", "data check"),
             ("pretrain", "resume: the checkpoint choice"), ("preprocess", "options and inputs"),
             ("finetune", "config check")]
    t0 = time.time()
    with Cluster(work, "sim", 2) as c:
        check_ended(c, [start(c, command, phase, BATCH_LIMIT_S) for command, phase in batch])
        check_ended(c, [start(c, "pretrain", "MPI start-up", 6)])
    left = [case for case in os.listdir(work) if os.path.exists(os.path.join(work, case, "pp-out"))]
    if left:
        fail(f"the stopped preprocess left its output folder ({left})")
    print(f"startup_stop OK: {len(batch) + 1} phases in {time.time() - t0:.0f} s")


HEARTBEAT_S = 10  # TUPE_HEARTBEAT_TIMEOUT_S of the frozen-node checks below


def check_work_stop(work):
    """Past start-up, node2 frozen (SIGSTOP, its daemon too) while 2 nodes x 2 ranks preprocess
    mixed-english (35 MB): the job ends within the heartbeat timeout + 30 s with rank 0's line
    naming node2's ranks (2-3, or the one silent first); node2 is then killed and the same command on node1 alone takes the
    folder's lock over, removes the frozen run's temporary shards and writes the shards (verify,
    pretrain, finetune and evaluate: tests/cli/frozen_rank_checks.py, one frozen rank each)."""
    require_namespaces()
    vocab = os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")
    out = os.path.join(work, "pp-frozen")
    shutil.rmtree(out, ignore_errors=True)
    args = ["preprocess", "--config", os.path.join(SRC, "configs", "tiny.ini"), "--input",
            os.path.join(DATA, "text", "mixed-english", "train.txt"), "--tokenizer.vocab", vocab, "--output", out,
            "--preprocess.num_shards", 4, "--overwrite", "--quiet"]
    env = ["env", "TUPE_MPIRUN_ABORT_GRACE_S=2", f"TUPE_HEARTBEAT_TIMEOUT_S={HEARTBEAT_S}"]

    def frozen_end(c, job, what, ready):
        wait_for(ready, 300, f"{what}: its work under way", job)
        c.fault("stop", "node2")
        took, o, e = ended_within(job, HEARTBEAT_S + 90, what)
        text = o + e
        line = next((l for l in text.splitlines() if "heartbeat:" in l), last_line(e))
        print(f"{what}: ended {took:.1f} s after node2 froze (exit {job.returncode}): {line}")
        # The ranks silent when rank 0 judged: both of node2's, or the first of them a period earlier.
        if job.returncode == 0 or not re.search(r"heartbeat: (rank [23]|ranks 2-3) \(node2\) sent none for", line):
            fail(f"{what}: the job did not end naming node2's ranks:\n{text[-3000:]}")
        if took > HEARTBEAT_S + 30:
            fail(f"{what}: the job took {took:.1f} s to end (target {HEARTBEAT_S + 30} s)")
        c.fault("kill", "node2")

    with Cluster(work, "sim", 2) as c:
        host, cmd = c.tupe_mpirun(work, ["node1", "node2"], 2, [str(a) for a in args])
        job = c.popen(host, env + cmd)
        frozen_end(c, job, "preprocess", lambda: bool(glob.glob(os.path.join(out, "*.h5.tmp-*"))))
        left = glob.glob(os.path.join(out, "*.tmp-*"))
        p = c.run(*c.mpirun({"node1": 2}, [str(a) for a in args]))
        text = p.stdout + p.stderr
        if "took over the lock of tupe preprocess" not in text or glob.glob(os.path.join(out, "*.tmp-*")):
            fail(f"the rerun on node1 did not take the lock over and clear {left}:\n{text[-2000:]}")
        print(f"preprocess rerun on node1: the lock taken over, {len(left)} temporary shard(s) of the frozen run "
              f"removed")
    print("work_stop OK")


def check_tmp_state(work):
    require_namespaces()
    tmp_work = tempfile.mkdtemp(prefix="tupe-cluster-", dir="/tmp")
    private = f"/tmp/tupe-node-private-{os.getpid()}"
    try:
        with Cluster(tmp_work, "sim", 2) as c:
            c.run("node1", ["sh", "-c", f"echo node1 > {tmp_work}/from_node1 && echo mine > {private}"])
            seen = c.run("node2", ["sh", "-c", f"cat {tmp_work}/from_node1; test -e {private} && echo leaked || true"])
            binary = c.run("node2", [TUPE, "--help"], check=False)
            if seen.stdout.split() != ["node1"]:
                fail(f"node2 reads {seen.stdout!r} from the shared folder under /tmp (want node1, no leak)")
            if open(os.path.join(tmp_work, "from_node1")).read() != "node1\n" or os.path.exists(private):
                fail("this machine does not see node1's file in the shared folder, or sees its private /tmp")
            if binary.returncode != 0:
                fail(f"the build is not reachable from node2: {binary.stderr.strip()}")
        print(f"tmp_state OK: a cluster in {tmp_work}/sim started and stopped; shared folder seen, /tmp private")
    finally:
        shutil.rmtree(tmp_work, ignore_errors=True)


if __name__ == "__main__":
    check, work = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    globals()["check_" + check](work)
