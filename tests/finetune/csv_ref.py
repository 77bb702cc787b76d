"""Writes a CSV file with Python's csv module (the reference RFC 4180 writer) from GLUE rows,
plus the same rows as JSON for the C++ test to compare with. Usage: csv_ref.py GLUE_TSV OUT.csv OUT.json
The rows get awkward on purpose: every 7th text gains an embedded line break (LF or CRLF),
every 5th a '"quoted"' part; lines end in CRLF (csv's default)."""
import csv
import json
import sys

src, out_csv, out_json = sys.argv[1:4]
with open(src, encoding="utf-8", newline="") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
header, body = rows[0], rows[1:400]
for i, r in enumerate(body):
    if i % 7 == 3:
        r[0] = r[0] + ("\r\nsecond line" if i % 2 else "\nsecond line")
    if i % 5 == 1:
        r[0] = r[0] + ' and "quoted", too'
with open(out_csv, "w", encoding="utf-8", newline="") as f:
    csv.writer(f).writerows([header] + body)
with open(out_csv, encoding="utf-8", newline="") as f:
    back = list(csv.reader(f))
assert back == [header] + body, "csv round trip"
json.dump({"header": header, "rows": body}, open(out_json, "w", encoding="utf-8"))
print(f"wrote {len(body)} rows")
