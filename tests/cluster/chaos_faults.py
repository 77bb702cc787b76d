"""The faults of the chaos soak (chaos.py) on a simulated cluster (cluster_lib.Cluster): the
schedule drawn from a seed, the cluster's processes as this machine sees them, each kind's
injection and recovery, and the checkpoint file system (a small tmpfs) filled and freed.

Node faults never hit node1, where the launcher (tupe-mpirun, mpirun) runs: losing the batch
host is the scheduler's failure, not the job's. A rank's SIGKILL may hit any rank, rank 0 too.
"""
import errno
import os
import random
import signal
import subprocess
import time

from cluster_lib import fail

# Every kind; `down`: the node hit sits out the next attempt (then it is cleaned and rejoins).
KINDS = ("rank_kill", "node_kill", "power_cut", "node_stop", "link_flap", "preempt", "disk_full", "orted_kill")
NODE_KINDS = ("node_kill", "power_cut", "node_stop", "link_flap", "orted_kill")
DOWN_KINDS = ("node_kill", "power_cut", "node_stop")


def draw_schedule(seed, count, every, first_step=4, gap=(3, 9)):
    """`count` faults drawn from `seed`: every kind once (count >= 8), the rest uniform, shuffled.
    Each fault has the global step it waits for (strictly increasing), a delay after it (s), a
    draw that picks its target among those eligible then, and its kind's own parameters. A
    full disk waits for the step before a save (step % every == every - 1), so the save fails."""
    rng = random.Random(seed)
    kinds = list(KINDS) if count >= len(KINDS) else []
    kinds += [rng.choice(KINDS) for _ in range(count - len(kinds))]
    rng.shuffle(kinds)
    step, out = first_step - gap[0], []
    for kind in kinds:
        step += rng.randint(*gap)
        if kind == "disk_full":
            step += (every - 1 - step) % every
        out.append({"kind": kind, "at_step": step, "delay_s": round(rng.uniform(0.0, 0.4), 3),
                    "pick": rng.random(), "flap_s": round(rng.uniform(1.0, 3.0), 2),
                    "recover": rng.choice(("cont", "kill"))})
    return out


def _readlink(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


def _read(path, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return None


class Procs:
    """The cluster's processes as this machine sees them (outer process ids), by node."""

    def __init__(self, cluster):
        self.c = cluster
        self.pidns = open(os.path.join(cluster.dir, "pidns")).read().strip()
        self.netns = {}
        for node in (f"node{i}" for i in range(1, cluster.nodes + 1)):
            holder = int(open(os.path.join(cluster.dir, f"{node}.pid")).read())
            outer = next((p for p in self._all() if self._inner_pid(p) == holder), None)
            if outer is None:
                fail(f"{node}: its holder (cluster pid {holder}) is not running")
            self.netns[node] = (_readlink(f"/proc/{outer}/ns/net"), outer)

    def _all(self):
        for d in os.listdir("/proc"):
            if d.isdigit() and _readlink(f"/proc/{d}/ns/pid") == self.pidns:
                yield int(d)

    @staticmethod
    def _inner_pid(pid):
        status = _read(f"/proc/{pid}/status") or ""
        line = next((x for x in status.splitlines() if x.startswith("NSpid:")), "")
        return int(line.split()[-1]) if line else None

    def on_node(self, node):
        """Outer ids of NODE's processes (its holder excluded)."""
        ns, holder = self.netns[node]
        return [p for p in self._all() if p != holder and _readlink(f"/proc/{p}/ns/net") == ns]

    def describe(self, pids):
        return [f"{p} {(_read(f'/proc/{p}/comm') or '?').strip()}" for p in pids]

    def ranks(self):
        """{world rank: (outer pid, node)} of the tupe ranks now running on any node."""
        out = {}
        comm = os.path.basename(os.environ.get("TUPE_BIN", "tupe"))[:15]  # the kernel keeps 15 bytes of a name
        for node in self.netns:
            for p in self.on_node(node):
                if (_read(f"/proc/{p}/comm") or "").strip() != comm:
                    continue
                env = (_read(f"/proc/{p}/environ", "rb") or b"").split(b"\0")
                rank = next((e.split(b"=", 1)[1] for e in env if e.startswith(b"OMPI_COMM_WORLD_RANK=")), None)
                if rank is not None:
                    out[int(rank)] = (p, node)
        return out

    def named(self, node, comm):
        return [p for p in self.on_node(node) if (_read(f"/proc/{p}/comm") or "").strip() == comm]


def signal_all(pids, sig):
    n = 0
    for p in pids:
        try:
            os.kill(p, sig)
            n += 1
        except ProcessLookupError:
            pass
    return n


class CheckpointDisk:
    """A tmpfs of `size_mb` at `root` (mounted before the cluster starts, so that every node's
    mount namespace holds it), the checkpoints in root/ckpt; fill() leaves `keep` bytes free."""

    def __init__(self, root, size_mb):
        self.root, self.ckpt, self.filler = root, os.path.join(root, "ckpt"), os.path.join(root, "filler")
        os.makedirs(root, exist_ok=True)
        if not os.path.ismount(root):
            p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "chaos-ckpt", root],
                               capture_output=True, text=True)
            if p.returncode != 0:
                fail(f"mount -t tmpfs {root}: {p.stderr.strip()}")
        os.makedirs(self.ckpt, exist_ok=True)

    def free(self):
        s = os.statvfs(self.root)
        return s.f_bavail * s.f_frsize

    def fill(self, keep):
        """Grows the filler file until at most `keep` bytes are free; its size. Called again
        while the fault lasts: a save in progress when it was filled may still complete, and
        retention then frees an older checkpoint's space."""
        fd = os.open(self.filler, os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            for _ in range(50):
                have = os.fstat(fd).st_size
                size = have + max(self.free() - keep, 0)
                if size <= have:
                    return have
                try:
                    os.posix_fallocate(fd, 0, size)
                    return size
                except OSError as e:  # the job's save took space between statvfs and fallocate:
                    if e.errno != errno.ENOSPC:  # read the free space again (a soak of seed 33
                        raise  # died here at fault 296)
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def release(self):
        if os.path.exists(self.filler):
            os.remove(self.filler)

    def unmount(self):
        self.release()
        self.unmount_at(self.root)

    @staticmethod
    def unmount_at(root):
        if os.path.ismount(root):
            p = subprocess.run(["umount", root], capture_output=True, text=True)
            if p.returncode != 0:
                fail(f"umount {root}: {p.stderr.strip()}")


def _pick(items, draw):
    return items[min(int(draw * len(items)), len(items) - 1)]


def inject(c, procs, fault, hosts):
    """Injects `fault` into the job running on `hosts` (node1 first); the target, in words."""
    kind, others = fault["kind"], hosts[1:]
    if kind in NODE_KINDS and not others:
        fail(f"{kind}: no node besides node1 is up (the schedule should have brought one back)")
    node = _pick(others, fault["pick"]) if kind in NODE_KINDS else None
    if kind == "rank_kill":
        ranks = procs.ranks()
        if not ranks:
            return None
        rank = _pick(sorted(ranks), fault["pick"])
        signal_all([ranks[rank][0]], signal.SIGKILL)
        return f"rank {rank} on {ranks[rank][1]}"
    if kind == "node_kill":
        c.fault("kill", node)
    elif kind == "power_cut":
        c.fault("kill", node, "--power")
    elif kind == "node_stop":
        c.fault("stop", node)
    elif kind == "link_flap":
        c.fault("link-down", node)
        time.sleep(fault["flap_s"])
        c.fault("link-up", node)
    elif kind == "orted_kill":
        daemons = procs.named(node, "orted")
        if not daemons:
            return None
        signal_all(daemons, signal.SIGKILL)
    elif kind == "preempt":
        # As Slurm pre-empts: SIGTERM to every process of the job on every node.
        n = signal_all([p for h in hosts for p in procs.on_node(h)], signal.SIGTERM)
        return f"{n} processes"
    elif kind == "disk_full":
        return "checkpoint tmpfs"
    return node


def recover(c, procs, fault, target, disk, hosts):
    """After the job ended: the fault undone, every node of the attempt left without a process
    (what a node's reboot does). The processes that outlived the job, in words ([] if none)."""
    kind = fault["kind"]
    if kind == "disk_full":
        disk.release()
    if kind in ("power_cut", "link_flap"):
        c.fault("link-up", target)
    if kind == "node_stop":
        c.fault(fault["recover"], target)
    deadline, left = time.time() + 10, []
    while time.time() < deadline:
        left = [(h, p) for h in hosts for p in procs.on_node(h)]
        if not left:
            return []
        time.sleep(0.2)
    seen = [f"{h}: {d}" for h in hosts for d in procs.describe([p for hh, p in left if hh == h])]
    for h in hosts:  # SIGKILL works on stopped processes too (the power cut's stopped agents)
        if procs.on_node(h):
            c.fault("kill", h)
    if any(procs.on_node(h) for h in hosts):
        fail(f"processes of the job survive SIGKILL after a {kind}: {seen}")
    return seen


def clean_node_files(c, node):
    """Open MPI's session folders and shared-memory segments a killed job leaves on a node's
    private /tmp and /dev/shm, removed as a reboot would; what was there, in words."""
    p = c.run(node, ["sh", "-c", "ls -d /tmp/ompi.* /tmp/tupe-mpirun-* /dev/shm/* 2>/dev/null; "
                                 "rm -rf /tmp/ompi.* /dev/shm/vader_segment.*"], check=False)
    return p.stdout.split()
