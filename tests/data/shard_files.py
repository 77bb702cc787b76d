"""Writes and inspects HDF5 shard files with h5py, independently of the C++ code under test.

  shard_files.py nvidia OUT_DIR        NVIDIA-layout shards (docs/formats.md "NVIDIA DeepLearningExamples BERT shards"), int32 and
                                       int64 variants, plus broken ones
  shard_files.py corrupt SHARD OUT_DIR broken copies of one of our own shards
  shard_files.py inspect SHARD         prints our shard's layout as JSON
  shard_files.py nvidia_big OUT N      one int32 NVIDIA shard of N rows (same formula), gzip in
                                       chunks of 256 rows: many blocks for the on-demand reader
  shard_files.py version1 SRC DST      a copy of our shard as format version 1 wrote it (no
                                       'ordinary_counts' or 'sample_checksums' dataset)
  shard_files.py checksums SHARD       recomputes every sample's CRC-32C (shard_format.h) with
                                       its own bitwise CRC and prints JSON: samples, matching,
                                       and the first mismatching sample indexes

The NVIDIA contents follow a formula that tests/data/test_shards.cpp re-derives:
row r (of N = 12, L = 24, P = 5): n = 10 + 2 * (r % 7) real tokens; ids[0] = 101 ([CLS]),
ids[n-1] = 102 ([SEP]), ids[j] = 1000 + (37 r + 11 j) % 20000 otherwise; m = 1 + r % 4
masked positions 1, 3, ..., 2m - 1 holding 103 ([MASK]) with the original ids as labels;
segment 0 for j < n / 2, 1 for n / 2 <= j < n; next_sentence_labels = r % 2.
"""
import json
import shutil
import sys

import h5py
import numpy as np

N, L, P = 12, 24, 5


def nvidia_arrays(N=N):
    ids = np.zeros((N, L), np.int64)
    mask = np.zeros((N, L), np.int64)
    seg = np.zeros((N, L), np.int64)
    pos = np.zeros((N, P), np.int64)
    lab = np.zeros((N, P), np.int64)
    nsp = np.zeros((N,), np.int64)
    for r in range(N):
        n = 10 + 2 * (r % 7)
        for j in range(n):
            ids[r, j] = 101 if j == 0 else 102 if j == n - 1 else 1000 + (37 * r + 11 * j) % 20000
            mask[r, j] = 1
            seg[r, j] = 0 if j < n // 2 else 1
        for k in range(1 + r % 4):
            p = 1 + 2 * k
            pos[r, k] = p
            lab[r, k] = ids[r, p]
            ids[r, p] = 103
        nsp[r] = r % 2
    return dict(input_ids=ids, input_mask=mask, segment_ids=seg, masked_lm_positions=pos,
                masked_lm_ids=lab, next_sentence_labels=nsp)


def write_nvidia(path, arrays, dtypes, skip=(), override=None):
    with h5py.File(path, "w") as f:
        for name, a in arrays.items():
            if name in skip:
                continue
            data = a.astype(dtypes[name])
            if override and name in override:
                data = override[name]
            f.create_dataset(name, data=data, dtype=data.dtype, compression="gzip")


def nvidia(out):
    a = nvidia_arrays()
    int32 = dict(input_ids="i4", input_mask="i1", segment_ids="i1", masked_lm_positions="i4",
                 masked_lm_ids="i4", next_sentence_labels="i1")
    int64 = {k: "i8" for k in int32}
    write_nvidia(f"{out}/nv_int32_training_0.hdf5", a, int32)
    write_nvidia(f"{out}/nv_int64_training_0.hdf5", a, int64)
    write_nvidia(f"{out}/bad_missing.hdf5", a, int32, skip=("masked_lm_ids",))
    write_nvidia(f"{out}/bad_dtype.hdf5", a, int32, override={"input_ids": a["input_ids"].astype("f4")})
    write_nvidia(f"{out}/bad_shape.hdf5", a, int32, override={"input_mask": a["input_mask"][:, :L - 1].astype("i1")})
    # Truncated: a whole file cut to 60 % of its bytes (random-ish ids so it does not compress away).
    big = dict(a)
    rng = np.random.default_rng(0)
    big["input_ids"] = np.where(a["input_mask"] == 1, rng.integers(1000, 30000, (N, L)), 0)
    write_nvidia(f"{out}/bad_truncated.hdf5", big, int32)
    with open(f"{out}/bad_truncated.hdf5", "r+b") as f:
        f.seek(0, 2)
        f.truncate(int(f.tell() * 0.6))
    with open(f"{out}/not_hdf5.hdf5", "wb") as f:
        f.write(b"this is not an HDF5 file\n" * 10)


def corrupt(src, out):
    def copy(name):
        dst = f"{out}/{name}"
        shutil.copyfile(src, dst)
        return dst
    with h5py.File(copy("own_missing.h5"), "r+") as f:
        del f["sequence_lengths"]
    with h5py.File(copy("own_float_ids.h5"), "r+") as f:
        data = f["token_ids"][...].astype("f4")
        del f["token_ids"]
        f.create_dataset("token_ids", data=data)
    with h5py.File(copy("own_lengths_mismatch.h5"), "r+") as f:
        lengths = f["sequence_lengths"][...]
        lengths[0] -= 1
        del f["sequence_lengths"]
        f.create_dataset("sequence_lengths", data=lengths)
        f.attrs["num_sequences"] = np.int64(len(lengths))
    with h5py.File(copy("own_version.h5"), "r+") as f:
        f.attrs["format_version"] = np.int64(99)
    shutil.copyfile(src, f"{out}/own_truncated.h5")
    with open(f"{out}/own_truncated.h5", "r+b") as f:
        f.seek(0, 2)
        f.truncate(int(f.tell() * 0.5))


def nvidia_big(out, rows):
    a = nvidia_arrays(rows)
    with h5py.File(f"{out}/nv_big_training_0.hdf5", "w") as f:
        for name, arr in a.items():
            dtype = "i4" if name in ("input_ids", "masked_lm_positions", "masked_lm_ids") else "i1"
            chunks = (256,) + arr.shape[1:]
            f.create_dataset(name, data=arr.astype(dtype), compression="gzip", chunks=chunks)


def version1(src, dst):
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        del f["ordinary_counts"]
        if "sample_checksums" in f:
            del f["sample_checksums"]
        f.attrs["format_version"] = np.int64(1)


def crc32c_table():
    """The byte table of CRC-32C (reflected polynomial 0x82F63B78), bit by bit."""
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


def crc32c(data, table=crc32c_table()):
    c = 0xFFFFFFFF
    for byte in data:
        c = (c >> 8) ^ table[(c ^ byte) & 0xFF]
    return c ^ 0xFFFFFFFF


def checksums(path):
    with h5py.File(path, "r") as f:
        tokens = f["token_ids"][...]
        lengths = f["sequence_lengths"][...]
        ordinary = f["ordinary_counts"][...]
        stored = f["sample_checksums"][...]
    # The stored width, little-endian, as the file holds it.
    tokens = tokens.astype(tokens.dtype.newbyteorder("<"))
    starts = np.concatenate([[0], np.cumsum(lengths.astype(np.int64))])
    bad = []
    for i, n in enumerate(lengths):
        record = (np.int32(n).astype("<i4").tobytes() + np.uint16(ordinary[i]).astype("<u2").tobytes()
                  + tokens[starts[i]:starts[i] + n].tobytes())
        if crc32c(record) != int(stored[i]):
            bad.append(i)
    print(json.dumps({"samples": len(lengths), "matching": len(lengths) - len(bad), "bad": bad[:10],
                      "check_vector": crc32c(b"123456789")}))


def inspect(path):
    with h5py.File(path, "r") as f:
        out = {"attrs": {}, "datasets": {}}
        for k, v in f.attrs.items():
            out["attrs"][k] = v.decode() if isinstance(v, bytes) else v.item() if hasattr(v, "item") else v
        for name in f:
            d = f[name]
            out["datasets"][name] = {"dtype": str(d.dtype), "shape": list(d.shape),
                                     "chunks": list(d.chunks) if d.chunks else None,
                                     "compression": d.compression, "sum": int(d[...].astype(np.int64).sum())}
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "nvidia":
        nvidia(sys.argv[2])
    elif cmd == "corrupt":
        corrupt(sys.argv[2], sys.argv[3])
    elif cmd == "nvidia_big":
        nvidia_big(sys.argv[2], int(sys.argv[3]))
    elif cmd == "version1":
        version1(sys.argv[2], sys.argv[3])
    elif cmd == "checksums":
        checksums(sys.argv[2])
    elif cmd == "inspect":
        inspect(sys.argv[2])
    else:
        sys.exit(f"unknown command {cmd}")
