"""The same documents of a real text file in every input format `tupe preprocess` reads.

Usage: make_format_inputs.py SOURCE OUTDIR NAME line|blank_line [--columnar]
Writes OUTDIR/NAME.txt (SOURCE's bytes), NAME.txt.gz (two gzip members, cut mid-file),
NAME.txt.zst (the zstd command), NAME.jsonl (one record per document: its lines joined by
\n in "text", an "id" before it and a nested decoy "text" in "meta"), NAME.jsonl.gz and
NAME.jsonl.zst, NAME.gzdata (gzip under a name that says nothing), and NAME-bad.jsonl.gz:
the JSON lines with record 2001 (or the last) holding a number as its text. Documents as
`preprocess.documents` cuts them: one per non-blank line, or runs of non-blank lines.
With --columnar also NAME.parquet (the documents as rows of a "text" column beside an "id",
row groups of 1000 rows) and NAME-ds/ (datasets' save_to_disk of the same columns), with
pyarrow and datasets. Fails when the zstd command is missing.
"""
import gzip
import json
import os
import subprocess
import sys


def blank(line):
    return all(c <= " " or c == "\x7f" or "\x80" <= c <= "\x9f" for c in line)


def documents(text, mode):
    lines = [l[:-1] if l.endswith("\r") else l for l in text.lstrip("\ufeff").split("\n")]
    docs, cur = [], []
    for line in lines:
        if blank(line):
            if cur:
                docs.append(cur)
            cur = []
        elif mode == "line":
            docs.append([line])
        else:
            cur.append(line)
    if cur:
        docs.append(cur)
    return docs


def main():
    source, outdir, name, mode = sys.argv[1:5]
    os.makedirs(outdir, exist_ok=True)
    base = os.path.join(outdir, name)
    raw = open(source, "rb").read()
    open(base + ".txt", "wb").write(raw)
    half = len(raw) // 2
    open(base + ".txt.gz", "wb").write(gzip.compress(raw[:half]) + gzip.compress(raw[half:]))
    open(base + ".gzdata", "wb").write(gzip.compress(raw))
    records = "".join(
        json.dumps({"id": i, "meta": {"text": "decoy", "n": [1, 2]}, "text": "\n".join(d)}, ensure_ascii=i % 2 == 0) + "\n"
        for i, d in enumerate(documents(raw.decode("utf-8"), mode)))
    open(base + ".jsonl", "w", encoding="utf-8").write(records)
    open(base + ".jsonl.gz", "wb").write(gzip.compress(records.encode("utf-8")))
    lines = records.splitlines(keepends=True)
    lines[min(2000, len(lines) - 1)] = '{"id": 2000, "text": 5}\n'
    open(base + "-bad.jsonl.gz", "wb").write(gzip.compress("".join(lines).encode("utf-8")))
    for ext in (".txt", ".jsonl"):
        subprocess.run(["zstd", "-q", "-f", base + ext, "-o", base + ext + ".zst"], check=True)
    if "--columnar" in sys.argv[5:]:
        import datasets
        import pyarrow as pa
        import pyarrow.parquet as pq
        texts = ["\n".join(d) for d in documents(raw.decode("utf-8"), mode)]
        cols = {"id": list(range(len(texts))), "text": texts}
        pq.write_table(pa.table(cols), base + ".parquet", row_group_size=1000)
        datasets.disable_progress_bars()
        datasets.Dataset.from_dict(cols).save_to_disk(base + "-ds")
    print(f"{base}.*: {len(raw)} bytes of text, {records.count(chr(10))} records")


if __name__ == "__main__":
    main()
