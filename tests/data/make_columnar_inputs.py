"""Parquet and Arrow inputs of `tupe preprocess`, written with pyarrow and `datasets`, from real text.

Usage: make_columnar_inputs.py WIKITEXT MIXED_ENGLISH OUTDIR [ROWS_PER_GROUP]

The rows, Wikipedia-like (columns id, url, title, text): one per article of WIKITEXT
(WikiText-2 raw: an article starts at a ` = Title = ` line; its text is its paragraphs joined
by \\n), then one per document of MIXED_ENGLISH (blank-line separated; title "mixed-english"),
with three rows' text null (rows 5, 100 and the last). Writes in OUTDIR:
  corpus.parquet        row groups of ROWS_PER_GROUP (default 40) rows, page checksums on
  corpus.arrows         the Arrow IPC stream format, record batches of ROWS_PER_GROUP rows
  corpus.feather        the Arrow IPC file format (ARROW1), the same batches
  corpus-ds/            datasets.Dataset.from_dict(rows).save_to_disk(num_shards=2)
  corpus.jsonl          the non-null rows as JSON lines (json.dumps), the export to compare with
  corpus.json           facts for the tests: rows, row groups, pyarrow's null_count, the nulls' rows
and, with 4 row groups or more, the bad inputs (bad-*): no "text" column, an int64 "text", a binary "text", invalid
UTF-8 in row 3 of row group 2, a flipped byte in the text pages of row group 3 (its page
CRC then fails), the footer cut off, an Arrow stream cut inside its 4th record batch, and a
DatasetDict folder (dataset_dict.json above train/ and test/).
"""
import json
import os
import re
import shutil
import sys

import datasets
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq


def wiki_articles(path):
    lines = open(path, encoding="utf-8").read().replace("\r", "").split("\n")
    articles, title, paras = [], None, []
    for line in lines:
        m = re.match(r"^ = ([^=].*) = $", line)
        if m:
            if title is not None:
                articles.append((title, "\n".join(paras)))
            title, paras = m.group(1), []
        elif line.strip() and title is not None:
            paras.append(line)
    if title is not None:
        articles.append((title, "\n".join(paras)))
    return articles


def blank_line_documents(path):
    text = open(path, encoding="utf-8").read()
    docs, cur = [], []
    for line in text.split("\n"):
        if line.strip():
            cur.append(line)
        elif cur:
            docs.append("\n".join(cur))
            cur = []
    if cur:
        docs.append("\n".join(cur))
    return docs


def main():
    wiki, mixed, out = sys.argv[1:4]
    per_group = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    rows = [(t, x) for t, x in wiki_articles(wiki)] + [("mixed-english", d) for d in blank_line_documents(mixed)]
    n = len(rows)
    null_rows = [5, 100, n - 1]
    cols = {
        "id": list(range(n)),
        "url": [f"https://en.wikipedia.org/wiki?curid={i}" for i in range(n)],
        "title": [t for t, _ in rows],
        "text": [None if i in null_rows else x for i, (_, x) in enumerate(rows)],
    }
    table = pa.table(cols)
    p = lambda name: os.path.join(out, name)
    pq.write_table(table, p("corpus.parquet"), row_group_size=per_group, write_page_checksum=True)
    batches = table.to_batches(max_chunksize=per_group)
    with ipc.new_stream(p("corpus.arrows"), table.schema) as w:
        for b in batches:
            w.write_batch(b)
    with ipc.new_file(p("corpus.feather"), table.schema) as w:
        for b in batches:
            w.write_batch(b)
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict(cols).save_to_disk(p("corpus-ds"), num_shards=2)
    with open(p("corpus.jsonl"), "w", encoding="utf-8") as f:
        for i, x in enumerate(cols["text"]):
            if x is not None:
                f.write(json.dumps({"id": i, "text": x}) + "\n")
    pf = pq.ParquetFile(p("corpus.parquet"))
    facts = {"rows": n, "row_groups": pf.num_row_groups, "null_count": table.column("text").null_count,
             "null_rows": null_rows, "rows_per_group": per_group,
             "record_batches": len(batches)}

    if pf.num_row_groups < 4:  # the bad inputs need row groups 2 and 3
        json.dump(facts, open(p("corpus.json"), "w"))
        print(f"{out}: {n} rows, {pf.num_row_groups} row groups, {facts['null_count']} nulls (no bad inputs)")
        return
    # Bad inputs.
    pq.write_table(table.rename_columns(["id", "url", "title", "body"]), p("bad-missing.parquet"))
    pq.write_table(pa.table({"text": pa.array(range(n), pa.int64()), "body": cols["title"]}), p("bad-int.parquet"))
    pq.write_table(pa.table({"text": pa.array([t.encode() for t, _ in rows], pa.binary())}), p("bad-binary.parquet"))
    # Invalid UTF-8 in a string column: row 3 of row group 2 (pyarrow writes the bytes as they are).
    texts = [x if x is not None else "" for x in cols["text"]]
    bad_row = 2 * per_group + 3
    data = b"".join(t.encode() if i != bad_row else b"caf\xe9 au lait" for i, t in enumerate(texts))
    offsets, pos = [0], 0
    for i, t in enumerate(texts):
        pos += len(t.encode()) if i != bad_row else len(b"caf\xe9 au lait")
        offsets.append(pos)
    bad_text = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(pa.array(offsets, pa.int32()).buffers()[1]),
                                                       pa.py_buffer(data)])
    pq.write_table(pa.table({"id": cols["id"], "text": bad_text}), p("bad-utf8.parquet"), row_group_size=per_group)
    # A flipped byte in the text column's pages of row group 3 (its data page CRC fails).
    meta = pf.metadata
    text_col = meta.schema.names.index("text")
    chunk = meta.row_group(3).column(text_col)
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    raw = bytearray(open(p("corpus.parquet"), "rb").read())
    at = start + chunk.total_compressed_size - 20
    raw[at] ^= 0x5A
    open(p("bad-page.parquet"), "wb").write(bytes(raw))
    raw = open(p("corpus.parquet"), "rb").read()
    open(p("bad-cut.parquet"), "wb").write(raw[: len(raw) * 2 // 3])
    # An Arrow stream cut inside its 4th record batch's body.
    raw = open(p("corpus.arrows"), "rb").read()
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
        for b in batches[:3]:
            w.write_batch(b)
    three = len(sink.getvalue().to_pybytes()) - 8  # without the end-of-stream marker
    open(p("bad-cut.arrows"), "wb").write(raw[: three + 2000])
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_dict(cols), "test": datasets.Dataset.from_dict(cols)})
    dd.save_to_disk(p("bad-dict"))
    facts["bad_utf8"] = {"row_group": 2, "row": 3, "file_row": bad_row}
    json.dump(facts, open(p("corpus.json"), "w"))
    print(f"{out}: {n} rows, {pf.num_row_groups} row groups, {facts['null_count']} nulls")


if __name__ == "__main__":
    main()
