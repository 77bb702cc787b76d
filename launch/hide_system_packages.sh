#!/usr/bin/env bash
# For `launch/gpu_check.sh --rehearse`: makes this machine's own copies of the packages a
# GPU host lacks invisible, then runs the given command. Must run as root inside a private
# mount namespace (gpu_check.sh starts it under `unshare --mount --net`). /usr and /etc get
# an overlay whose upper layer holds whiteouts for the files of the hidden packages (dpkg
# -L; a folder holding nothing else is whited out whole), so they look as if never
# installed: find_package, the compilers and the dynamic loader see only what the carried
# folder brings.
#   hide_system_packages.sh COMMAND [ARGS...]
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "hide_system_packages: needs root (in a private mount namespace)" >&2; exit 1; }
# Open MPI, HDF5, Boost, GoogleTest, JSON, ICU headers, SentencePiece, spdlog/fmt, OpenSSL
# headers and the fabric libraries Open MPI loads: what launch/gpu_prepare.sh carries, or
# what a GPU host would not have. System libraries the build tools here need themselves
# (libssl3, libcurl4, libicu72, ...) stay visible; tupe's executables load the carried
# copies first (their RPATH names the prefix).
pattern='^(libopenmpi|openmpi-|mpi-default|libhdf5|hdf5-|libboost|libgtest|libgmock|googletest|nlohmann-json|libicu-dev|icu-devtools|libsentencepiece|libspdlog|libfmt|libssl-dev|libhwloc|libpmix|libfabric|libucx|libpsm|libibverbs|ibverbs-providers|librdmacm|libmunge|libsz2|libaec|libevent-(core|pthreads))'
work=$(mktemp -d /tmp/tupe-hide.XXXXXX)
dpkg-query -W -f='${Package}\n' | grep -E "$pattern" > "$work/packages" || true
# shellcheck disable=SC2046
dpkg -L $(cat "$work/packages") 2>/dev/null > "$work/paths" || true
/usr/bin/python3 - "$work" <<'PY'
import os, sys
work = sys.argv[1]
roots = ("usr", "etc")
files, dirs = set(), set()
for line in open(os.path.join(work, "paths")):
    p = line.strip()
    if not p.startswith("/"):
        continue
    if p.split("/")[1] in ("lib", "bin", "sbin", "lib64"):  # usrmerge: /lib is /usr/lib
        p = "/usr" + p
    if p.split("/")[1] not in roots:
        continue
    # Only paths reached without symlinked folders (a whiteout there would replace the link).
    if os.path.realpath(os.path.dirname(p)) != os.path.dirname(p):
        continue
    if os.path.islink(p) or os.path.isfile(p):
        files.add(p)
    elif os.path.isdir(p):
        dirs.add(p)

def fully_hidden(d):
    for base, subdirs, names in os.walk(d):
        for n in names:
            if os.path.join(base, n) not in files:
                return False
        for s in subdirs:
            if os.path.islink(os.path.join(base, s)):
                return False
    return True

# Links made by update-alternatives (mpicc, libmpi.so, h5cc, ...) are in no package list:
# hide every link in the usual folders that resolves into what is hidden.
hidden_dirs = {d for d in dirs if fully_hidden(d)}
def is_hidden(real):
    return real in files or any(real.startswith(d + "/") for d in hidden_dirs)
for folder in ("/usr/bin", "/usr/lib/x86_64-linux-gnu", "/usr/include", "/etc/alternatives"):
    for name in os.listdir(folder):
        p = os.path.join(folder, name)
        if os.path.islink(p) and is_hidden(os.path.realpath(p)):
            files.add(p)
whole = set()
for d in sorted(dirs, key=len):  # shortest first: a hidden folder covers what is inside
    if any(d.startswith(w + "/") for w in whole):
        continue
    if d.count("/") >= 3 and fully_hidden(d):
        whole.add(d)
count = 0
for p in sorted(whole) + sorted(f for f in files if not any(f.startswith(w + "/") for w in whole)):
    root = p.split("/")[1]
    target = os.path.join(work, root + "-upper", p[len(root) + 2:])
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.mknod(target, 0o600 | 0o020000, os.makedev(0, 0))  # a character device 0/0 = whiteout
    count += 1
print(f"{len(whole)} folders and {count - len(whole)} files to hide", file=open(os.path.join(work, "count"), "w"))
PY
for root in usr etc; do
  mkdir -p "$work/$root-upper" "$work/$root-work"
  mount -t overlay overlay -o "lowerdir=/$root,upperdir=$work/$root-upper,workdir=$work/$root-work" "/$root"
done
ldconfig  # the loader's cache (now on the overlay) forgets the hidden libraries
# The GPU host has no network but does have loopback (Open MPI's wire-up needs it); a new
# network namespace starts with lo down.
ip link set lo up 2>/dev/null || true
echo "hide_system_packages: $(wc -l < "$work/packages") packages hidden ($(cat "$work/count")); network: $(ip -o link 2>/dev/null | awk -F': ' '{printf "%s ", $2}')"
exec "$@"
